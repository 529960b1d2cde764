// The fused kernel's warp-level primitives (part of fused.cu): PTX on the GPU, the host
// emulator's functions under VOXPIPE_EMU (emu/emu.h):
//
//   vf_pack(lo, hi)   = two floats as an fp16 pair (round to nearest)
//   ldmatrix(.trans)  = four 8x8 fp16 matrices from shared memory into a warp's fragments
//   mma m16n8k16      = D[16x8] = A[16x16] (fp16) * B[16x8] (fp16) + C[16x8] (fp32 accumulation)
#pragma once

// ---- warp-level primitives (PTX on the GPU; kernels/emu emulates them on the host) ----

__device__ __forceinline__ unsigned vf_pack(float lo, float hi) {
#if defined(__CUDA_ARCH__)
	unsigned r;
	asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
#elif defined(VOXPIPE_EMU)
	return emu_pack_half2(lo, hi);
#else
	return 0;
#endif
}

__device__ __forceinline__ unsigned short vf_half(float v) {
#if defined(__CUDA_ARCH__)
	unsigned short r;
	asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(r) : "f"(v));
	return r;
#elif defined(VOXPIPE_EMU)
	return emu_half_bits(v);
#else
	return 0;
#endif
}

// ldmatrix .x4: lanes 8j..8j+7 give the row addresses of matrix j; lane t gets register j =
// row t/4, elements 2(t%4), 2(t%4)+1 (TRANS: column t/4, rows 2(t%4), 2(t%4)+1).
template <bool TRANS> __device__ __forceinline__ void vf_ldsm4(unsigned (&r)[4], const void* p) {
#if defined(__CUDA_ARCH__)
	const unsigned a = (unsigned)__cvta_generic_to_shared(p);
	if (TRANS) {
		asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
	} else {
		asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
	}
#elif defined(VOXPIPE_EMU)
	emu_ldmatrix_x4(r, p, TRANS);
#endif
}

// d += A*B, m16n8k16, fp16 A (4 regs) and B (2 regs), fp32 d.
__device__ __forceinline__ void vf_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__)
	asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
	    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif defined(VOXPIPE_EMU)
	emu_mma_m16n8k16(d, a, b0, b1);
#endif
}

__device__ __forceinline__ float vf_shfl_xor(float v, int m) {
#if defined(__CUDA_ARCH__)
	return __shfl_xor_sync(0xffffffffu, v, m);
#elif defined(VOXPIPE_EMU)
	return emu_shfl_xor(v, m);
#else
	return v;
#endif
}
__device__ __forceinline__ int vf_shfl_xor(int v, int m) {
#if defined(__CUDA_ARCH__)
	return __shfl_xor_sync(0xffffffffu, v, m);
#elif defined(VOXPIPE_EMU)
	return emu_shfl_xor(v, m);
#else
	return v;
#endif
}

// vf_warp_uniform: v (the same in every lane) as lane 0's, which the compiler then knows is
// warp-uniform.
__device__ __forceinline__ int vf_warp_uniform(int v) {
#if defined(__CUDA_ARCH__)
	return __shfl_sync(0xffffffffu, v, 0);
#else
	return v;
#endif
}

// The block barrier of a plane step. The conv2 and dilated-conv warps reach it from different
// code (their own step loops), which bar.sync (= barrier.sync.aligned, what __syncthreads
// compiles to) does not allow: PTX's .aligned promises that every thread executes the same
// barrier instruction. barrier.sync without .aligned (sm_70+) counts arrivals from anywhere in
// the block (compute-sanitizer's synccheck flagged the aligned one).
__device__ __forceinline__ void vf_barrier() {
#if defined(__CUDA_ARCH__)
	asm volatile("barrier.sync 0;\n" ::: "memory");
#else
	__syncthreads();
#endif
}

// fp16 of a value the network may make large: saturate instead of overflowing to inf.
__device__ __forceinline__ float vf_sat(float v) { return fminf(fmaxf(v, -VF_HALF_MAX), VF_HALF_MAX); }

// v - fp16(v): the part of v that fp16 rounding drops (v already saturated).
__device__ __forceinline__ float vf_half_rest(float v) {
#if defined(__CUDA_ARCH__)
	float r;
	asm("{\n.reg .f16 h;\ncvt.rn.f16.f32 h, %1;\ncvt.f32.f16 %0, h;\n}\n" : "=f"(r) : "f"(v));
	return v - r;
#elif defined(VOXPIPE_EMU)
	return v - emu_half_float(emu_half_bits(v));
#else
	return 0.f;
#endif
}

// fp16x2 of (lo, hi) after relu and saturation: the same bits as vf_pack(vf_sat(fmaxf(lo, 0)),
// vf_sat(fmaxf(hi, 0))) (up to the sign of zero) in two instructions instead of seven: round,
// clamp negatives to 0 (cvt .relu), then clamp +inf (an fp32 value >= 65520) to 65504.
__device__ __forceinline__ unsigned vf_pack_relu_sat(float lo, float hi) {
#if defined(__CUDA_ARCH__)
	unsigned r;
	asm("cvt.rn.relu.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
	asm("min.f16x2 %0, %0, %1;\n" : "+r"(r) : "r"(0x7BFF7BFFu));
	return r;
#elif defined(VOXPIPE_EMU)
	return emu_pack_half2(vf_sat(fmaxf(lo, 0.f)), vf_sat(fmaxf(hi, 0.f)));
#else
	return 0;
#endif
}
