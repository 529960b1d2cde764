// conv2 and convg: the C -> C 3x3x3 convolutions on e, plain (D = 1) and dilated (D = 2), with zero
// padding D and ReLU.
//
//   out[co](z,y,x) = relu(b[co] + sum_ci sum_{dz,dy,dx=-1..1} w[co][ci][dz+1][dy+1][dx+1] * e[ci](z+D*dz, y+D*dy, x+D*dx))
//
// e = 0 outside the volume: in z the e planes beyond it hold zeros (conv1 writes them), in x and
// y the tile loads check bounds. Output plane o is e plane o+2 (e starts 2 planes above the
// output slab), so it reads e planes o+2-D .. o+2+D.
// e:   [VP_C][ePlanes][ny][nx], ePlanes >= roundup(nzOut, VP_TZ) + 4 (every tile's reads stay in it)
// out: [VP_C][oPlanes][ny][nx], planes [0, nzOut) written
// w:   [ci][tap][co] (PyTorch's [co][ci][tap] transposed on upload), b: [co]; in global memory,
//      staged through shared memory per input-channel chunk (broadcast 16-byte reads).
//
// Each block computes a VP_TX x VP_TY x VP_TZ output tile of all VP_C channels; each thread a
// z-column of VP_TZ voxels (the column of VP_TZ+2D inputs it loads per (ci,dy,dx) serves all
// three dz), 16 channels at a time: 48*VP_TZ FMAs per 12 weight loads and VP_TZ+2D value loads.
#include "common.cuh"

template <int D, int CH>
__device__ __forceinline__ void conv_cc_body(const float* __restrict__ e, const float* __restrict__ w,
                                             const float* __restrict__ b, float* __restrict__ out,
                                             int nx, int ny, int ePlanes, int nzOut, int oPlanes) {
	constexpr int SX = VP_TX + 2 * D, SY = VP_TY + 2 * D, SZ = VP_TZ + 2 * D;
	__shared__ float tile[CH][SZ][SY][SX];
	__shared__ __align__(16) float ws[CH][27][VP_C];

	const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * VP_TX + tx;
	const int x0 = blockIdx.x * VP_TX, y0 = blockIdx.y * VP_TY, o0 = blockIdx.z * VP_TZ;
	const size_t plane = (size_t)nx * ny;
	const size_t eChan = (size_t)ePlanes * plane;

	float acc[VP_TZ][VP_C];
#pragma unroll
	for (int v = 0; v < VP_TZ; ++v)
#pragma unroll
		for (int co = 0; co < VP_C; ++co) acc[v][co] = __ldg(b + co);

	for (int c0 = 0; c0 < VP_C; c0 += CH) {
		// Stage CH channels of the input tile (halo D, zeros outside the volume in x and y) and
		// their weights.
		for (int r = ty; r < CH * SZ * SY; r += VP_TY) {
			const int c = r / (SZ * SY), rem = r % (SZ * SY);
			const int tz = rem / SY, ry = rem % SY;
			const int gy = y0 + ry - D;
			const bool rowIn = gy >= 0 && gy < ny;
			const float* row = e + (size_t)(c0 + c) * eChan + (size_t)(o0 + tz + 2 - D) * plane;
			for (int cx = tx; cx < SX; cx += VP_TX) {
				const int gx = x0 + cx - D;
				tile[c][tz][ry][cx] = (rowIn && gx >= 0 && gx < nx) ? __ldg(row + (size_t)gy * nx + gx) : 0.f;
			}
		}
		{
			const float4* src = reinterpret_cast<const float4*>(w + (size_t)c0 * 27 * VP_C);
			float4* dst = reinterpret_cast<float4*>(&ws[0][0][0]);
			for (int i = tid; i < CH * 27 * VP_C / 4; i += VP_THREADS) dst[i] = __ldg(src + i);
		}
		__syncthreads();

#pragma unroll 1
		for (int c = 0; c < CH; ++c) {
#pragma unroll
			for (int dy = 0; dy < 3; ++dy)
#pragma unroll
				for (int dx = 0; dx < 3; ++dx) {
					float col[SZ];
#pragma unroll
					for (int j = 0; j < SZ; ++j) col[j] = tile[c][j][ty + D * dy][tx + D * dx];
#pragma unroll
					for (int dz = 0; dz < 3; ++dz) {
						const float4* wp = reinterpret_cast<const float4*>(&ws[c][(dz * 3 + dy) * 3 + dx][0]);
#pragma unroll
						for (int q = 0; q < VP_C / 4; ++q) {
							const float4 w4 = wp[q];
#pragma unroll
							for (int v = 0; v < VP_TZ; ++v) {
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
		__syncthreads();
	}

	const int gx = x0 + tx, gy = y0 + ty;
	if (gx >= nx || gy >= ny) return;
	const size_t oChan = (size_t)oPlanes * plane;
#pragma unroll
	for (int v = 0; v < VP_TZ; ++v) {
		const int o = o0 + v;
		if (o >= nzOut) break;
		float* dst = out + (size_t)o * plane + (size_t)gy * nx + gx;
#pragma unroll
		for (int co = 0; co < VP_C; ++co) dst[co * oChan] = fmaxf(acc[v][co], 0.f);
	}
}

extern "C" __global__ void __launch_bounds__(VP_THREADS)
conv2(const float* __restrict__ e, const float* __restrict__ w, const float* __restrict__ b,
      float* __restrict__ s, int nx, int ny, int ePlanes, int nzOut, int sPlanes) {
	conv_cc_body<1, 4>(e, w, b, s, nx, ny, ePlanes, nzOut, sPlanes);
}

extern "C" __global__ void __launch_bounds__(VP_THREADS)
convg(const float* __restrict__ e, const float* __restrict__ w, const float* __restrict__ b,
      float* __restrict__ g, int nx, int ny, int ePlanes, int nzOut, int gPlanes) {
	conv_cc_body<2, 2>(e, w, b, g, nx, ny, ePlanes, nzOut, gPlanes);
}
