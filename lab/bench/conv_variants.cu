// Variants of conv2/convg (engine/cuda/kernels/conv_cc.cu) for timing on the GPU machine; not
// part of the committed fatbin. Built by scripts/gpu-build.sh into bin/experiments.fatbin and
// timed by lab/bench's TestConvVariants (VOXPIPE_EXPERIMENT_FATBIN). Names: conv2_<v>, convg_<v>.
#include "../../engine/cuda/kernels/conv_cc.cu"

#define VARIANT(name, CH2, CHG, TZ, TY, ASYNC, MINB)                                                 \
	extern "C" __global__ void __launch_bounds__(VP_TX * TY, MINB)                                    \
	conv2_##name(const float* __restrict__ e, const float* __restrict__ w, const float* __restrict__ b, \
	             float* __restrict__ o, int nx, int ny, int ePlanes, int nzOut, int oPlanes) {         \
		ConvCC<1, CH2, TZ, TY, ASYNC>::run(e, w, b, o, nx, ny, ePlanes, nzOut, oPlanes);              \
	}                                                                                                 \
	extern "C" __global__ void __launch_bounds__(VP_TX * TY, MINB)                                    \
	convg_##name(const float* __restrict__ e, const float* __restrict__ w, const float* __restrict__ b, \
	             float* __restrict__ o, int nx, int ny, int ePlanes, int nzOut, int oPlanes) {         \
		ConvCC<2, CHG, TZ, TY, ASYNC>::run(e, w, b, o, nx, ny, ePlanes, nzOut, oPlanes);              \
	}

VARIANT(z4y8, 4, 2, 4, 8, false, 1)   // the first version (synchronous staging): the reference
VARIANT(z4y8a, 2, 1, 4, 8, true, 1)   // + cp.async double buffering: the committed configuration
VARIANT(z4y4a5, 2, 1, 4, 4, true, 5)  // 128 threads, <= 102 registers: 20 warps per SM
VARIANT(z8y4a, 2, 1, 8, 4, true, 3)   // 8 planes per thread
VARIANT(z2y8a, 2, 1, 2, 8, true, 3)   // 2 planes per thread, 24 warps per SM

// FMA throughput ceiling: 8 independent chains per thread, n rounds; out keeps them live.
extern "C" __global__ void __launch_bounds__(256) ffma_peak(float* out, int n) {
	float a[8];
#pragma unroll
	for (int i = 0; i < 8; ++i) a[i] = threadIdx.x * 1e-3f + i;
	const float m = 0.999f, c = 1e-4f;
	for (int r = 0; r < n; ++r) {
#pragma unroll
		for (int k = 0; k < 16; ++k)
#pragma unroll
			for (int i = 0; i < 8; ++i) a[i] = fmaf(a[i], m, c);
	}
	float s = 0.f;
#pragma unroll
	for (int i = 0; i < 8; ++i) s += a[i];
	out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
