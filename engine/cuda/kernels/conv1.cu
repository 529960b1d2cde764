// conv1: normalisation fused into the first convolution (1 -> C, 3x3x3, zero padding 1), ReLU.
//
//   x(z,y,x)      = float(v(z,y,x))*scale + shift        inside the volume (two roundings, no FMA,
//                                                        bit-identical to segment.Norm.Apply)
//                 = 0                                    outside it (conv1's zero padding)
//   e[co](z,y,x)  = relu(b1[co] + sum_{dz,dy,dx=-1..1} w1[co][dz+1][dy+1][dx+1] * x(z+dz,y+dy,x+dx))
//
// computed for the e planes p in [0, nzE) of a slab, global z = zE0+p. e planes outside the
// volume (z < 0 or z >= nz) are written as 0: that is the zero padding of the next two convs.
// in: plane q holds global z = zE0-1+q, nzE+2 planes (those outside the volume are never read).
// e: [VP_C][ePlanes][ny][nx].
// Two entry points: conv1_i16 (int16 stored values) and conv1_f32 (float32).
#include "common.cuh"

__constant__ float c_conv1_w[27 * VP_C]; // [tap][co], tap = (dz*3+dy)*3+dx
__constant__ float c_conv1_b[VP_C];

__device__ __forceinline__ float vp_load_value(const short* p) { return (float)__ldg(p); }
__device__ __forceinline__ float vp_load_value(const float* p) { return __ldg(p); }

template <typename T>
__device__ __forceinline__ void conv1_body(const T* __restrict__ in, float* __restrict__ e, int nx,
                                           int ny, int nz, int zE0, int nzE, int ePlanes,
                                           float scale, float shift) {
	__shared__ float tile[VP_TZ + 2][VP_TY + 2][VP_TX + 2];
	const int tx = threadIdx.x, ty = threadIdx.y;
	const int x0 = blockIdx.x * VP_TX, y0 = blockIdx.y * VP_TY, p0 = blockIdx.z * VP_TZ;
	const size_t plane = (size_t)nx * ny;

	// Normalised input tile with a 1-voxel halo; each warp fills whole rows.
	for (int r = ty; r < (VP_TZ + 2) * (VP_TY + 2); r += VP_TY) {
		const int tz = r / (VP_TY + 2), ry = r % (VP_TY + 2);
		const int q = p0 + tz;           // input plane
		const int gz = zE0 - 1 + q;      // its global z
		const int gy = y0 + ry - 1;
		const bool rowIn = q < nzE + 2 && gz >= 0 && gz < nz && gy >= 0 && gy < ny;
		for (int cx = tx; cx < VP_TX + 2; cx += VP_TX) {
			const int gx = x0 + cx - 1;
			float v = 0.f;
			if (rowIn && gx >= 0 && gx < nx) {
				v = __fadd_rn(__fmul_rn(vp_load_value(in + (size_t)q * plane + (size_t)gy * nx + gx), scale), shift);
			}
			tile[tz][ry][cx] = v;
		}
	}
	__syncthreads();

	float acc[VP_TZ][VP_C];
#pragma unroll
	for (int v = 0; v < VP_TZ; ++v)
#pragma unroll
		for (int co = 0; co < VP_C; ++co) acc[v][co] = c_conv1_b[co];

#pragma unroll
	for (int dy = 0; dy < 3; ++dy)
#pragma unroll
		for (int dx = 0; dx < 3; ++dx) {
			float col[VP_TZ + 2];
#pragma unroll
			for (int j = 0; j < VP_TZ + 2; ++j) col[j] = tile[j][ty + dy][tx + dx];
#pragma unroll
			for (int dz = 0; dz < 3; ++dz)
#pragma unroll
				for (int v = 0; v < VP_TZ; ++v)
#pragma unroll
					for (int co = 0; co < VP_C; ++co)
						acc[v][co] = fmaf(c_conv1_w[((dz * 3 + dy) * 3 + dx) * VP_C + co], col[v + dz], acc[v][co]);
		}

	const int gx = x0 + tx, gy = y0 + ty;
	if (gx >= nx || gy >= ny) return;
	const size_t chan = (size_t)ePlanes * plane;
#pragma unroll
	for (int v = 0; v < VP_TZ; ++v) {
		const int p = p0 + v;
		if (p >= nzE) break;
		const int gz = zE0 + p;
		const bool inside = gz >= 0 && gz < nz;
		float* dst = e + (size_t)p * plane + (size_t)gy * nx + gx;
#pragma unroll
		for (int co = 0; co < VP_C; ++co) dst[co * chan] = inside ? fmaxf(acc[v][co], 0.f) : 0.f;
	}
}

extern "C" __global__ void __launch_bounds__(VP_THREADS)
conv1_i16(const short* __restrict__ in, float* __restrict__ e, int nx, int ny, int nz, int zE0,
          int nzE, int ePlanes, float scale, float shift) {
	conv1_body<short>(in, e, nx, ny, nz, zE0, nzE, ePlanes, scale, shift);
}

extern "C" __global__ void __launch_bounds__(VP_THREADS)
conv1_f32(const float* __restrict__ in, float* __restrict__ e, int nx, int ny, int nz, int zE0,
          int nzE, int ePlanes, float scale, float shift) {
	conv1_body<float>(in, e, nx, ny, nz, zE0, nzE, ePlanes, scale, shift);
}
