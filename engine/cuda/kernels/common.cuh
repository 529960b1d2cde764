// Definitions shared by voxpipe's kernels. The network is specified in segment/model.go.
//
// Layouts (x fastest everywhere):
//   input slab   [plane][ny][nx]           int16 or float32 stored values
//   e, s, g      [VP_C][planes][ny][nx]    float32, channel stride = planes*ny*nx
//   labels       [plane][ny][nx]           uint8
// Models with fewer channels or classes are zero-padded to VP_C / VP_MAXK on upload, which
// leaves every label unchanged (the padded channels are exactly 0 and get weight 0).
#ifndef VOXPIPE_COMMON_CUH
#define VOXPIPE_COMMON_CUH

#define VP_C 16    // channels the kernels compute (the network's C, padded)
#define VP_GATE 8  // attention-gate width, VP_C/2
#define VP_MAXK 16 // most classes the head supports

// Output tile of the 3x3x3 stencil kernels: one warp spans x, VP_TY warps span y, and every
// thread keeps VP_TZ consecutive z-planes of all VP_C channels in registers.
#define VP_TX 32
#define VP_TY 8
#define VP_TZ 4
#define VP_THREADS (VP_TX * VP_TY)

// The model's confidence over a volume (segment.Confidence), accumulated by gate_head and
// count_confidence (from the fused kernels' labels and logits) into a buffer of VP_CONF_LEN
// unsigned 64-bit counters: foreground voxels (label > 0), the sum of their top-two logit
// margins in whole units of 1/VP_MARGIN_SCALE logit (rounded down, each capped at
// VP_MARGIN_CAP), the foreground voxels whose margin is below VP_LOW_MARGIN units, and the
// voxels of each label. Integers, so the sums do not depend on the order of the atomics.
#define VP_MARGIN_SCALE 64.f
#define VP_MARGIN_CAP 65535u
#define VP_LOW_MARGIN 64u
#define VP_CONF_FG 0
#define VP_CONF_MARGIN 1
#define VP_CONF_LOW 2
#define VP_CONF_LABELS 3
#define VP_CONF_LEN (VP_CONF_LABELS + VP_MAXK)
// The margins (VP_CONF_FG, _MARGIN, _LOW) are counted on the output planes whose z in the volume
// is a multiple of VP_CONF_STRIDE (segment.MarginStride); the labels on every plane. An eighth
// of a volume's foreground estimates its mean margin as well as the whole, and the fused
// kernel's epilogue, on its slowest warps' critical path, pays for the margin on those planes
// only.
#ifndef VP_CONF_STRIDE
#define VP_CONF_STRIDE 8
#endif
__device__ __forceinline__ bool vp_conf_plane(long long z) { return z % VP_CONF_STRIDE == 0; }
// vp_margin_index: a sampled plane z's index among the sampled planes of a slab starting at z0
// (the fused kernel's margins buffer).
__device__ __forceinline__ int vp_margin_index(int z0, int z) { return z / VP_CONF_STRIDE - (z0 + VP_CONF_STRIDE - 1) / VP_CONF_STRIDE; }
// vp_margin_planes: the sampled planes among z0..z0+n-1.
__device__ __forceinline__ int vp_margin_planes(int z0, int n) {
	return (z0 + n + VP_CONF_STRIDE - 1) / VP_CONF_STRIDE - (z0 + VP_CONF_STRIDE - 1) / VP_CONF_STRIDE;
}

// Warp-wide operations of the confidence reductions (kernels/emu emulates them on the host).
__device__ __forceinline__ unsigned long long vp_shfl_xor_u64(unsigned long long v, int m) {
#if defined(__CUDA_ARCH__)
	return __shfl_xor_sync(0xffffffffu, v, m);
#elif defined(VOXPIPE_EMU)
	return emu_shfl_xor_u64(v, m);
#else
	return v;
#endif
}
// vp_vcmpeq4: 0xff in each byte where a and b hold the same byte, 0 elsewhere (__vcmpeq4).
__device__ __forceinline__ unsigned vp_vcmpeq4(unsigned a, unsigned b) {
#if defined(__CUDA_ARCH__)
	return __vcmpeq4(a, b);
#else
	unsigned r = 0;
	for (int i = 0; i < 32; i += 8)
		if (((a >> i) & 0xffu) == ((b >> i) & 0xffu)) r |= 0xffu << i;
	return r;
#endif
}

// vp_half_float: the float of fp16 bits.
__device__ __forceinline__ float vp_half_float(unsigned short h) {
#if defined(__CUDA_ARCH__)
	float r;
	asm("cvt.f32.f16 %0, %1;\n" : "=f"(r) : "h"(h));
	return r;
#elif defined(VOXPIPE_EMU)
	return emu_half_float(h);
#else
	return 0.f;
#endif
}

// vp_margin_units is segment.MarginUnits: the margin m = best - second logit in units, 0 for a
// NaN or negative one.
__device__ __forceinline__ unsigned vp_margin_units(float m) {
	if (!(m > 0.f)) return 0u;
	const float u = m * VP_MARGIN_SCALE;
	return u < (float)VP_MARGIN_CAP ? __float2uint_rz(u) : VP_MARGIN_CAP;
}

// VpConf is one thread's share of the foreground counters (at most 65536 voxels a thread: the
// launchers bound the voxels a thread labels).
struct VpConf {
	unsigned fg, margin, low;
	__device__ __forceinline__ void add(int label, float best, float second) {
		if (label > 0) {
			const unsigned u = vp_margin_units(best - second);
			++fg;
			margin += u;
			low += u < VP_LOW_MARGIN;
		}
	}
};

// vp_conf_flush adds a thread's VpConf to conf: summed over the warp (every lane of a full warp
// calls it), then lane 0's atomics.
__device__ __forceinline__ void vp_conf_flush(unsigned long long* __restrict__ conf, VpConf c) {
	unsigned long long fg = c.fg, margin = c.margin, low = c.low;
#pragma unroll
	for (int off = 16; off > 0; off >>= 1) {
		fg += vp_shfl_xor_u64(fg, off);
		margin += vp_shfl_xor_u64(margin, off);
		low += vp_shfl_xor_u64(low, off);
	}
	if ((threadIdx.x & 31) == 0 && (fg | margin | low)) {
		atomicAdd(conf + VP_CONF_FG, fg);
		atomicAdd(conf + VP_CONF_MARGIN, margin);
		atomicAdd(conf + VP_CONF_LOW, low);
	}
}

#endif
