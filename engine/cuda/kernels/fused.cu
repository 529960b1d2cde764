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
//   logits as fp16, on the planes sampled for the confidence (VP_CONF_STRIDE) only:
//            count_confidence counts their top-two margins
//
// Work split. A block owns a VF_TX x VF_ROWS tile of output voxels in x-y and a chunk of zChunk
// output planes of the slab, and streams along z one e plane per step. Conv warp c < VF_CW
// computes conv2 for tile rows 2c and 2c+1 (M = 32: two m16 tiles), warp VF_CW+c the dilated
// conv for the same rows (fused_body). The convs' 27x16x16 weights are fp16 in
// shared memory; per tap and dz one ldmatrix.x4 gives the B fragments of both n halves, used by
// the 4 mma of the two rows. One mma covers 16 voxels of a row (M), 8 output channels (N) and
// all 16 input channels (K). The A fragments of tap (dy,dx) of the current e plane are loaded once
// (ldmatrix) and used for all three dz: the output planes in flight (3 for conv2, 5 for the
// dilated conv, per row) stay in registers as accumulators, so an e plane is read once per warp;
// the accumulators are a ring and the step loops are unrolled by its length (VfConv2Warp,
// VfConvGWarp), so retiring a plane moves no registers. When a plane is complete, the conv2 warp
// leaves s in shared memory (fp32, with the gate's s half: VF_GATE_SPLIT) and the dilated-conv
// warp, one step later, runs the gate, head and argmax on s and g for its two rows at once: the
// accumulator layout of two n8 tiles is the A layout of a k16 mma, so s, g and f go straight into
// the gate and head mma. One barrier per step (vf_barrier) separates the planes.
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
// Tile rows (y): VF_ROWS/2 warps per conv of two rows each. 16 rows need ~125 KiB of
// shared memory per block, which sm_90 has (227 KiB) and sm_86/89 have not (99 KiB): they, sm_80
// and the compute_80 PTX get 12 rows (~92 KiB; slower, docs/perf.md). The host
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
// Fewer than 4 rows gave wrong labels in an earlier kernel (docs/perf.md) and are untested in
// this one: refused.
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
// The fused_* kernels compute one n8 tile of logits: at most this many classes; fused_*_k16 two.
#define VF_NARROW_CLASSES 8

// The block's shared memory (VfSmem) comes from the launch (dynamic: a static allocation may not
// exceed 48 KiB); the host learns its size from fused_geometry and asks for it
// (cuFuncSetAttribute). At most VF_SMEM_BYTES, what sm_86/89 allow per block.
#define VF_SMEM_BYTES 101376

// VF_HEAD_SPLIT: the head with f and its weights split into fp16 high and low parts
// (hi*hi + lo*hi + hi*lo: 3 mma per n8 tile instead of 1), close to a float32 head.
// VF_FAST_SIGMOID: the gate's sigmoid with the hardware's approximate exp and divide (a few ulp
// of fp32 off; the attention weight a then multiplies fp16 values). It sits on the slowest warps'
// critical path (docs/perf.md). The host emulator computes it exactly (expf, division).
#ifndef VF_FAST_SIGMOID
#define VF_FAST_SIGMOID 1
#endif
#ifndef VF_HEAD_SPLIT
#define VF_HEAD_SPLIT 1
#endif
// VF_GATE_SPLIT: the conv2 warps, which hold s, also compute the gate's s half (gb + wx.s, the
// first of the gate's two mma) and leave it in shared memory beside s; the dilated-conv warps
// go on from it with the g half. The same sums in the same order as one warp doing both, and
// faster (docs/perf.md). Its buffer does not fit in the shared memory sm_86/89
// give a 12-row block, so sm_80-89 and the PTX leave it out.
#ifndef VF_GATE_SPLIT
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define VF_GATE_SPLIT 0
#else
#define VF_GATE_SPLIT 1
#endif
#endif
// VF_LOADS_FIRST: the convs load a tap's five fragments (A of both rows, B of the three dz)
// before its 12 mma (vf_conv_plane's PF 1); 0 leaves ptxas the order of the source, which it
// kept: each B just before its 4 mma, three ldmatrix latencies per tap (docs/perf.md).
#ifndef VF_LOADS_FIRST
#define VF_LOADS_FIRST 1
#endif
// VF_CONF: the epilogue stores the logits of the planes sampled for the confidence; 0 builds the
// kernel without it, to time what it costs (a variant of gpu-build.sh).
#ifndef VF_CONF
#define VF_CONF 1
#endif
// VF_LOGIT_WORDS: fp16 pairs of logits stored per voxel of a sampled plane: 8 classes' worth
// (4 lanes of 2), 16 in the _k16 build (kernels.FusedLogitWords; count_confidence's words).
#define VF_LOGIT_WORDS(WIDE) ((WIDE) ? 8 : 4)
#define VF_NB 2 // buffers of e planes, s and qs: the one a step reads, the one it makes
// The x ring: slab-relative plane o0-3+k in slot k % VF_XSLOTS; step t loads the plane that conv1
// first reads in step t + 1.
#define VF_XSLOTS 4

struct VfSmem {
	// e planes: [buf][pos*8 + (chunk ^ bit 2 of pos)*4 + word], pos = row*VF_EW + col, 8 fp16
	// channels per chunk, two per word.
	__align__(16) unsigned e[VF_NB][VF_EH * VF_EW * 8];
	// Normalised input planes, fp16: [ring slot][copy dx][row][i] = x(tile x -3+dx+i).
	__align__(16) unsigned short x[VF_XSLOTS][3][VF_XH][VF_XW];
	__align__(16) unsigned zero[4]; // the rows of conv1's padding taps 27..31
	// s of the plane just finished, fp32 in accumulator order: [buf][row][n-half][lane][4].
	__align__(16) float s[VF_NB][VF_ROWS][2][32][4];
#if VF_GATE_SPLIT
	// The gate's s half, gb + wx.s (fp32, accumulator order), made by the conv2 warps: [buf][row][lane][4].
	__align__(16) float qs[VF_NB][VF_ROWS][32][4];
#endif

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
	const unsigned short* xa = &sm.x[(xs + P.dz[0]) % VF_XSLOTS][0][0][0];
	const unsigned short* xb = &sm.x[(xs + P.dz[1]) % VF_XSLOTS][0][0][0];
	unsigned w[2][2][2]; // conv1 B fragments: [k step][n half][reg]
#pragma unroll
	for (int h = 0; h < 2; ++h)
#pragma unroll
		for (int nh = 0; nh < 2; ++nh)
#pragma unroll
			for (int r = 0; r < 2; ++r) w[h][nh][r] = sm.w1[h][nh][lane][r];
	// Every group, the warp's last one included when it owns one fewer (computed from a valid
	// row, not stored): a branch between groups kept ptxas from overlapping them.
#pragma unroll
	for (int kk = 0; kk < VF_G1; ++kk) {
		unsigned a[2][4];
		vf_ldsm4<true>(a[0], xa + P.aoff[kk][0]);
		vf_ldsm4<true>(a[1], xb + P.aoff[kk][1]);
		float acc[2][4];
#pragma unroll
		for (int nh = 0; nh < 2; ++nh)
#pragma unroll
			for (int i = 0; i < 4; ++i) acc[nh][i] = P.b1[2 * nh + (i & 1)];
#pragma unroll
		for (int h = 0; h < 2; ++h)
#pragma unroll
			for (int nh = 0; nh < 2; ++nh) vf_mma(acc[nh], a[h], w[h][nh][0], w[h][nh][1]);
		// Rows g (first segment) and g+8 (second), channels 8nh+2q, +1.
#pragma unroll
		for (int m = 0; m < 2; ++m) {
			const unsigned bit = 1u << (2 * kk + m);
			if (!(P.store & bit)) continue;
#pragma unroll
			for (int nh = 0; nh < 2; ++nh) {
				unsigned v = vf_pack_relu_sat(acc[nh][2 * m], acc[nh][2 * m + 1]);
				if (!(P.inside & bit)) v = 0u;
				eb[P.eoff[kk][m] ^ (nh * 4)] = v;
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

// ---- the epilogue: gate, head, argmax for the two tile rows of a warp, one plane ----

// vf_sigmoid: 1/(1+exp(-x)). VF_FAST_SIGMOID: exp as ex2.approx.ftz of x*log2(e) (what __expf
// does, less its denormal fix-up: a result below 2^-126 flushes to 0, and 1 + it is 1 either
// way) and the approximate reciprocal.
__device__ __forceinline__ float vf_sigmoid(float x) {
#if VF_FAST_SIGMOID && defined(__CUDA_ARCH__)
	float e;
	asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(e) : "f"(__fmul_rn(x, -1.44269504088896341f)));
	return __fdividef(1.f, 1.f + e);
#else
	return 1.f / (1.f + expf(-x));
#endif
}

// vf_logit_plane: where the logits of output plane o (slab-relative) go, or nullptr when its z
// in the volume is not sampled for the confidence: the slab's sampled planes in order, from the
// first multiple of VP_CONF_STRIDE at or after G.z0 (common.cuh's vp_margin_index), each
// [ny][nx][VF_LOGIT_WORDS] fp16 pairs.
template <bool WIDE>
__device__ __forceinline__ unsigned* vf_logit_plane(unsigned* __restrict__ logits, const VfGeom& G, int o, size_t plane) {
	const int z = G.z0 + o;
	return vp_conf_plane(z) ? logits + (size_t)vp_margin_index(G.z0, z) * plane * VF_LOGIT_WORDS(WIDE) : nullptr;
}

// vf_argmax: the label of each of the lane's voxels (rows r, columns m) from its logits lg: the
// argmax over this lane's classes (in increasing order), then over the quad; the lowest class
// wins ties. A lane without classes holds (-inf, 255) and never wins: logits are finite (a NaN
// one, from a hostile model, would lose every comparison: label 0).
__device__ __forceinline__ void vf_argmax(const float (&lg)[2][2][4], int q, int classes, bool wide, float (&best)[2][2],
                                          int (&idx)[2][2]) {
#pragma unroll
	for (int r = 0; r < 2; ++r)
#pragma unroll
		for (int m = 0; m < 2; ++m) {
			best[r][m] = -__builtin_huge_valf(), idx[r][m] = 255;
#pragma unroll
			for (int nt = 0; nt < 2; ++nt) {
				if (nt == 1 && !wide) break;
#pragma unroll
				for (int b = 0; b < 2; ++b) {
					const int k = 8 * nt + 2 * q + b;
					const float l = lg[r][nt][2 * m + b];
					if (k < classes && l > best[r][m]) best[r][m] = l, idx[r][m] = k;
				}
			}
		}
#pragma unroll
	for (int off = 1; off < 4; off <<= 1)
#pragma unroll
		for (int r = 0; r < 2; ++r)
#pragma unroll
			for (int m = 0; m < 2; ++m) {
				const float ob = vf_shfl_xor(best[r][m], off);
				const int oi = vf_shfl_xor(idx[r][m], off);
				if (ob > best[r][m] || (ob == best[r][m] && oi < idx[r][m])) best[r][m] = ob, idx[r][m] = oi;
			}
}

// vf_epilogue: g of both rows in gacc[row] (the dilated conv's accumulators, before relu), s of
// row r at sp + 256r (fp32, after relu). Every stage runs for both rows (and both row halves)
// before the next, so the mma, shuffle and special-function latencies of one row hide behind
// the other's work: this is the dilated-conv warps' critical path.
template <bool WIDE>
__device__ __forceinline__ void vf_epilogue(const VfSmem& sm, const float (&g0)[2][4], const float (&g1)[2][4],
                                            const float* sp, const float* qsp, int lane, int classes,
                                            unsigned char* __restrict__ out, unsigned* __restrict__ lout, int gy0,
                                            const VfGeom& G) {
	// lout: the plane's logits (vf_logit_plane) when it is sampled for the confidence, else
	// nullptr (warp-uniform).
	const int g = lane >> 2, q = lane & 3;
	float gv[2][2][4], sv[2][2][4]; // [row][n half][4]
#pragma unroll
	for (int r = 0; r < 2; ++r)
#pragma unroll
		for (int nh = 0; nh < 2; ++nh) {
			const float4 s4 = *reinterpret_cast<const float4*>(sp + r * 256 + nh * 128 + lane * 4);
			sv[r][nh][0] = s4.x, sv[r][nh][1] = s4.y, sv[r][nh][2] = s4.z, sv[r][nh][3] = s4.w;
#pragma unroll
			for (int i = 0; i < 4; ++i) gv[r][nh][i] = fmaxf((r ? g1 : g0)[nh][i], 0.f);
		}
	unsigned ag[2][4]; // g after relu, saturated fp16
#pragma unroll
	for (int r = 0; r < 2; ++r)
#pragma unroll
		for (int nh = 0; nh < 2; ++nh)
#pragma unroll
			for (int m = 0; m < 2; ++m)
				ag[r][2 * nh + m] = vf_pack_relu_sat((r ? g1 : g0)[nh][2 * m], (r ? g1 : g0)[nh][2 * m + 1]);
	float qa[2][4];
#if VF_GATE_SPLIT
#pragma unroll
	for (int r = 0; r < 2; ++r) {
		const float4 q4 = *reinterpret_cast<const float4*>(qsp + r * 128 + lane * 4);
		qa[r][0] = q4.x, qa[r][1] = q4.y, qa[r][2] = q4.z, qa[r][3] = q4.w;
	}
#else
	(void)qsp;
#pragma unroll
	for (int r = 0; r < 2; ++r) {
		unsigned as[4]; // s >= 0 already: saturated fp16
#pragma unroll
		for (int nh = 0; nh < 2; ++nh)
#pragma unroll
			for (int m = 0; m < 2; ++m) as[2 * nh + m] = vf_pack_relu_sat(sv[r][nh][2 * m], sv[r][nh][2 * m + 1]);
#pragma unroll
		for (int i = 0; i < 4; ++i) qa[r][i] = sm.gb[lane][i & 1];
		vf_mma(qa[r], as, sm.gx[lane][0], sm.gx[lane][1]);
	}
#endif
#pragma unroll
	for (int r = 0; r < 2; ++r) vf_mma(qa[r], ag[r], sm.gg[lane][0], sm.gg[lane][1]);
	// psi: this lane's two gate columns for rows g and g+8, summed over the quad.
	float pr[2][2];
#pragma unroll
	for (int r = 0; r < 2; ++r)
#pragma unroll
		for (int m = 0; m < 2; ++m)
			pr[r][m] = sm.psi[lane][0] * fmaxf(qa[r][2 * m], 0.f) + sm.psi[lane][1] * fmaxf(qa[r][2 * m + 1], 0.f);
#pragma unroll
	for (int off = 1; off < 4; off <<= 1)
#pragma unroll
		for (int r = 0; r < 2; ++r)
#pragma unroll
			for (int m = 0; m < 2; ++m) pr[r][m] += vf_shfl_xor(pr[r][m], off);
	unsigned af[2][4], afl[2][4];
#pragma unroll
	for (int r = 0; r < 2; ++r)
#pragma unroll
		for (int m = 0; m < 2; ++m) {
			const float a = vf_sigmoid(pr[r][m] + sm.psib);
#pragma unroll
			for (int nh = 0; nh < 2; ++nh) {
				// f >= 0 (a, s, g are): saturating is one min.
				const float f0 = fminf(fmaf(a, sv[r][nh][2 * m], gv[r][nh][2 * m]), VF_HALF_MAX);
				const float f1 = fminf(fmaf(a, sv[r][nh][2 * m + 1], gv[r][nh][2 * m + 1]), VF_HALF_MAX);
				af[r][2 * nh + m] = vf_pack(f0, f1);
				if (VF_HEAD_SPLIT) afl[r][2 * nh + m] = vf_pack(vf_half_rest(f0), vf_half_rest(f1));
			}
		}
	float lg[2][2][4]; // [row][n tile][4]
	const bool wide = WIDE && classes > VF_NARROW_CLASSES;
#pragma unroll
	for (int nt = 0; nt < 2; ++nt) {
		if (nt == 1 && !wide) break;
#pragma unroll
		for (int r = 0; r < 2; ++r)
#pragma unroll
			for (int i = 0; i < 4; ++i) lg[r][nt][i] = sm.hb[nt][lane][i & 1];
#pragma unroll
		for (int r = 0; r < 2; ++r) vf_mma(lg[r][nt], af[r], sm.hw[nt][lane][0], sm.hw[nt][lane][1]);
		if (VF_HEAD_SPLIT) {
#pragma unroll
			for (int r = 0; r < 2; ++r) vf_mma(lg[r][nt], afl[r], sm.hw[nt][lane][0], sm.hw[nt][lane][1]);
#pragma unroll
			for (int r = 0; r < 2; ++r) vf_mma(lg[r][nt], af[r], sm.hwl[nt][lane][0], sm.hwl[nt][lane][1]);
		}
	}
	float best[2][2];
	int idx[2][2];
	vf_argmax(lg, q, classes, wide, best, idx);
	// A sampled plane's logits, as they are: each lane its two classes of each of its voxels, as
	// fp16 pairs (count_confidence finds the margin from them). Stores only: the epilogue of
	// every plane keeps its registers and instructions.
	if (VF_CONF && lout != nullptr)
#pragma unroll
		for (int r = 0; r < 2; ++r)
#pragma unroll
			for (int m = 0; m < 2; ++m) {
				const int gx = G.x0 + g + 8 * m, gy = gy0 + r;
				if (gy < G.ny && gx < G.nx) {
					unsigned* v = lout + ((size_t)gy * G.nx + gx) * VF_LOGIT_WORDS(WIDE);
					v[q] = vf_pack(lg[r][0][2 * m], lg[r][0][2 * m + 1]);
					if (WIDE) v[4 + q] = vf_pack(lg[r][1][2 * m], lg[r][1][2 * m + 1]);
				}
			}
	if (q == 0)
#pragma unroll
		for (int r = 0; r < 2; ++r)
#pragma unroll
			for (int m = 0; m < 2; ++m) {
				const int gx = G.x0 + g + 8 * m, gy = gy0 + r;
				if (gy < G.ny && gx < G.nx) out[(size_t)gy * G.nx + gx] = (unsigned char)(idx[r][m] == 255 ? 0 : idx[r][m]);
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

// Accumulators of the output planes in flight (per row: [slot][n half][4]), a ring: in step t
// (phase PH = t mod NP) slot (k + PH) mod NP holds the k-th oldest plane. The step loops are
// unrolled by NP so that every slot index is a constant: retiring a plane costs no register
// moves (shifting NP-1 planes down cost 64 moves per step in the dilated-conv warps).
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

// vf_acc_restart starts a retired slot again at the bias: it becomes the newest plane.
__device__ __forceinline__ void vf_acc_restart(float (&a)[2][4], const float (&bias)[32][4], int lane) {
#pragma unroll
	for (int nh = 0; nh < 2; ++nh)
#pragma unroll
		for (int i = 0; i < 4; ++i) a[nh][i] = bias[lane][2 * nh + (i & 1)];
}

// ---- the body: two tile rows per conv warp, weights from shared memory ----

// One e plane into the planes in flight of two tile rows (row0, row0+1): per tap, two A
// fragments (one per row) and, per dz, one ldmatrix.x4 of the tap's weights (both n halves, k
// low and high), used by 4 mma.
template <int D, int NP, int PH, int PF = 0>
__device__ __forceinline__ void vf_conv_plane(const unsigned* __restrict__ eb, const unsigned short* __restrict__ wc,
                                                  int boff, float (&acc)[2][NP][2][4], const int (&off)[3]) {
	if (PF == 0) { // per tap A of both rows, then per dz its B and 4 mma
		unsigned a0[4], a1[4];
#pragma unroll
		for (int dy = 0; dy < 3; ++dy)
#pragma unroll
			for (int dx = 0; dx < 3; ++dx) {
				const unsigned* pa = eb + off[dx] + D * (dy - 1) * VF_EW * 8;
				vf_ldsm4<false>(a0, pa);
				vf_ldsm4<false>(a1, pa + VF_EW * 8);
				unsigned b[4];
#pragma unroll
				for (int dz = 0; dz < 3; ++dz) {
					const int t = (dz * 3 + dy) * 3 + dx;
					vf_ldsm4<false>(b, wc + boff + t * 256);
#pragma unroll
					for (int nh = 0; nh < 2; ++nh) {
						// e plane p adds to output plane p + 1 - dz (times D): the (NP-1-D*dz)-th oldest.
						const int k = (NP - 1 - D * dz + PH) % NP;
						vf_mma(acc[0][k][nh], a0, b[2 * nh], b[2 * nh + 1]);
						vf_mma(acc[1][k][nh], a1, b[2 * nh], b[2 * nh + 1]);
					}
				}
			}
		return;
	}
	// PF 1: a tap's five fragments (A of both rows, B of the three dz), then its 12 mma.
#pragma unroll
	for (int tap = 0; tap < 9; ++tap) {
		const int dy = tap / 3, dx = tap % 3;
		const unsigned* pa = eb + off[dx] + D * (dy - 1) * VF_EW * 8;
		unsigned a[2][4], b[3][4];
		vf_ldsm4<false>(a[0], pa);
		vf_ldsm4<false>(a[1], pa + VF_EW * 8);
#pragma unroll
		for (int dz = 0; dz < 3; ++dz) vf_ldsm4<false>(b[dz], wc + boff + (dz * 9 + tap) * 256);
#pragma unroll
		for (int dz = 0; dz < 3; ++dz)
#pragma unroll
			for (int nh = 0; nh < 2; ++nh) {
				const int k = (NP - 1 - D * dz + PH) % NP;
				vf_mma(acc[0][k][nh], a[0], b[dz][2 * nh], b[dz][2 * nh + 1]);
				vf_mma(acc[1][k][nh], a[1], b[dz][2 * nh], b[dz][2 * nh + 1]);
			}
	}
}

// What both kinds of conv warp hold (the block's geometry, the thread's x loads, the z chunk),
// and the frame of a step: step t (one e plane, slab-relative p = o0-2+t) starts the x load
// of a later plane, runs the warp's own work (W::work), stores the x plane and ends at the
// block barrier.
template <typename T> struct VfWarp {
	VfSmem& sm;
	const VfGeom& G;
	const VfXPair<T>& X;
	int boff, o0, o1, steps, tid, lane, row0;
	int off[3]; // vf_conv_offsets

	__device__ __forceinline__ VfWarp(VfSmem& sm, const VfGeom& G, const VfXPair<T>& X, int boff, int o0, int o1,
	                                  int steps, int tid, int lane, int row0)
	    : sm(sm), G(G), X(X), boff(boff), o0(o0), o1(o1), steps(steps), tid(tid), lane(lane), row0(row0) {}

	template <int PH, class W> __device__ __forceinline__ void step(W& w, int t) const {
		// x plane o0+1+t (k = t+4 in the ring); input planes up to o1+2.
		const bool loadX = o0 + 1 + t <= o1 + 2;
		const auto xr = X.fetch(G, loadX ? o0 + 1 + t : -1 - G.z0);
		w.template work<PH>(t, o0 - 2 + t);
		if (loadX) X.store(sm, (t + 4) % VF_XSLOTS, tid, G, xr);
		vf_barrier();
	}
};

// A conv2 warp's work in step t, phase PH = t mod 3: conv1 of the next e plane, conv2 of e plane
// p into two rows' planes in flight, s of the plane that completes (p-1) into shared memory.
template <typename T> struct VfConv2Warp : VfWarp<T> {
	const VfConv1Plan& cp;
	int cw;
	float acc[2][3][2][4];

	__device__ __forceinline__ VfConv2Warp(const VfWarp<T>& w, const VfConv1Plan& cp, int cw)
	    : VfWarp<T>(w), cp(cp), cw(cw) {
		vf_conv_offsets<1>(this->off, this->row0, this->lane);
		vf_acc_bias(acc, this->sm.b2, this->lane);
	}

	template <int PH> __device__ __forceinline__ void work(int t, int p) {
		VfSmem& sm = this->sm;
		const VfGeom& G = this->G;
		const int lane = this->lane;
		// This step's e/s/qs buffer and the next step's.
		const int b = t & 1, bn = (t + 1) & 1;
		if (t + 1 < this->steps) {
			const int q = p + 1;
			vf_conv1(sm, bn, (t + 1) % VF_XSLOTS, G.z0 + q >= 0 && G.z0 + q < G.nz, cp, cw, VF_CW, lane);
		}
		// Step 0's e plane (o0-2) adds only to planes o0-3..o0-1, whose s no one reads.
		if (t > 0 && G.z0 + p >= 0 && G.z0 + p < G.nz)
			vf_conv_plane<1, 3, PH, VF_LOADS_FIRST>(sm.e[b], &sm.wsm[0][0][0][0], this->boff, acc, this->off);
#pragma unroll
		for (int rr = 0; rr < 2; ++rr) {
			float(&a)[2][4] = acc[rr][PH];
			float* sp = &sm.s[b][this->row0 + rr][0][0][0];
			float4 v[2];
#pragma unroll
			for (int nh = 0; nh < 2; ++nh) {
				v[nh].x = fmaxf(a[nh][0], 0.f), v[nh].y = fmaxf(a[nh][1], 0.f);
				v[nh].z = fmaxf(a[nh][2], 0.f), v[nh].w = fmaxf(a[nh][3], 0.f);
				*reinterpret_cast<float4*>(sp + nh * 128 + lane * 4) = v[nh];
			}
#if VF_GATE_SPLIT
			unsigned as[4]; // s >= 0: saturated fp16
#pragma unroll
			for (int nh = 0; nh < 2; ++nh) {
				as[2 * nh] = vf_pack_relu_sat(v[nh].x, v[nh].y);
				as[2 * nh + 1] = vf_pack_relu_sat(v[nh].z, v[nh].w);
			}
			float qa[4];
#pragma unroll
			for (int i = 0; i < 4; ++i) qa[i] = sm.gb[lane][i & 1];
			vf_mma(qa, as, sm.gx[lane][0], sm.gx[lane][1]);
			float4 q4;
			q4.x = qa[0], q4.y = qa[1], q4.z = qa[2], q4.w = qa[3];
			*reinterpret_cast<float4*>(&sm.qs[b][this->row0 + rr][lane][0]) = q4;
#endif
			vf_acc_restart(a, sm.b2, lane);
		}
	}
};

// A dilated-conv warp's work in step t, phase PH = t mod 5: the dilated conv of e plane p into
// two rows' planes in flight, then for the plane that completes (p-2) the gate, head and argmax
// (its s came from the conv2 warps in the step before).
template <typename T, bool WIDE> struct VfConvGWarp : VfWarp<T> {
	int classes;
	unsigned char* __restrict__ labels;
	unsigned* __restrict__ logits; // the sampled planes' logits (vf_logit_plane)
	size_t plane;
	float acc[2][5][2][4];

	__device__ __forceinline__ VfConvGWarp(const VfWarp<T>& w, int classes, unsigned char* __restrict__ labels,
	                                       unsigned* __restrict__ logits, size_t plane)
	    : VfWarp<T>(w), classes(classes), labels(labels), logits(logits), plane(plane) {
		vf_conv_offsets<2>(this->off, this->row0, this->lane);
		vf_acc_bias(acc, this->sm.bg, this->lane);
	}

	template <int PH> __device__ __forceinline__ void work(int t, int p) {
		VfSmem& sm = this->sm;
		const VfGeom& G = this->G;
		const int lane = this->lane, row0 = this->row0;
		// This step's e buffer and the previous step's s buffer.
		const int b = t & 1, bp = (t - 1) & 1;
		if (G.z0 + p >= 0 && G.z0 + p < G.nz)
			vf_conv_plane<2, 5, PH, VF_LOADS_FIRST>(sm.e[b], &sm.wsm[1][0][0][0], this->boff, acc, this->off);
		if (t >= 4)
			vf_epilogue<WIDE>(sm, acc[0][PH], acc[1][PH], &sm.s[bp][row0][0][0][0],
#if VF_GATE_SPLIT
			            &sm.qs[bp][row0][0][0],
#else
			            nullptr,
#endif
			            lane, classes, labels + (size_t)(p - 2) * plane, vf_logit_plane<WIDE>(logits, G, p - 2, plane),
			            G.y0 + row0, G);
		vf_acc_restart(acc[0][PH], sm.bg, lane);
		vf_acc_restart(acc[1][PH], sm.bg, lane);
	}
};

// vf_steps runs a warp's step loop, unrolled by its accumulator ring (NP steps).
template <int NP, class W> __device__ __forceinline__ void vf_steps(W& w, int steps) {
	for (int t = 0; t < steps; t += NP) {
		w.template step<0>(w, t);
		if (t + 1 < steps) w.template step<1>(w, t + 1);
		if (t + 2 < steps) w.template step<2>(w, t + 2);
		if constexpr (NP == 5) {
			if (t + 3 < steps) w.template step<3>(w, t + 3);
			if (t + 4 < steps) w.template step<4>(w, t + 4);
		}
	}
}

// fused_tile: output planes o0..o1-1 of one x-y tile (G) of the slab.
template <typename T, bool WIDE>
__device__ __forceinline__ void fused_tile(VfSmem& sm, const T* __restrict__ in, unsigned char* __restrict__ labels,
                                           unsigned* __restrict__ logits, const VfGeom& G, int o0, int o1,
                                           int classes, int tid, int lane, int warp) {
	const int steps = o1 - o0 + 4;
	const bool isConv2 = warp < VF_CW;
	const int cw = isConv2 ? warp : warp - VF_CW, row0 = cw * VF_RPW;
	const size_t plane = (size_t)G.nx * G.ny;
	static_assert(VF_XH * VF_XRAW <= 2 * VF_THREADS, "fused kernel: two x values per thread at most");
	const VfXPair<T> X(in, G, tid);
#pragma unroll
	for (int i = 0; i < 4; ++i) X.load(sm, i, tid, G, o0 - 3 + i);
	__syncthreads();
	VfConv1Plan cp;
	if (isConv2) {
		cp = vf_conv1_plan(sm, G, cw, lane);
		const int q = o0 - 2;
		vf_conv1(sm, 0, 0, G.z0 + q >= 0 && G.z0 + q < G.nz, cp, cw, VF_CW, lane);
	}
	__syncthreads();
	// The lane's row of the weights' ldmatrix: matrix j = lane/8 is (n half j/2, k half j%2).
	const int bj = lane >> 3, bn = (bj >> 1) * 8 + (lane & 7);
	const int boff = bn * 16 + (((bj & 1) ^ ((bn >> 2) & 1)) * 8);

	const VfWarp<T> base(sm, G, X, boff, o0, o1, steps, tid, lane, row0);
	if (isConv2) {
		VfConv2Warp<T> W(base, cp, cw);
		vf_steps<3>(W, steps);
	} else {
		VfConvGWarp<T, WIDE> W(base, classes, labels, logits, plane);
		vf_steps<5>(W, steps);
	}
}

// fused_body: the block's start (weights into shared memory), then its tile: blockIdx.x and .y
// the x-y tile, blockIdx.z the z chunk.
template <typename T, bool WIDE>
__device__ __forceinline__ void fused_body(const T* __restrict__ in, unsigned char* __restrict__ labels,
                                               unsigned* __restrict__ logits, const float* __restrict__ w, int nx,
                                               int ny, int nz, int z0, int nzOut, int zChunk, float scale, float shift,
                                               int classes) {
#if defined(__CUDA_ARCH__)
	extern __shared__ __align__(16) unsigned char vf_smem_dyn[];
	VfSmem& sm = *reinterpret_cast<VfSmem*>(vf_smem_dyn);
#else
	__shared__ VfSmem sm;
#endif
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int o0 = blockIdx.z * zChunk, o1 = min(o0 + zChunk, nzOut);

	if (warp == 0) vf_params(sm, w, lane);
	// The convs' weights, four at a time (16-byte loads, all of a thread's issued at once: this
	// start is paid by every block, with the SM otherwise idle): k..k+3 stay within one 8-element
	// half of a row, so they go to four consecutive fp16 slots.
	static_assert(VF_OFF_W2 % 4 == 0 && VF_OFF_WG % 4 == 0, "fused kernel: conv weights must be 16-byte aligned");
#pragma unroll
	for (int i = tid; i < 2 * 27 * 64; i += VF_THREADS) {
		const int c = i / (27 * 64), r = i % (27 * 64) * 4, t = r / 256, n = r / 16 % 16, k = r % 16;
		const float4 v = __ldg(reinterpret_cast<const float4*>(w + (c ? VF_OFF_WG : VF_OFF_W2) + r));
		uint2 h;
		h.x = (unsigned)vf_half(v.x) | (unsigned)vf_half(v.y) << 16;
		h.y = (unsigned)vf_half(v.z) | (unsigned)vf_half(v.w) << 16;
		*reinterpret_cast<uint2*>(&sm.wsm[c][t][n][((k >> 3) ^ ((n >> 2) & 1)) * 8 + (k & 7)]) = h;
	}
	const VfGeom G{nx, ny, nz, z0, (int)blockIdx.x * VF_TX, (int)blockIdx.y * VF_ROWS, scale, shift};
	fused_tile<T, WIDE>(sm, in, labels, logits, G, o0, o1, classes, tid, lane, warp);
}

// The kernels: int16 or float32 input; models of at most 8 classes (one n8 tile of logits: the
// common case, no code or registers for a second tile) or of up to 16 (_k16). logits receives the
// sampled planes' logits (vf_logit_plane), from which count_confidence counts the margins.
#define VF_KERNEL(name, T, WIDE)                                                                                       \
	extern "C" __global__ void __launch_bounds__(VF_THREADS, 1)                                                        \
	name(const T* __restrict__ in, unsigned char* __restrict__ labels, unsigned* __restrict__ logits,               \
	     const float* __restrict__ w, int nx, int ny, int nz, int z0, int nzOut, int zChunk, float scale, float shift, \
	     int classes) {                                                                                                \
		fused_body<T, WIDE>(in, labels, logits, w, nx, ny, nz, z0, nzOut, zChunk, scale, shift, classes);           \
	}
VF_KERNEL(fused_i16, short, false)
VF_KERNEL(fused_f32, float, false)
VF_KERNEL(fused_i16_k16, short, true)
VF_KERNEL(fused_f32_k16, float, true)
