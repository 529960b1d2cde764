// conv2 and convg: the C -> C 3x3x3 convolutions on e, plain (D = 1) and dilated (D = 2), with zero
// padding D and ReLU.
//
//   out[co](z,y,x) = relu(b[co] + sum_ci sum_{dz,dy,dx=-1..1} w[co][ci][dz+1][dy+1][dx+1] * e[ci](z+D*dz, y+D*dy, x+D*dx))
//
// e = 0 outside the volume: in z the e planes beyond it hold zeros (conv1 writes them), in x and
// y the tile loads check bounds. Output plane o is e plane o+2 (e starts 2 planes above the
// output slab), so it reads e planes o+2-D .. o+2+D.
// e:   [VP_C][ePlanes][ny][nx], ePlanes >= roundup(nzOut, TZ) + 4 (every tile's reads stay in it)
// out: [VP_C][oPlanes][ny][nx], planes [0, nzOut) written
// w:   [ci][tap][co] (PyTorch's [co][ci][tap] transposed on upload), b: [co], in global memory.
//
// Each block computes a VP_TX x TY x TZ output tile of all VP_C channels; each thread a z-column
// of TZ voxels: the column of TZ+2D inputs it loads per (ci,dy,dx) serves all three dz, and each
// broadcast 16-byte weight load feeds 4*TZ FMAs. Input channels are staged through shared memory
// CH at a time (tile with halo, and their weights); with ASYNC the next chunk is copied with
// cp.async while the current one is computed (two buffers).
#include "common.cuh"

__device__ __forceinline__ void vp_cp_async4(float* dst, const float* src, bool valid) {
#if defined(__CUDA_ARCH__)
	const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 4 : 0));
#else
	*dst = valid ? *src : 0.f;
#endif
}
__device__ __forceinline__ void vp_cp_async16(float* dst, const float* src) {
#if defined(__CUDA_ARCH__)
	const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
#else
	for (int i = 0; i < 4; ++i) dst[i] = src[i];
#endif
}
__device__ __forceinline__ void vp_cp_async_commit() {
#if defined(__CUDA_ARCH__)
	asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N> __device__ __forceinline__ void vp_cp_async_wait() {
#if defined(__CUDA_ARCH__)
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

template <int D, int CH, int TZ, int TY, bool ASYNC>
struct ConvCC {
	static constexpr int SX = VP_TX + 2 * D, SY = TY + 2 * D, SZ = TZ + 2 * D;
	static constexpr int NBUF = ASYNC ? 2 : 1;
	static constexpr int THREADS = VP_TX * TY;

	struct Smem {
		float tile[NBUF][CH][SZ][SY][SX];
		__align__(16) float w[NBUF][CH][27][VP_C];
	};

	// stage copies input channels [c0, c0+CH) of the tile and their weights into buffer buf.
	static __device__ __forceinline__ void stage(Smem& sm, int buf, int c0, const float* __restrict__ e,
	                                             const float* __restrict__ w, int nx, int ny,
	                                             size_t plane, size_t eChan, int x0, int y0, int o0) {
		const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * VP_TX + tx;
		for (int r = ty; r < CH * SZ * SY; r += TY) {
			const int c = r / (SZ * SY), rem = r % (SZ * SY);
			const int tz = rem / SY, ry = rem % SY;
			const int gy = y0 + ry - D;
			const bool rowIn = gy >= 0 && gy < ny;
			const float* row = e + (size_t)(c0 + c) * eChan + (size_t)(o0 + tz + 2 - D) * plane + (size_t)(rowIn ? gy : 0) * nx;
			for (int cx = tx; cx < SX; cx += VP_TX) {
				const int gx = x0 + cx - D;
				const bool in = rowIn && gx >= 0 && gx < nx;
				if (ASYNC) {
					vp_cp_async4(&sm.tile[buf][c][tz][ry][cx], in ? row + gx : e, in);
				} else {
					sm.tile[buf][c][tz][ry][cx] = in ? __ldg(row + gx) : 0.f;
				}
			}
		}
		const float* src = w + (size_t)c0 * 27 * VP_C;
		float* dst = &sm.w[buf][0][0][0];
		for (int i = tid; i < CH * 27 * VP_C / 4; i += THREADS) {
			if (ASYNC) {
				vp_cp_async16(dst + 4 * i, src + 4 * i);
			} else {
				reinterpret_cast<float4*>(dst)[i] = __ldg(reinterpret_cast<const float4*>(src) + i);
			}
		}
	}

	static __device__ __forceinline__ void compute(const Smem& sm, int buf, float (&acc)[TZ][VP_C]) {
		const int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll 1
		for (int c = 0; c < CH; ++c) {
#pragma unroll
			for (int dy = 0; dy < 3; ++dy)
#pragma unroll
				for (int dx = 0; dx < 3; ++dx) {
					float col[SZ];
#pragma unroll
					for (int j = 0; j < SZ; ++j) col[j] = sm.tile[buf][c][j][ty + D * dy][tx + D * dx];
#pragma unroll
					for (int dz = 0; dz < 3; ++dz) {
						const float4* wp = reinterpret_cast<const float4*>(&sm.w[buf][c][(dz * 3 + dy) * 3 + dx][0]);
#pragma unroll
						for (int q = 0; q < VP_C / 4; ++q) {
							const float4 w4 = wp[q];
#pragma unroll
							for (int v = 0; v < TZ; ++v) {
								const float xv = col[v + D * dz];
								acc[v][4 * q + 0] = fmaf(w4.x, xv, acc[v][4 * q + 0]);
								acc[v][4 * q + 1] = fmaf(w4.y, xv, acc[v][4 * q + 1]);
								acc[v][4 * q + 2] = fmaf(w4.z, xv, acc[v][4 * q + 2]);
								acc[v][4 * q + 3] = fmaf(w4.w, xv, acc[v][4 * q + 3]);
							}
						}
					}
				}
		}
	}

	static __device__ __forceinline__ void run(const float* __restrict__ e, const float* __restrict__ w,
	                                           const float* __restrict__ b, float* __restrict__ out,
	                                           int nx, int ny, int ePlanes, int nzOut, int oPlanes) {
		__shared__ Smem sm;
		const int x0 = blockIdx.x * VP_TX, y0 = blockIdx.y * TY, o0 = blockIdx.z * TZ;
		const size_t plane = (size_t)nx * ny;
		const size_t eChan = (size_t)ePlanes * plane;

		float acc[TZ][VP_C];
#pragma unroll
		for (int v = 0; v < TZ; ++v)
#pragma unroll
			for (int co = 0; co < VP_C; ++co) acc[v][co] = __ldg(b + co);

		if (ASYNC) {
			stage(sm, 0, 0, e, w, nx, ny, plane, eChan, x0, y0, o0);
			vp_cp_async_commit();
			for (int c0 = 0, buf = 0; c0 < VP_C; c0 += CH, buf ^= 1) {
				if (c0 + CH < VP_C) {
					stage(sm, buf ^ 1, c0 + CH, e, w, nx, ny, plane, eChan, x0, y0, o0);
					vp_cp_async_commit();
					vp_cp_async_wait<1>();
				} else {
					vp_cp_async_wait<0>();
				}
				__syncthreads();
				compute(sm, buf, acc);
				__syncthreads();
			}
		} else {
			for (int c0 = 0; c0 < VP_C; c0 += CH) {
				stage(sm, 0, c0, e, w, nx, ny, plane, eChan, x0, y0, o0);
				__syncthreads();
				compute(sm, 0, acc);
				__syncthreads();
			}
		}

		const int gx = x0 + threadIdx.x, gy = y0 + threadIdx.y;
		if (gx >= nx || gy >= ny) return;
		const size_t oChan = (size_t)oPlanes * plane;
#pragma unroll
		for (int v = 0; v < TZ; ++v) {
			const int o = o0 + v;
			if (o >= nzOut) break;
			float* dst = out + (size_t)o * plane + (size_t)gy * nx + gx;
#pragma unroll
			for (int co = 0; co < VP_C; ++co) dst[co * oChan] = fmaxf(acc[v][co], 0.f);
		}
	}
};

// The configuration the engine uses (VP_TZ, VP_TY in common.cuh).
typedef ConvCC<1, 2, VP_TZ, VP_TY, true> Conv2Cfg;
typedef ConvCC<2, 1, VP_TZ, VP_TY, true> ConvGCfg;

extern "C" __global__ void __launch_bounds__(VP_TX * VP_TY)
conv2(const float* __restrict__ e, const float* __restrict__ w, const float* __restrict__ b,
      float* __restrict__ s, int nx, int ny, int ePlanes, int nzOut, int sPlanes) {
	Conv2Cfg::run(e, w, b, s, nx, ny, ePlanes, nzOut, sPlanes);
}

extern "C" __global__ void __launch_bounds__(VP_TX * VP_TY)
convg(const float* __restrict__ e, const float* __restrict__ w, const float* __restrict__ b,
      float* __restrict__ g, int nx, int ny, int ePlanes, int nzOut, int gPlanes) {
	ConvGCfg::run(e, w, b, g, nx, ny, ePlanes, nzOut, gPlanes);
}
