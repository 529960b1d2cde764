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
// sm_90a builds (VF_WGMMA, the lab's cubin) issue the two C -> C convs as wgmma instead, per
// warpgroup of four conv warps (fused_wgmma.cuh); everything else is the same.
//
// Slab layout (as the float32 kernels): in holds planes global z0-3 .. z0+nzOut+2 (plane q is
// global z0-3+q; planes outside [0, nz) are never read), labels [nzOut][ny][nx].
// Weights: one float32 buffer in the VF_OFF_* layout below (module_cuda.go's packFused).
#include "common.cuh"

// The kernel's parts, in this order: each uses what the ones before define.
#include "fused_config.cuh"
#include "fused_mma.cuh"
#include "fused_wgmma.cuh"
#include "fused_conv1.cuh"
#include "fused_epilogue.cuh"
#include "fused_convs.cuh"

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
		vf_steps<VF_G_RING>(W, steps);
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
#elif defined(VOXPIPE_EMU)
	VfSmem& sm = *reinterpret_cast<VfSmem*>(emu_dynamic_shared()); // launched with sizeof(VfSmem)
#else
	__shared__ VfSmem sm;
#endif
	// VF_WGMMA: the warp index through a shuffle from lane 0, the same value, but one ptxas knows
	// is uniform across the warp, so the conv warps' roles are not divergent paths (around which
	// it serialises the wgmma).
	const int tid = threadIdx.x, lane = tid & 31, warp = VF_WGMMA ? vf_warp_uniform(tid >> 5) : tid >> 5;
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
#if VF_WGMMA
		constexpr int NG = VF_WG_GPAR ? 48 : 16;
#pragma unroll
		for (int ph = 0; ph < 3; ++ph) {
			if (c && (ph == 0 || NG == 48)) *reinterpret_cast<uint2*>(&sm.wgimg[vf_wg_imgoff<NG>(ph, t, n, k)]) = h;
			if (!c && (ph == 0 || VF_WG_N2 == 48)) *reinterpret_cast<uint2*>(&sm.w2img[vf_wg_imgoff<VF_WG_N2>(ph, t, n, k)]) = h;
		}
#endif
#if VF_WSM
		*reinterpret_cast<uint2*>(&sm.wsm[c][t][n][((k >> 3) ^ ((n >> 2) & 1)) * 8 + (k & 7)]) = h;
#endif
	}
#if VF_WGMMA
	vf_fence_proxy_async(); // before the block barrier after which wgmma reads them
#endif
	const VfGeom G{nx, ny, nz, z0, (int)blockIdx.x * VF_TX, (int)blockIdx.y * VF_ROWS, scale, shift};
	fused_tile<T, WIDE>(sm, in, labels, logits, G, o0, o1, classes, tid, lane, warp);
}

// The kernels: int16 or float32 input; models of at most 8 classes (one n8 tile of logits: the
// common case, no code or registers for a second tile) or of up to 16 (_k16). logits receives the
// sampled planes' logits (vf_logit_plane), from which count_confidence counts the margins.
#define VF_KERNEL(name, T, WIDE)                                                                                       \
	extern "C" __global__ void __launch_bounds__(VF_THREADS, VF_MINB)                                                      \
	name(const T* __restrict__ in, unsigned char* __restrict__ labels, unsigned* __restrict__ logits,               \
	     const float* __restrict__ w, int nx, int ny, int nz, int z0, int nzOut, int zChunk, float scale, float shift, \
	     int classes) {                                                                                                \
		fused_body<T, WIDE>(in, labels, logits, w, nx, ny, nz, z0, nzOut, zChunk, scale, shift, classes);           \
	}
VF_KERNEL(fused_i16, short, false)
VF_KERNEL(fused_f32, float, false)
VF_KERNEL(fused_i16_k16, short, true)
VF_KERNEL(fused_f32_k16, float, true)
