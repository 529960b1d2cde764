// mma_peak_*: the tensor-core ceiling of mma.sync m16n8k16 on this GPU (fp16 operands), for the
// fused kernel's roofline: each warp runs `iters` rounds of NACC independent mma into NACC
// accumulators, operands in registers (no memory traffic). FLOP = 2*16*8*16 per mma.
//   acc[i] += A*B   (i = 0..NACC-1), repeated iters times
// The accumulators are written out so the compiler keeps the work.
#define NACC 8

extern "C" __global__ void mma_peak_f32(float* out, int iters) {
	unsigned a[4], b[2];
	const unsigned seed = threadIdx.x * 0x9E3779B9u;
	for (int i = 0; i < 4; ++i) a[i] = (seed ^ (i * 0x01000100u)) & 0x3BFF3BFFu;
	b[0] = (seed >> 3) & 0x3BFF3BFFu;
	b[1] = (seed >> 5) & 0x3BFF3BFFu;
	float d[NACC][4] = {};
	for (int it = 0; it < iters; ++it) {
#pragma unroll
		for (int k = 0; k < NACC; ++k)
			asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
			             : "+f"(d[k][0]), "+f"(d[k][1]), "+f"(d[k][2]), "+f"(d[k][3])
			             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
	}
	float s = 0.f;
	for (int k = 0; k < NACC; ++k) s += d[k][0] + d[k][1] + d[k][2] + d[k][3];
	out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

extern "C" __global__ void mma_peak_f16(float* out, int iters) {
	unsigned a[4], b[2];
	const unsigned seed = threadIdx.x * 0x9E3779B9u;
	for (int i = 0; i < 4; ++i) a[i] = (seed ^ (i * 0x01000100u)) & 0x3BFF3BFFu;
	b[0] = (seed >> 3) & 0x3BFF3BFFu;
	b[1] = (seed >> 5) & 0x3BFF3BFFu;
	unsigned d[NACC][2] = {};
	for (int it = 0; it < iters; ++it) {
#pragma unroll
		for (int k = 0; k < NACC; ++k)
			asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};\n"
			             : "+r"(d[k][0]), "+r"(d[k][1])
			             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
	}
	unsigned s = 0;
	for (int k = 0; k < NACC; ++k) s ^= d[k][0] ^ d[k][1];
	out[blockIdx.x * blockDim.x + threadIdx.x] = __int_as_float(s);
}
