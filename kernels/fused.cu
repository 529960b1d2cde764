// fused_i16, fused_f32: the whole network for a slab in one kernel, fp16 operands on the tensor
// cores (mma.sync m16n8k16, fp32 accumulation), intermediates in registers and shared memory.
//
//   x     = float(v)*scale + shift (two roundings, as segment.Norm.Apply), 0 outside the volume,
//           then fp16
//   e     = relu(conv1(x)), fp32 accumulation, stored as fp16; 0 outside the volume
//   s     = relu(conv3x3x3(e; w2) + b2)               fp16 e and w2, fp32 accumulation
//   g     = relu(conv3x3x3 dilation 2(e; wg) + bg)    likewise
//   q     = relu(wx.s + wg'.g + bx + bg')             s, g and the gate weights as fp16, fp32 sums
//   a     = sigmoid(psi.q + bpsi)                     fp32 (approximate exp and divide)
//   f     = a*s + g                                   fp32
//   logit = head.f + bh                               f and head as fp16, fp32 sums
//   label = argmax (lowest class on ties), uint8
//
// Work split. A block owns a VF_TX x VF_ROWS tile of output voxels in x-y and a chunk of zChunk
// output planes of the slab, and streams along z one e plane per step. Conv warp c < VF_CW
// computes conv2 for tile rows 2c and 2c+1 (M = 32: two m16 tiles), warp VF_CW+c the dilated
// conv for the same rows (fused_body). The convs' 27x16x16 weights are fp16 in
// shared memory; per tap and dz one ldmatrix.x4 gives the B fragments of both n halves, used by
// the 4 mma of the two rows. One mma covers 16 voxels of a row (M), 8 output channels (N) and
// all 16 input channels (K). The A fragments of tap (dy,dx) of the current e plane are loaded once
// (ldmatrix) and used for all three dz: the output planes in flight (3 for conv2, 5 for the
// dilated conv, per row) stay in registers as accumulators, so an e plane is read once per warp.
// When a plane is complete, the conv2 warp leaves s in shared memory (fp32) and the dilated-conv
// warp, one step later, runs the gate, head and argmax on s and g: the accumulator layout of two
// n8 tiles is the A layout of a k16 mma, so s, g and f go straight into the gate and head mma.
// (The previous kernel, one row per warp with its conv's weights as B fragments in 108 of a lane's
// 128 registers, was 28 % slower on the H200; it is in the history before 2026-12-02 21:30.)
//
// e is made in the block: conv1 as an implicit GEMM on the tensor cores (M = 16 e voxels, K = 27
// taps padded to 32, N = 16 channels), A fragments with ldmatrix.trans from three x-shifted fp16
// copies of the normalised input planes (so every ldmatrix row is 16-byte aligned). e planes are
// kept channel-last in shared memory for the tile plus a 2-voxel halo (double-buffered: the next
// plane is made while the current one is read); the 16-byte halves of each voxel are swapped on
// every other group of four voxels, so the eight rows of every ldmatrix hit distinct banks.
//
// Slab layout (as the float32 kernels): in holds planes global z0-3 .. z0+nzOut+2 (plane q is
// global z0-3+q; planes outside [0, nz) are never read), labels [nzOut][ny][nx].
// Weights: one float32 buffer in the VF_OFF_* layout below (module_cuda.go's packFused).
#include "common.cuh"

#define VF_TX 16 // output voxels per tile row: the mma's M
// Tile rows (y): VF_ROWS/2 warps per conv of two rows each. 16 rows need ~109 KiB of
// shared memory per block, which sm_90 has (227 KiB) and sm_86/89 have not (99 KiB): they, sm_80
// and the compute_80 PTX get 12 rows (~92 KiB; 13 % slower on the H200, docs/perf.md). The host
// reads the geometry of the code it loaded from fused_geometry.
#define VF_ROWS_SM90 16
#define VF_ROWS_SM80 12
#ifndef VF_ROWS
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define VF_ROWS VF_ROWS_SM80
#else
#define VF_ROWS VF_ROWS_SM90
#endif
#endif
// Fewer than 4 rows computed wrong labels in the one-row-per-warp kernel (found by the GPU variant
// run, reproduced in the host emulator with -DVF_ROWS=2 and 3); not tried with this one, so such
// builds stay refused.
static_assert(VF_ROWS >= 4, "fused kernel: VF_ROWS below 4 gives wrong labels (docs/perf.md)");
static_assert(VF_ROWS % 2 == 0, "fused kernel: each conv warp computes two tile rows");
#define VF_RPW 2                 // tile rows per conv warp (M = 32)
#define VF_CW (VF_ROWS / VF_RPW) // warps per conv; the conv2 warps also make conv1
#define VF_WARPS (2 * VF_CW)
#define VF_THREADS (32 * VF_WARPS)
#define VF_EW 24            // e plane width in voxels: tile x -2 .. +21 (three ldmatrix segments of 8)
#define VF_EH (VF_ROWS + 4) // e plane rows: tile y -2 .. VF_ROWS+1
#define VF_XW 24            // x copy width (fp16)
#define VF_XH (VF_ROWS + 6) // x rows: tile y -3 .. VF_ROWS+2
#define VF_XRAW 26          // x columns loaded: tile x -3 .. +22
#define VF_NSEG (3 * VF_EH) // conv1 segments of 8 e voxels per plane
#define VF_NGROUP ((VF_NSEG + 1) / 2)

// Weight buffer layout (float32 offsets). Convs [tap][co][ci], tap = (dz*3+dy)*3+dx.
#define VF_OFF_W1 0       // [27][16]: tap, co
#define VF_OFF_B1 432     // [16]
#define VF_OFF_W2 448     // [27][16][16]
#define VF_OFF_B2 7360    // [16]
#define VF_OFF_WG 7376    // [27][16][16]
#define VF_OFF_BG 14288   // [16]
#define VF_OFF_GX 14304   // [8][16]: gate wx
#define VF_OFF_GXB 14432  // [8]
#define VF_OFF_GG 14440   // [8][16]: gate wg
#define VF_OFF_GGB 14568  // [8]
#define VF_OFF_PSI 14576  // [8]
#define VF_OFF_PSIB 14584 // [1] (+7 padding)
#define VF_OFF_HW 14592   // [16][16]: class, channel
#define VF_OFF_HB 14848   // [16]
#define VF_WEIGHTS 14864

#define VF_HALF_MAX 65504.f

// The block's shared memory (VfSmem) comes from the launch (dynamic: a static allocation may not
// exceed 48 KiB); the host learns its size from fused_geometry and asks for it
// (cuFuncSetAttribute). At most VF_SMEM_BYTES, what sm_86/89 allow per block.
#define VF_SMEM_BYTES 101376

// Timing experiments only (scripts/gpu-build.sh builds variants with these; the committed fatbin
// has none): leave a stage out to see what it costs. The labels are then wrong.
#ifndef VF_SKIP
#define VF_SKIP 0
#endif
#define VF_SKIP_CONV1 1    // no conv1 mma (e planes are whatever shared memory holds)
#define VF_SKIP_EPILOGUE 2 // no gate, head, argmax, label store
#define VF_SKIP_CONVS 4    // no conv2 / dilated-conv mma
// VF_HEAD_SPLIT: the head with f and its weights split into fp16 high and low parts
// (hi*hi + lo*hi + hi*lo: 3 mma per n8 tile instead of 1), close to a float32 head.
// VF_FAST_SIGMOID: the gate's sigmoid with the hardware's approximate exp and divide (a few ulp
// of fp32 off; the attention weight a then multiplies fp16 values). It sits on the slowest warps'
// critical path: 7 % of the kernel time on the H200, labels identical on the variant test's
// 16.7 M voxels (docs/perf.md). The host emulator computes it exactly (expf, division).
#ifndef VF_FAST_SIGMOID
#define VF_FAST_SIGMOID 1
#endif
#ifndef VF_HEAD_SPLIT
#define VF_HEAD_SPLIT 1
#endif

struct VfSmem {
	// e planes: [buf][pos*8 + (chunk ^ bit 2 of pos)*4 + word], pos = row*VF_EW + col, 8 fp16
	// channels per chunk, two per word.
	__align__(16) unsigned e[2][VF_EH * VF_EW * 8];
	// Normalised input planes, fp16: [ring slot][copy dx][row][i] = x(tile x -3+dx+i).
	__align__(16) unsigned short x[4][3][VF_XH][VF_XW];
	__align__(16) unsigned zero[4]; // the rows of conv1's padding taps 27..31
	// s of the plane just finished, fp32 in accumulator order: [buf][row][n-half][lane][4].
	__align__(16) float s[2][VF_ROWS][2][32][4];
	// Per-lane fragments and biases.
	unsigned w1[2][2][32][2]; // conv1 B: [k step][n half][lane][reg]
	float b1[32][4], b2[32][4], bg[32][4];
	unsigned gx[32][2], gg[32][2], hw[2][32][2], hwl[2][32][2]; // hwl: head weights' fp16 rounding rest
	float gb[32][2], psi[32][2], hb[2][32][2];
	float psib;
	// The convs' weights as fp16 [conv][tap][n = co][k = ci], the two 8-element halves of a row
	// swapped when bit 2 of n is set, so the 8 rows of an ldmatrix phase hit distinct banks.
	__align__(16) unsigned short wsm[2][27][16][16];
};
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
static_assert(sizeof(VfSmem) <= VF_SMEM_BYTES, "fused kernel: VfSmem outgrew what sm_80-89 allow per block");
#endif

// The launch geometry of the fused kernels in this build: tile rows, threads per block, dynamic
// shared memory per block (kernels.LoadModule reads it).
extern "C" __device__ const int fused_geometry[3] = {VF_ROWS, VF_THREADS, (int)sizeof(VfSmem)};

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

// ---- per-thread input load: one raw x value of a plane, normalised ----

struct VfGeom {
	int nx, ny, nz, z0, x0, y0;
	float scale, shift;
};

// VfXLoader loads thread tid's element (row tid/VF_XRAW, column tid%VF_XRAW) of x planes: the
// thread's x-y position is fixed for the whole block, so its bounds and address are worked out
// once (nullptr: outside the volume or beyond the plane).
template <typename T> struct VfXLoader {
	const T* p; // the thread's voxel in slab plane 0 (slab-relative z -3)
	size_t plane;

	__device__ __forceinline__ VfXLoader(const T* __restrict__ in, const VfGeom& G, int tid) {
		plane = (size_t)G.nx * G.ny;
		const int gy = G.y0 - 3 + tid / VF_XRAW, gx = G.x0 - 3 + tid % VF_XRAW;
		p = nullptr;
		if (tid < VF_XH * VF_XRAW && gy >= 0 && gy < G.ny && gx >= 0 && gx < G.nx) p = in + (size_t)gy * G.nx + gx;
	}
	// fetch starts the load of x plane rel (slab-relative z); normalise, called as late as
	// possible, finishes it: a step's work hides the load's latency (the warp stalls at the
	// first use of the loaded register, not at the load). 0 outside the volume.
	struct Raw {
		T v;
		bool in;
	};
	__device__ __forceinline__ Raw fetch(const VfGeom& G, int rel) const {
		const int gz = G.z0 + rel;
		Raw r{T(0), p != nullptr && gz >= 0 && gz < G.nz};
		if (r.in) r.v = __ldg(p + (size_t)(rel + 3) * plane);
		return r;
	}
	__device__ __forceinline__ float normalise(const VfGeom& G, Raw r) const {
		return r.in ? __fadd_rn(__fmul_rn((float)r.v, G.scale), G.shift) : 0.f;
	}
	__device__ __forceinline__ float load(const VfGeom& G, int rel) const { return normalise(G, fetch(G, rel)); }
};

__device__ __forceinline__ void vf_store_x(VfSmem& sm, int slot, int tid, float v) {
	if (tid >= VF_XH * VF_XRAW) return;
	const int r = tid / VF_XRAW, c = tid % VF_XRAW;
	const unsigned short h = vf_half(vf_sat(v));
#pragma unroll
	for (int d = 0; d < 3; ++d) {
		const int i = c - d;
		if (i >= 0 && i < VF_XW) sm.x[slot][d][r][i] = h;
	}
}

// ---- conv1: e plane (slab-relative q) into e buffer buf, from x slots xs, xs+1, xs+2 ----

// Conv2 warp `row` makes conv1 groups row, row+VF_ROWS, ... of every e plane (a group: two
// segments of 8 e voxels, M = 16). VfConv1Plan holds what does not change from plane to plane,
// worked out once: lane l addresses row l%8 of A matrix l/8 (matrices 0/2: the group's first
// segment, 1/3: its second; k = 16h + 8(j>>1) + row). Padding taps k = 27..31 read tap 0's row:
// any finite value does, since their B rows are zero.
#define VF_G1 ((VF_NGROUP + VF_CW - 1) / VF_CW) // conv1 groups per conv2 warp (at most)
struct VfConv1Plan {
	int dz[2];          // per k step h: the lane's tap's plane offset
	int aoff[VF_G1][2]; // per group and k step: the lane's A row in an x slot (fp16 elements)
	int eoff[VF_G1][2]; // per group and row half m: the lane's e word for channels 0-7 (8-15: ^4)
	unsigned store;     // bit 2k+m: group k's row half m exists
	unsigned inside;    // bit 2k+m: ... and lies inside the volume in x-y (else zeros are stored)
	float b1[4];
};

__device__ __forceinline__ VfConv1Plan vf_conv1_plan(const VfSmem& sm, const VfGeom& G, int row, int lane) {
	VfConv1Plan P;
	const int j = lane >> 3, r = lane & 7, g = lane >> 2, q = lane & 3;
	int off[2];
#pragma unroll
	for (int h = 0; h < 2; ++h) {
		const int k = 16 * h + 8 * (j >> 1) + r;
		const int dz = k / 9, dy = k / 3 % 3, dx = k % 3;
		P.dz[h] = k < 27 ? dz : 0;
		off[h] = k < 27 ? (dx * VF_XH + dy) * VF_XW : 0;
	}
	P.store = P.inside = 0;
#pragma unroll
	for (int kk = 0; kk < VF_G1; ++kk) {
		const int gi = min(row + kk * VF_CW, VF_NGROUP - 1);
		const bool real = row + kk * VF_CW < VF_NGROUP;
		const int segA = 2 * gi, segB = min(2 * gi + 1, VF_NSEG - 1);
		const bool hasB = 2 * gi + 1 < VF_NSEG;
		const int seg = (j & 1) ? segB : segA;
#pragma unroll
		for (int h = 0; h < 2; ++h) P.aoff[kk][h] = off[h] + seg / 3 * VF_XW + seg % 3 * 8;
#pragma unroll
		for (int m = 0; m < 2; ++m) {
			const int sg = m ? segB : segA;
			const int er = sg / 3, col = sg % 3 * 8 + g;
			const int gy = G.y0 - 2 + er, gx = G.x0 - 2 + col;
			const int pos = er * VF_EW + col;
			P.eoff[kk][m] = pos * 8 + ((pos >> 2) & 1) * 4 + q;
			const bool store = real && (m == 0 || hasB);
			if (store) P.store |= 1u << (2 * kk + m);
			if (store && gy >= 0 && gy < G.ny && gx >= 0 && gx < G.nx) P.inside |= 1u << (2 * kk + m);
		}
	}
#pragma unroll
	for (int i = 0; i < 4; ++i) P.b1[i] = sm.b1[lane][i];
	return P;
}

__device__ __forceinline__ void vf_conv1(VfSmem& sm, int buf, int xs, bool planeInside, const VfConv1Plan& P, int first,
                                         int stride, int lane) {
	unsigned* eb = sm.e[buf];
	if (!planeInside) { // zero padding in z
		for (int i = first * 32 + lane; i < VF_EH * VF_EW * 8; i += stride * 32) eb[i] = 0u;
		return;
	}
	if (VF_SKIP & VF_SKIP_CONV1) return;
	const unsigned short* xa = &sm.x[(xs + P.dz[0]) & 3][0][0][0];
	const unsigned short* xb = &sm.x[(xs + P.dz[1]) & 3][0][0][0];
#pragma unroll
	for (int kk = 0; kk < VF_G1; ++kk) {
		if (!(P.store >> (2 * kk) & 1)) break; // warp-uniform: this warp has no group kk
		unsigned a[2][4];
		vf_ldsm4<true>(a[0], xa + P.aoff[kk][0]);
		vf_ldsm4<true>(a[1], xb + P.aoff[kk][1]);
		float acc[2][4];
#pragma unroll
		for (int nh = 0; nh < 2; ++nh) {
#pragma unroll
			for (int i = 0; i < 4; ++i) acc[nh][i] = P.b1[2 * nh + (i & 1)];
			vf_mma(acc[nh], a[0], sm.w1[0][nh][lane][0], sm.w1[0][nh][lane][1]);
			vf_mma(acc[nh], a[1], sm.w1[1][nh][lane][0], sm.w1[1][nh][lane][1]);
		}
		// Rows g (first segment) and g+8 (second), channels 8nh+2q, +1.
#pragma unroll
		for (int m = 0; m < 2; ++m) {
			const unsigned bit = 1u << (2 * kk + m);
			if (!(P.store & bit)) continue;
#pragma unroll
			for (int nh = 0; nh < 2; ++nh) {
				unsigned h = vf_pack_relu_sat(acc[nh][2 * m], acc[nh][2 * m + 1]);
				if (!(P.inside & bit)) h = 0u;
				eb[P.eoff[kk][m] ^ (nh * 4)] = h;
			}
		}
	}
}

// ---- the conv warps: one e plane into the planes in flight ----

// vf_conv_offsets: the lane's A row (ldmatrix address, in e words) of taps (dy = 1, dx) of a
// conv with dilation D, for tile row `row`; tap (dy, dx) is D*(dy-1) e rows further. The swizzle
// bit (bit 0 of pos/4) is the same along a column: an e row is a multiple of 8 voxels.
static_assert(VF_EW % 8 == 0, "fused kernel: e rows must keep the swizzle bit of a column");
template <int D> __device__ __forceinline__ void vf_conv_offsets(int (&off)[3], int row, int lane) {
	const int j = lane >> 3, r = lane & 7;
	const int v = (j & 1) * 8 + r, c = j >> 1;
	const int pos0 = (row + 2) * VF_EW + v + 2;
#pragma unroll
	for (int dx = 0; dx < 3; ++dx) {
		const int pos = pos0 + D * (dx - 1);
		off[dx] = pos * 8 + ((c ^ (pos >> 2)) & 1) * 4;
	}
}

// ---- the epilogue: gate, head, argmax for one tile row of one plane ----

__device__ __forceinline__ void vf_epilogue(const VfSmem& sm, const float (&gacc)[2][4], const float* sp, int lane,
                                            int classes, unsigned char* __restrict__ out, int gy, const VfGeom& G) {
	const int g = lane >> 2, q = lane & 3;
	float gv[2][4], sv[2][4];
#pragma unroll
	for (int nh = 0; nh < 2; ++nh) {
		const float4 s4 = *reinterpret_cast<const float4*>(sp + nh * 128 + lane * 4);
		sv[nh][0] = s4.x, sv[nh][1] = s4.y, sv[nh][2] = s4.z, sv[nh][3] = s4.w;
#pragma unroll
		for (int i = 0; i < 4; ++i) gv[nh][i] = fmaxf(gacc[nh][i], 0.f);
	}
	unsigned as[4], ag[4]; // s >= 0 already, g after relu: saturated fp16
#pragma unroll
	for (int nh = 0; nh < 2; ++nh)
#pragma unroll
		for (int m = 0; m < 2; ++m) {
			as[2 * nh + m] = vf_pack_relu_sat(sv[nh][2 * m], sv[nh][2 * m + 1]);
			ag[2 * nh + m] = vf_pack_relu_sat(gacc[nh][2 * m], gacc[nh][2 * m + 1]);
		}
	float qa[4];
#pragma unroll
	for (int i = 0; i < 4; ++i) qa[i] = sm.gb[lane][i & 1];
	vf_mma(qa, as, sm.gx[lane][0], sm.gx[lane][1]);
	vf_mma(qa, ag, sm.gg[lane][0], sm.gg[lane][1]);
	// psi: this lane's two gate columns for rows g and g+8, summed over the quad.
	float pr[2];
#pragma unroll
	for (int m = 0; m < 2; ++m) {
		pr[m] = sm.psi[lane][0] * fmaxf(qa[2 * m], 0.f) + sm.psi[lane][1] * fmaxf(qa[2 * m + 1], 0.f);
		pr[m] += vf_shfl_xor(pr[m], 1);
		pr[m] += vf_shfl_xor(pr[m], 2);
	}
	unsigned af[4], afl[4];
#pragma unroll
	for (int m = 0; m < 2; ++m) {
#if VF_FAST_SIGMOID && defined(__CUDA_ARCH__)
		const float a = __fdividef(1.f, 1.f + __expf(-(pr[m] + sm.psib)));
#else
		const float a = 1.f / (1.f + expf(-(pr[m] + sm.psib)));
#endif
#pragma unroll
		for (int nh = 0; nh < 2; ++nh) {
			// f >= 0 (a, s, g are): saturating is one min.
			const float f0 = fminf(fmaf(a, sv[nh][2 * m], gv[nh][2 * m]), VF_HALF_MAX);
			const float f1 = fminf(fmaf(a, sv[nh][2 * m + 1], gv[nh][2 * m + 1]), VF_HALF_MAX);
			af[2 * nh + m] = vf_pack(f0, f1);
			if (VF_HEAD_SPLIT) afl[2 * nh + m] = vf_pack(vf_half_rest(f0), vf_half_rest(f1));
		}
	}
	float lg[2][4];
	const bool wide = classes > 8;
#pragma unroll
	for (int nt = 0; nt < 2; ++nt) {
		if (nt == 1 && !wide) break;
#pragma unroll
		for (int i = 0; i < 4; ++i) lg[nt][i] = sm.hb[nt][lane][i & 1];
		vf_mma(lg[nt], af, sm.hw[nt][lane][0], sm.hw[nt][lane][1]);
		if (VF_HEAD_SPLIT) {
			vf_mma(lg[nt], afl, sm.hw[nt][lane][0], sm.hw[nt][lane][1]);
			vf_mma(lg[nt], af, sm.hwl[nt][lane][0], sm.hwl[nt][lane][1]);
		}
	}
	// argmax per row over this lane's classes (in increasing order), then over the quad; the
	// lowest class wins ties. A lane without classes holds (-inf, 255) and never wins: logits
	// are finite (a NaN one, from a hostile model, would lose every comparison: label 0).
#pragma unroll
	for (int m = 0; m < 2; ++m) {
		float best = -__builtin_huge_valf();
		int idx = 255;
#pragma unroll
		for (int nt = 0; nt < 2; ++nt) {
			if (nt == 1 && !wide) break;
#pragma unroll
			for (int b = 0; b < 2; ++b) {
				const int k = 8 * nt + 2 * q + b;
				const float l = lg[nt][2 * m + b];
				if (k < classes && l > best) best = l, idx = k;
			}
		}
#pragma unroll
		for (int off = 1; off < 4; off <<= 1) {
			const float ob = vf_shfl_xor(best, off);
			const int oi = vf_shfl_xor(idx, off);
			if (ob > best || (ob == best && oi < idx)) best = ob, idx = oi;
		}
		const int gx = G.x0 + g + 8 * m;
		if (q == 0 && gy < G.ny && gx < G.nx) out[(size_t)gy * G.nx + gx] = (unsigned char)(idx == 255 ? 0 : idx);
	}
}

// ---- the kernel ----

// vf_params fills the per-lane fragments and biases (one warp).
__device__ __forceinline__ void vf_params(VfSmem& sm, const float* __restrict__ w, int lane) {
	const int g = lane >> 2, q = lane & 3;
	// conv1 B: k = tap (27..31 zero), n = channel.
#pragma unroll
	for (int h = 0; h < 2; ++h)
#pragma unroll
		for (int nh = 0; nh < 2; ++nh)
#pragma unroll
			for (int reg = 0; reg < 2; ++reg) {
				const int k = 16 * h + 8 * reg + 2 * q, n = 8 * nh + g;
				const float lo = k < 27 ? __ldg(w + VF_OFF_W1 + k * 16 + n) : 0.f;
				const float hi = k + 1 < 27 ? __ldg(w + VF_OFF_W1 + (k + 1) * 16 + n) : 0.f;
				sm.w1[h][nh][lane][reg] = vf_pack(lo, hi);
			}
#pragma unroll
	for (int i = 0; i < 4; ++i) {
		const int co = 8 * (i >> 1) + 2 * q + (i & 1); // accumulator column of value pair i
		sm.b1[lane][i] = __ldg(w + VF_OFF_B1 + co);
		sm.b2[lane][i] = __ldg(w + VF_OFF_B2 + co);
		sm.bg[lane][i] = __ldg(w + VF_OFF_BG + co);
	}
	// Gate (n = gate unit g, k = channel) and head (n = class, k = channel) B fragments.
	sm.gx[lane][0] = vf_pack(__ldg(w + VF_OFF_GX + g * 16 + 2 * q), __ldg(w + VF_OFF_GX + g * 16 + 2 * q + 1));
	sm.gx[lane][1] = vf_pack(__ldg(w + VF_OFF_GX + g * 16 + 2 * q + 8), __ldg(w + VF_OFF_GX + g * 16 + 2 * q + 9));
	sm.gg[lane][0] = vf_pack(__ldg(w + VF_OFF_GG + g * 16 + 2 * q), __ldg(w + VF_OFF_GG + g * 16 + 2 * q + 1));
	sm.gg[lane][1] = vf_pack(__ldg(w + VF_OFF_GG + g * 16 + 2 * q + 8), __ldg(w + VF_OFF_GG + g * 16 + 2 * q + 9));
#pragma unroll
	for (int nt = 0; nt < 2; ++nt) {
		const float* hr = w + VF_OFF_HW + (8 * nt + g) * 16;
		sm.hw[nt][lane][0] = vf_pack(__ldg(hr + 2 * q), __ldg(hr + 2 * q + 1));
		sm.hw[nt][lane][1] = vf_pack(__ldg(hr + 2 * q + 8), __ldg(hr + 2 * q + 9));
		sm.hwl[nt][lane][0] = vf_pack(vf_half_rest(__ldg(hr + 2 * q)), vf_half_rest(__ldg(hr + 2 * q + 1)));
		sm.hwl[nt][lane][1] = vf_pack(vf_half_rest(__ldg(hr + 2 * q + 8)), vf_half_rest(__ldg(hr + 2 * q + 9)));
		sm.hb[nt][lane][0] = __ldg(w + VF_OFF_HB + 8 * nt + 2 * q);
		sm.hb[nt][lane][1] = __ldg(w + VF_OFF_HB + 8 * nt + 2 * q + 1);
	}
#pragma unroll
	for (int b = 0; b < 2; ++b) {
		const int j = 2 * q + b; // gate column
		sm.gb[lane][b] = __ldg(w + VF_OFF_GXB + j) + __ldg(w + VF_OFF_GGB + j);
		sm.psi[lane][b] = __ldg(w + VF_OFF_PSI + j);
	}
	if (lane == 0) sm.psib = __ldg(w + VF_OFF_PSIB);
	if (lane < 4) sm.zero[lane] = 0u;
}

// ---- per-warp state of the body ----

// The two x values of a plane each thread loads (a plane has more than VF_THREADS of them).
template <typename T> struct VfXPair {
	VfXLoader<T> x0, x1;
	struct Raw {
		typename VfXLoader<T>::Raw r0, r1;
	};
	__device__ __forceinline__ VfXPair(const T* __restrict__ in, const VfGeom& G, int tid)
	    : x0(in, G, tid), x1(in, G, tid + VF_THREADS) {}
	__device__ __forceinline__ Raw fetch(const VfGeom& G, int rel) const { return {x0.fetch(G, rel), x1.fetch(G, rel)}; }
	// store normalises the fetched values into x ring slot `slot`.
	__device__ __forceinline__ void store(VfSmem& sm, int slot, int tid, const VfGeom& G, const Raw& r) const {
		vf_store_x(sm, slot, tid, x0.normalise(G, r.r0));
		vf_store_x(sm, slot, tid + VF_THREADS, x1.normalise(G, r.r1));
	}
	// load fetches and stores at once (the first planes, before the loop).
	__device__ __forceinline__ void load(VfSmem& sm, int slot, int tid, const VfGeom& G, int rel) const {
		vf_store_x(sm, slot, tid, x0.load(G, rel));
		vf_store_x(sm, slot, tid + VF_THREADS, x1.load(G, rel));
	}
};

// Accumulators of the output planes in flight (per row: [plane][n half][4]). vf_acc_bias starts
// every plane at the bias; vf_acc_shift retires plane 0 (plane k+1 becomes plane k) and starts
// the newest at the bias.
template <int NP>
__device__ __forceinline__ void vf_acc_bias(float (&acc)[2][NP][2][4], const float (&bias)[32][4], int lane) {
#pragma unroll
	for (int rr = 0; rr < 2; ++rr)
#pragma unroll
		for (int k = 0; k < NP; ++k)
#pragma unroll
			for (int nh = 0; nh < 2; ++nh)
#pragma unroll
				for (int i = 0; i < 4; ++i) acc[rr][k][nh][i] = bias[lane][2 * nh + (i & 1)];
}

template <int NP>
__device__ __forceinline__ void vf_acc_shift(float (&acc)[NP][2][4], const float (&bias)[32][4], int lane) {
#pragma unroll
	for (int nh = 0; nh < 2; ++nh)
#pragma unroll
		for (int i = 0; i < 4; ++i) {
#pragma unroll
			for (int k = 0; k + 1 < NP; ++k) acc[k][nh][i] = acc[k + 1][nh][i];
			acc[NP - 1][nh][i] = bias[lane][2 * nh + (i & 1)];
		}
}

// ---- the body: two tile rows per conv warp, weights from shared memory ----

// One e plane into the planes in flight of two tile rows (row0, row0+1): per tap, two A
// fragments (one per row) and, per dz, one ldmatrix.x4 of the tap's weights (both n halves, k
// low and high), used by 4 mma.
template <int D, int NP>
__device__ __forceinline__ void vf_conv_plane(const unsigned* __restrict__ eb, const unsigned short* __restrict__ wc,
                                                  int boff, float (&acc)[2][NP][2][4], const int (&off)[3]) {
#pragma unroll
	for (int dy = 0; dy < 3; ++dy)
#pragma unroll
		for (int dx = 0; dx < 3; ++dx) {
			unsigned a0[4], a1[4];
			const unsigned* pa = eb + off[dx] + D * (dy - 1) * VF_EW * 8;
			vf_ldsm4<false>(a0, pa);
			vf_ldsm4<false>(a1, pa + VF_EW * 8);
#pragma unroll
			for (int dz = 0; dz < 3; ++dz) {
				const int t = (dz * 3 + dy) * 3 + dx;
				unsigned b[4];
				vf_ldsm4<false>(b, wc + boff + t * 256);
#pragma unroll
				for (int nh = 0; nh < 2; ++nh) {
					vf_mma(acc[0][(NP - 1) - D * dz][nh], a0, b[2 * nh], b[2 * nh + 1]);
					vf_mma(acc[1][(NP - 1) - D * dz][nh], a1, b[2 * nh], b[2 * nh + 1]);
				}
			}
		}
}

template <typename T>
__device__ __forceinline__ void fused_body(const T* __restrict__ in, unsigned char* __restrict__ labels,
                                               const float* __restrict__ w, int nx, int ny, int nz, int z0, int nzOut,
                                               int zChunk, float scale, float shift, int classes) {
#if defined(__CUDA_ARCH__)
	extern __shared__ __align__(16) unsigned char vf_smem_dyn[];
	VfSmem& sm = *reinterpret_cast<VfSmem*>(vf_smem_dyn);
#else
	__shared__ VfSmem sm;
#endif
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const VfGeom G{nx, ny, nz, z0, (int)blockIdx.x * VF_TX, (int)blockIdx.y * VF_ROWS, scale, shift};
	const int o0 = blockIdx.z * zChunk, o1 = min(o0 + zChunk, nzOut);
	const int L = o1 - o0, steps = L + 4;
	const bool isConv2 = warp < VF_CW;
	const int cw = isConv2 ? warp : warp - VF_CW, row0 = cw * VF_RPW;
	const size_t plane = (size_t)nx * ny;

	if (warp == 0) vf_params(sm, w, lane);
	for (int i = tid; i < 2 * 27 * 256; i += VF_THREADS) {
		const int c = i / (27 * 256), r = i % (27 * 256), t = r / 256, n = r / 16 % 16, k = r % 16;
		sm.wsm[c][t][n][((k >> 3) ^ ((n >> 2) & 1)) * 8 + (k & 7)] = vf_half(__ldg(w + (c ? VF_OFF_WG : VF_OFF_W2) + r));
	}
	static_assert(VF_XH * VF_XRAW <= 2 * VF_THREADS, "fused kernel: two x values per thread at most");
	const VfXPair<T> X(in, G, tid);
#pragma unroll
	for (int i = 0; i < 4; ++i) X.load(sm, i, tid, G, o0 - 3 + i);
	__syncthreads();
	VfConv1Plan cp;
	if (isConv2) {
		cp = vf_conv1_plan(sm, G, cw, lane);
		const int q = o0 - 2;
		vf_conv1(sm, 0, 0, G.z0 + q >= 0 && G.z0 + q < nz, cp, cw, VF_CW, lane);
	}
	__syncthreads();
	// The lane's row of the weights' ldmatrix: matrix j = lane/8 is (n half j/2, k half j%2).
	const int bj = lane >> 3, bn = (bj >> 1) * 8 + (lane & 7);
	const int boff = bn * 16 + (((bj & 1) ^ ((bn >> 2) & 1)) * 8);

	if (isConv2) {
		int off[3];
		vf_conv_offsets<1>(off, row0, lane);
		float acc[2][3][2][4];
		vf_acc_bias(acc, sm.b2, lane);
		for (int t = 0; t < steps; ++t) {
			const int p = o0 - 2 + t;
			const bool loadX = o0 + 1 + t <= o1 + 2;
			const int rel = loadX ? o0 + 1 + t : -1 - G.z0;
			const auto xr = X.fetch(G, rel);
			if (t + 1 < steps) {
				const int q = p + 1;
				vf_conv1(sm, (t + 1) & 1, (t + 1) & 3, G.z0 + q >= 0 && G.z0 + q < nz, cp, cw, VF_CW, lane);
			}
			if (!(VF_SKIP & VF_SKIP_CONVS) && G.z0 + p >= 0 && G.z0 + p < nz)
				vf_conv_plane<1, 3>(sm.e[t & 1], &sm.wsm[0][0][0][0], boff, acc, off);
#pragma unroll
			for (int rr = 0; rr < 2; ++rr) {
				float* sp = &sm.s[t & 1][row0 + rr][0][0][0];
#pragma unroll
				for (int nh = 0; nh < 2; ++nh) {
					float4 v;
					v.x = fmaxf(acc[rr][0][nh][0], 0.f), v.y = fmaxf(acc[rr][0][nh][1], 0.f);
					v.z = fmaxf(acc[rr][0][nh][2], 0.f), v.w = fmaxf(acc[rr][0][nh][3], 0.f);
					*reinterpret_cast<float4*>(sp + nh * 128 + lane * 4) = v;
				}
				vf_acc_shift(acc[rr], sm.b2, lane);
			}
			if (loadX) X.store(sm, t & 3, tid, G, xr);
			__syncthreads();
		}
	} else {
		int off[3];
		vf_conv_offsets<2>(off, row0, lane);
		float acc[2][5][2][4];
		vf_acc_bias(acc, sm.bg, lane);
		for (int t = 0; t < steps; ++t) {
			const int p = o0 - 2 + t;
			const bool loadX = o0 + 1 + t <= o1 + 2;
			const int rel = loadX ? o0 + 1 + t : -1 - G.z0;
			const auto xr = X.fetch(G, rel);
			if (!(VF_SKIP & VF_SKIP_CONVS) && G.z0 + p >= 0 && G.z0 + p < nz)
				vf_conv_plane<2, 5>(sm.e[t & 1], &sm.wsm[1][0][0][0], boff, acc, off);
#pragma unroll
			for (int rr = 0; rr < 2; ++rr) {
				if (!(VF_SKIP & VF_SKIP_EPILOGUE) && t >= 4)
					vf_epilogue(sm, acc[rr][0], &sm.s[(t - 1) & 1][row0 + rr][0][0][0], lane, classes,
					            labels + (size_t)(p - 2) * plane, G.y0 + row0 + rr, G);
				vf_acc_shift(acc[rr], sm.bg, lane);
			}
			if (loadX) X.store(sm, t & 3, tid, G, xr);
			__syncthreads();
		}
	}
}

extern "C" __global__ void __launch_bounds__(VF_THREADS, 1)
fused_i16(const short* __restrict__ in, unsigned char* __restrict__ labels, const float* __restrict__ w, int nx,
          int ny, int nz, int z0, int nzOut, int zChunk, float scale, float shift, int classes) {
	fused_body<short>(in, labels, w, nx, ny, nz, z0, nzOut, zChunk, scale, shift, classes);
}

extern "C" __global__ void __launch_bounds__(VF_THREADS, 1)
fused_f32(const float* __restrict__ in, unsigned char* __restrict__ labels, const float* __restrict__ w, int nx,
          int ny, int nz, int z0, int nzOut, int zChunk, float scale, float shift, int classes) {
	fused_body<float>(in, labels, w, nx, ny, nz, z0, nzOut, zChunk, scale, shift, classes);
}
