// conv_wgmma_d1 / conv_wgmma_d2: the network's C -> C (C = 16) 3x3x3 convolutions, plain (D = 1,
// conv2) and dilated (D = 2, the gate's convg), with zero padding D and ReLU, on Hopper's
// warpgroup tensor-core instruction (wgmma.mma_async, sm_90a), fp16 in, fp32 accumulation:
//
//   out(z,y,x)[co] = relu(b[co] + sum_ci sum_{dz,dy,dx=-1..1} w[co][ci][dz+1][dy+1][dx+1] * e(z+D*dz, y+D*dy, x+D*dx)[ci])
//
// e = 0 outside the volume. e and out are fp16, channels last: [z][y][x][16].
// wsm: the weights already in the shared-memory image wgmma reads (pack_weights), W_BYTES;
// b: [16] float32.
//
// As an implicit GEMM per tap: D[64 x-voxels][16 co] += A[64 x-voxels][16 ci] * B[16 ci][16 co],
// one wgmma m64n16k16 (WG_N = 16), or, with the three dz taps side by side (WG_N = 48, the
// default), D[64][48 (output plane slot, co)] += A * B[16 ci][48], one m64n48k16 per (dy, dx):
// a third of the instructions for the same work. A block is one warpgroup (128 threads) computing a 64 (x) by R (y) tile
// of output rows, streaming z: each input plane (R + 2D rows with halo) is copied to shared
// memory with cp.async, one plane ahead. Each input row's three x-shifted A operands are loaded
// once into registers (ldmatrix) and serve every (dz, dy) tap whose output row is in the tile:
// up to 9 taps per A operand, which keeps shared-memory reads below the tensor cores' rate
// (with N = 16, an A operand read per wgmma would need ~256 B per clock and SM). Accumulators of
// the three output planes an input plane feeds are in registers (R x 24 floats per thread),
// their slots rotated by unrolling the z loop by 3. With D = 2 a block walks the planes of one parity.
#ifndef VOXPIPE_EMU // kernels/emu (the host emulator, g++) brings its own __half
#include <cuda_fp16.h>
#endif
#include <stdint.h>
#include <string.h>

#ifndef WG_R
#define WG_R 6 // output rows per block (even: the A operands alternate by input row; docs/perf.md for 2-6)
#endif
#ifndef WG_MINB
#define WG_MINB 1 // __launch_bounds__ minimum blocks per SM (caps registers)
#endif
#ifndef WG_CHUNK
#define WG_CHUNK 64 // output planes per block (of one parity when D = 2)
#endif
#ifndef WG_N
#define WG_N 48 // wgmma N: 16 (one tap per instruction) or 48 (the three dz taps side by side)
#endif

namespace wg {

constexpr int C = 16;
constexpr int TX = 64; // output voxels along x per block: wgmma's M
constexpr int R = WG_R;
constexpr int THREADS = 128;
constexpr int N = WG_N;
static_assert(N == 16 || N == 48, "WG_N is 16 or 48");
constexpr int TAP_BYTES = 16 * N * 2; // one B operand: 16 ci x N fp16
constexpr int W_BYTES = N == 16 ? 27 * TAP_BYTES : 3 * 9 * TAP_BYTES;

// Byte offset of weight (n, ci) within one B operand (16 ci x N columns): wgmma's K-major
// layout without swizzle, in 8x8 core matrices of 16-byte rows (one row per column n, 8 ci
// each); core matrices adjacent in K (ci) are LBO = 128 bytes apart, those adjacent in N SBO = 256.
__host__ __device__ constexpr int w_offset(int n, int ci) {
	return (n & 7) * 16 + (n >> 3) * 256 + (ci >> 3) * 128 + (ci & 7) * 2;
}

// The B operand of tap (dz, dy, dx) lives at b_offset in the weights' shared-memory image (W_BYTES):
//   N = 16: tap t = (dz*3 + dy)*3 + dx at t*TAP_BYTES, columns co;
//   N = 48: one operand per (U, dy, dx), U = the input step modulo 3, at ((U*3 + dy)*3 + dx)*TAP_BYTES;
//           column block c (columns 16c + co) holds tap dz = (U - c) mod 3, which feeds the output
//           plane in accumulator slot c at that step (see Conv::step).
// pack_weights fills that image from w[co][ci][27] (tap (dz*3 + dy)*3 + dx), rounding to fp16;
// to_half converts one weight (the caller's fp16 rounding, __float2half_rn on the host).
template <typename Half, typename ToHalf>
__host__ void pack_weights(const float* w, uint8_t* img, ToHalf to_half) {
	for (int t = 0; t < 27; ++t) {
		const int dz = t / 9, dyx = t % 9;
		for (int co = 0; co < C; ++co)
			for (int ci = 0; ci < C; ++ci) {
				const Half h = to_half(w[(co * C + ci) * 27 + t]);
				if constexpr (N == 16) {
					memcpy(img + t * TAP_BYTES + w_offset(co, ci), &h, 2);
				} else {
					for (int U = 0; U < 3; ++U) {
						const int c = (U - dz + 3) % 3;
						memcpy(img + (U * 9 + dyx) * TAP_BYTES + w_offset(c * C + co, ci), &h, 2);
					}
				}
			}
	}
}

template <int LBO, int SBO>
__device__ __forceinline__ uint64_t desc(uint32_t smem_addr) {
	return (uint64_t)((smem_addr >> 4) & 0x3FFF) | ((uint64_t)((LBO >> 4) & 0x3FFF) << 16) |
	       ((uint64_t)((SBO >> 4) & 0x3FFF) << 32);
}

// wgmma_rs16<S>: D += A * B with N = 16 into accumulator columns 16S .. 16S+15 of d (registers
// d[8S .. 8S+7]); wgmma_rs: N = 48, all of d.
template <int S>
__device__ __forceinline__ void wgmma_rs16(float (&d)[24], const uint32_t (&a)[4], uint64_t bdesc) {
#ifdef VOXPIPE_EMU // kernels/emu: this file's PTX wrappers call the host emulator instead
	emu_wgmma_rs(d + 8 * S, 16, a, bdesc);
#else
	asm volatile(
	    "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
	    "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
	    "{%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, 1, 0;\n}\n"
	    : "+f"(d[8 * S]), "+f"(d[8 * S + 1]), "+f"(d[8 * S + 2]), "+f"(d[8 * S + 3]), "+f"(d[8 * S + 4]),
	      "+f"(d[8 * S + 5]), "+f"(d[8 * S + 6]), "+f"(d[8 * S + 7])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(bdesc));
#endif
}
__device__ __forceinline__ void wgmma_rs(float (&d)[24], const uint32_t (&a)[4], uint64_t bdesc) {
#ifdef VOXPIPE_EMU
	emu_wgmma_rs(d, 48, a, bdesc);
#else
	asm volatile(
	    "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
	    "wgmma.mma_async.sync.aligned.m64n48k16.f32.f16.f16 "
	    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23}, "
	    "{%24,%25,%26,%27}, %28, p, 1, 1, 0;\n}\n"
	    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
	      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
	      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(bdesc));
#endif
}
#ifdef VOXPIPE_EMU
__device__ __forceinline__ void wgmma_fence() { emu_wgmma_fence(); }
__device__ __forceinline__ void wgmma_commit() { emu_wgmma_commit(); }
template <int N> __device__ __forceinline__ void wgmma_wait() { emu_wgmma_wait(N); }
#else
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
	asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
#endif
// Keeps the compiler from moving accumulator reads and writes across the asynchronous wgmma.
template <int K>
__device__ __forceinline__ void fence_acc(float (&d)[K]) {
#ifndef VOXPIPE_EMU // kernels/emu: the accumulators' address escapes to the emulator, whose waits are opaque calls
#pragma unroll
	for (int i = 0; i < K; ++i) asm volatile("" : "+f"(d[i])::"memory");
#endif
}

#ifdef VOXPIPE_EMU
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) { emu_cp_async16(dst, src, valid ? 16 : 0); }
__device__ __forceinline__ void cp_async_commit() { emu_cp_async_commit(); }
__device__ __forceinline__ void cp_async_wait_all() { emu_cp_async_wait_group(0); }
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&a)[4], uint32_t addr) { emu_ldmatrix_x4_shared(a, addr); }
// WG_FENCE_PROXY_ASYNC: fence.proxy.async.shared::cta, a macro since WG_STEP (a macro) cannot hold #ifdef
#define WG_FENCE_PROXY_ASYNC() emu_fence_proxy_async()
#else
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&a)[4], uint32_t addr) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
	             : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
	             : "r"(addr));
}
#define WG_FENCE_PROXY_ASYNC() asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory")
#endif

// A plane's voxel v (0 .. SX-1 along x) keeps its channel halves 16 bytes each, swapped when
// bit 2 of v is set, so that the 8 rows of an ldmatrix phase (8 consecutive voxels, one half)
// fall in distinct banks whatever the x shift.
__host__ __device__ constexpr int vox_half_offset(int v, int half) { return v * 32 + ((half ^ ((v >> 2) & 1)) * 16); }

template <int D, int LBO, int SBO>
struct Conv {
	static constexpr int SX = TX + 2 * D; // plane row length in voxels, with halo
	static constexpr int SY = R + 2 * D;  // plane rows, with halo
	static constexpr int PLANE_BYTES = SY * SX * 32;
	static constexpr int SMEM_BYTES = W_BYTES + 2 * PLANE_BYTES;
	static_assert(SY % 2 == 0, "A-operand double buffer alternates by input row");

	// load_plane copies input plane z (zeros outside the volume) into plane buffer dst.
	static __device__ __forceinline__ void load_plane(uint32_t dst, const __half* __restrict__ e, int z, int x0, int y0,
	                                                  int nx, int ny, int nz) {
		const bool zin = z >= 0 && z < nz;
		for (int i = threadIdx.x; i < SY * SX * 2; i += THREADS) {
			const int half = i & 1, v = (i >> 1) % SX, r = (i >> 1) / SX;
			const int x = x0 - D + v, y = y0 - D + r;
			const bool ok = zin && x >= 0 && x < nx && y >= 0 && y < ny;
			const __half* src = ok ? e + ((((size_t)z * ny + y) * nx + x) * C + half * 8) : e;
			cp_async16(dst + r * SX * 32 + vox_half_offset(v, half), src, ok);
		}
		cp_async_commit();
	}

	// step processes input step t (plane zin) into the three accumulator slots it feeds; U = t % 3.
	// The accumulators: acc[r] holds the tile's output row r of the three output planes in flight,
	// plane slot c in columns 16c .. 16c+15 (registers 8c .. 8c+7), for either N.
	template <int U>
	static __device__ __forceinline__ void step(float (&acc)[R][24], uint32_t (&a)[2][3][4], uint32_t plane,
	                                            uint32_t wbase, int warp, int lane) {
		// this lane's ldmatrix row: voxel warp*16 + lane%16 of the tile, channel half lane/16
		const int m = warp * 16 + (lane & 15), half = lane >> 4;
#pragma unroll
		for (int yr = 0; yr < SY; ++yr) {
			uint32_t(&ab)[3][4] = a[yr & 1];
			wgmma_wait<1>(); // the wgmma of row yr-2, which read ab, are done
#pragma unroll
			for (int dx = 0; dx < 3; ++dx) {
				const int v = m + D * dx; // input voxel (x0 - D + v) for output x0 + m, tap dx-1
				ldmatrix_x4(ab[dx], plane + yr * SX * 32 + vox_half_offset(v, half));
			}
			wgmma_fence();
#pragma unroll
			for (int dy = 0; dy < 3; ++dy) {
				const int r = yr - D * dy; // output row of tap dy-1: input row yr = r + D*dy
				if (r < 0 || r >= R) continue;
#pragma unroll
				for (int dx = 0; dx < 3; ++dx) {
					if constexpr (N == 48) {
						// the three dz taps at once, each into its output plane's slot
						wgmma_rs(acc[r], ab[dx], desc<LBO, SBO>(wbase + ((U * 3 + dy) * 3 + dx) * TAP_BYTES));
					} else {
#pragma unroll
						for (int dz = 0; dz < 3; ++dz) {
							// input step t feeds output j = t - 1 - (dz-1) = t - dz: slot (U - dz) mod 3
							const int slot = (U + 3 - dz) % 3;
							const uint64_t bd = desc<LBO, SBO>(wbase + ((dz * 3 + dy) * 3 + dx) * TAP_BYTES);
							if (slot == 0) wgmma_rs16<0>(acc[r], ab[dx], bd);
							else if (slot == 1) wgmma_rs16<1>(acc[r], ab[dx], bd);
							else wgmma_rs16<2>(acc[r], ab[dx], bd);
						}
					}
				}
			}
			wgmma_commit();
		}
	}

	// epilogue writes output j (slot S) of the tile: relu(acc + b) as fp16, then zeroes the slot.
	template <int S>
	static __device__ __forceinline__ void epilogue(float (&acc)[R][24], const float (&bias)[4], __half* __restrict__ out,
	                                                int z, bool zok, int x0, int y0, int nx, int ny, int warp, int lane) {
		const int x = x0 + warp * 16 + (lane >> 2), co = (lane & 3) * 2;
#pragma unroll
		for (int r = 0; r < R; ++r) {
			float(&d)[24] = acc[r];
			const int y = y0 + r;
			if (zok && y < ny) {
				__half* row = out + (((size_t)z * ny + y) * nx) * C;
#pragma unroll
				for (int hi = 0; hi < 2; ++hi) { // rows x and x + 8
					const int xx = x + hi * 8;
					if (xx < nx) {
#pragma unroll
						for (int nb = 0; nb < 2; ++nb) { // co and co + 8
							const float v0 = fmaxf(d[S * 8 + nb * 4 + hi * 2] + bias[nb * 2], 0.f);
							const float v1 = fmaxf(d[S * 8 + nb * 4 + hi * 2 + 1] + bias[nb * 2 + 1], 0.f);
							*reinterpret_cast<__half2*>(row + (size_t)xx * C + nb * 8 + co) = __floats2half2_rn(v0, v1);
						}
					}
				}
			}
#pragma unroll
			for (int i = 0; i < 8; ++i) d[S * 8 + i] = 0.f;
		}
	}

	// Output planes of one block: parity p (D = 2) or all (D = 1), indices j in [j0, j1) of
	// that parity's planes z = p + D*j.
	static __device__ void run(const __half* __restrict__ e, const uint8_t* __restrict__ wsm, const float* __restrict__ b,
	                           __half* __restrict__ out, int nx, int ny, int nz) {
#ifdef VOXPIPE_EMU
		uint8_t* const smem = emu_dynamic_shared();
#else
		extern __shared__ __align__(128) uint8_t smem[];
#endif
		const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(smem);
		const uint32_t wbase = sbase, planes = sbase + W_BYTES;
		const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
		const int x0 = blockIdx.x * TX, y0 = blockIdx.y * R;
		const int p = blockIdx.z % D, chunk = blockIdx.z / D;
		const int np = (nz - p + D - 1) / D; // planes of this parity
		const int j0 = chunk * WG_CHUNK, j1 = min(np, j0 + WG_CHUNK);
		if (j0 >= j1) return;

		for (int i = threadIdx.x; i < W_BYTES / 16; i += THREADS)
			cp_async16(wbase + i * 16, wsm + i * 16, true);
		float bias[4];
		{
			const int co = (lane & 3) * 2;
			bias[0] = b[co], bias[1] = b[co + 1], bias[2] = b[co + 8], bias[3] = b[co + 9];
		}
		float acc[R][24];
#pragma unroll
		for (int r = 0; r < R; ++r)
#pragma unroll
			for (int i = 0; i < 24; ++i) acc[r][i] = 0.f;
		uint32_t a[2][3][4];

		// Input step t reads plane p + D*(j0 - 1 + t) and feeds outputs j0 + t - 2 .. j0 + t;
		// after it, output j0 + t - 2 is complete. Output j0 + k lives in slot k % 3.
		const int steps = (j1 - j0) + 2;
		load_plane(planes, e, p + D * (j0 - 1), x0, y0, nx, ny, nz);
		for (int t0 = 0; t0 < steps; t0 += 3) {
#define WG_STEP(U)                                                                                                  \
	{                                                                                                           \
		const int t = t0 + U;                                                                                   \
		if (t < steps) {                                                                                        \
			cp_async_wait_all();                                                                                \
			WG_FENCE_PROXY_ASYNC();                                                                             \
			__syncthreads();                                                                                    \
			if (t + 1 < steps)                                                                                  \
				load_plane(planes + ((t + 1) & 1) * PLANE_BYTES, e, p + D * (j0 + t), x0, y0, nx, ny, nz);     \
			step<U>(acc, a, planes + (t & 1) * PLANE_BYTES, wbase, warp, lane);                                 \
			/* output j0 + t - 2 is complete; before the chunk (t < 2) it is only cleared */                   \
			wgmma_wait<0>();                                                                                    \
			for (int r_ = 0; r_ < R; ++r_) fence_acc(acc[r_]);                                                  \
			const int j = j0 + t - 2;                                                                           \
			epilogue<(U + 1) % 3>(acc, bias, out, p + D * j, t >= 2 && j < j1, x0, y0, nx, ny, warp, lane);    \
		}                                                                                                       \
	}
			WG_STEP(0) WG_STEP(1) WG_STEP(2)
#undef WG_STEP
		}
		wgmma_wait<0>();
	}
};

// Descriptor offsets of w_offset's layout (the launch names them so that an experiment can
// swap them).
constexpr int LBO = 128, SBO = 256;

} // namespace wg

extern "C" __global__ void __launch_bounds__(wg::THREADS, WG_MINB) conv_wgmma_d1(const __half* __restrict__ e, const uint8_t* __restrict__ wsm,
                                                                       const float* __restrict__ b, __half* __restrict__ out,
                                                                       int nx, int ny, int nz) {
	wg::Conv<1, wg::LBO, wg::SBO>::run(e, wsm, b, out, nx, ny, nz);
}
extern "C" __global__ void __launch_bounds__(wg::THREADS, WG_MINB) conv_wgmma_d2(const __half* __restrict__ e, const uint8_t* __restrict__ wsm,
                                                                       const float* __restrict__ b, __half* __restrict__ out,
                                                                       int nx, int ny, int nz) {
	wg::Conv<2, wg::LBO, wg::SBO>::run(e, wsm, b, out, nx, ny, nz);
}
