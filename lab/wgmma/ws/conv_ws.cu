// conv_ws_d1 / conv_ws_d2: lab/wgmma/conv_wgmma.cu's convolutions (the same formula and the same
// per-row wgmma sequence) in a warp-specialised block, the first check
// of notes/fused-wgmma-plan.md: does ptxas keep the wgmma pipelined (no C7511, no wait after each
// HGMMA) when the consumer warpgroups share a kernel with a producer role, and what it costs.
//
//   out(z,y,x)[co] = relu(b[co] + sum_ci sum_{dz,dy,dx=-1..1} w[co][ci][dz+1][dy+1][dx+1] * e(z+D*dz, y+D*dy, x+D*dx)[ci])
//
// A block is three warpgroups (384 threads) over a 64 (x) by 2R (y) tile, streaming z:
// - warpgroup 0, the producer (setmaxnreg.dec to 40 registers): copies input planes (2R + 2D
//   rows with halo) into a ring of WS_NBUF shared buffers with cp.async, ahead of the consumers;
// - warpgroups 1 and 2, the consumers (setmaxnreg.inc to 232): rows 0..R-1 and R..2R-1 of the
//   tile, each exactly as a conv_wgmma block (Conv::step, Conv::epilogue), reading the shared
//   plane the producer filled.
// Hand-off per ring buffer through named barriers (bar.sync/bar.arrive, 384 threads): FULL(i)
// the producer arrives at once its copies landed, the consumers wait; EMPTY(i) the consumers
// arrive at once their ldmatrix have read the plane, the producer waits before refilling it.
// Built by lab/wgmma/bench (-DWG_WS=1) and the emulator test (lab/wgmma/emu, in CI); nothing in
// the product uses it. Figures: the journal, "The plan's first check".
#pragma once

// WS_PIN_ZEROS: an empty asm that reads and writes every accumulator after it is zeroed (before
// the loop and after each epilogue), so that ptxas cannot sink the zeroing moves into the next
// step's wgmma pipeline stage (C7515: "non wgmma instructions defining accumulator registers").
#ifndef WS_PIN_ZEROS
#define WS_PIN_ZEROS 1
#endif
#ifndef WS_NBUF
#define WS_NBUF 3 // plane buffers in the ring
#endif

namespace ws {

using wg::C;
using wg::R;
using wg::TX;
constexpr int THREADS = 384;

#ifdef VOXPIPE_EMU // kernels/emu: named barriers in emu_sm90.h; setmaxnreg has nothing to emulate
__device__ __forceinline__ void bar_sync(int id) { emu_bar_sync(id, THREADS); }
__device__ __forceinline__ void bar_arrive(int id) { emu_bar_arrive(id, THREADS); }
__device__ __forceinline__ int warp_uniform(int v) { return v; }
#define WS_SETMAXNREG(op, n)
#else
__device__ __forceinline__ void bar_sync(int id) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(THREADS) : "memory"); }
__device__ __forceinline__ void bar_arrive(int id) { asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(THREADS) : "memory"); }
__device__ __forceinline__ int warp_uniform(int v) { return __shfl_sync(0xffffffffu, v, 0); }
#define WS_SETMAXNREG(op, n) asm volatile("setmaxnreg." op ".sync.aligned.u32 " #n ";\n" ::: "memory")
#endif
constexpr int FULL = 1, EMPTY = 1 + WS_NBUF; // barrier ids FULL+i, EMPTY+i (0 is __syncthreads)
static_assert(EMPTY + WS_NBUF <= 16, "named barriers: 16 per block");

template <int D>
struct Block {
	using K = wg::Conv<D, wg::LBO, wg::SBO>;
	static constexpr int SX = K::SX;          // plane row length in voxels, with halo
	static constexpr int SY = 2 * R + 2 * D;  // plane rows, with halo, of both consumers' rows
	static constexpr int PLANE_BYTES = SY * SX * 32;
	static constexpr int SMEM_BYTES = wg::W_BYTES + WS_NBUF * PLANE_BYTES;

	// load_plane: the producer's 128 threads copy input plane z (zeros outside) into dst.
	static __device__ __forceinline__ void load_plane(uint32_t dst, const __half* __restrict__ e, int z, int x0, int y0,
	                                                  int nx, int ny, int nz, int tid) {
		const bool zin = z >= 0 && z < nz;
		for (int i = tid; i < SY * SX * 2; i += 128) {
			const int half = i & 1, v = (i >> 1) % SX, r = (i >> 1) / SX;
			const int x = x0 - D + v, y = y0 - D + r;
			const bool ok = zin && x >= 0 && x < nx && y >= 0 && y < ny;
			const __half* src = ok ? e + ((((size_t)z * ny + y) * nx + x) * C + half * 8) : e;
			wg::cp_async16(dst + r * SX * 32 + wg::vox_half_offset(v, half), src, ok);
		}
		wg::cp_async_commit();
	}

	static __device__ void run(const __half* __restrict__ e, const uint8_t* __restrict__ wsm, const float* __restrict__ b,
	                           __half* __restrict__ out, int nx, int ny, int nz) {
#ifdef VOXPIPE_EMU
		uint8_t* const smem = emu_dynamic_shared();
#else
		extern __shared__ __align__(128) uint8_t smem[];
#endif
		const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(smem);
		const uint32_t wbase = sbase, planes = sbase + wg::W_BYTES;
		// The role, through a shuffle so that ptxas knows it is warp-uniform.
		const int role = warp_uniform((int)(threadIdx.x >> 7));
		const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
		const int x0 = blockIdx.x * TX, y0 = blockIdx.y * 2 * R;
		const int p = blockIdx.z % D, chunk = blockIdx.z / D;
		const int np = (nz - p + D - 1) / D;
		const int j0 = chunk * WG_CHUNK, j1 = min(np, j0 + WG_CHUNK);
		if (j0 >= j1) return;
		const int steps = (j1 - j0) + 2;

		if (role == 0) {
			for (int i = threadIdx.x; i < wg::W_BYTES / 16; i += 128) wg::cp_async16(wbase + i * 16, wsm + i * 16, true);
			wg::cp_async_commit();
			wg::cp_async_wait_all();
			WG_FENCE_PROXY_ASYNC(); // the weights are read by wgmma (the async proxy)
		}
		__syncthreads();
		if (role == 0) {
			WS_SETMAXNREG("dec", 40);
			for (int t = 0; t < steps; ++t) {
				const int i = t % WS_NBUF;
				if (t >= WS_NBUF) bar_sync(EMPTY + i);
				load_plane(planes + i * PLANE_BYTES, e, p + D * (j0 - 1 + t), x0, y0, nx, ny, nz, threadIdx.x);
				wg::cp_async_wait_all();
				bar_arrive(FULL + i);
			}
			return;
		}
		WS_SETMAXNREG("inc", 232);
		const int c = role - 1; // this consumer's rows: c*R .. c*R + R-1 of the tile
		const int co = (lane & 3) * 2;
		const float bias[4] = {b[co], b[co + 1], b[co + 8], b[co + 9]};
		float acc[R][24] = {};
		if (WS_PIN_ZEROS)
			for (int r = 0; r < R; ++r) wg::fence_acc(acc[r]);
		uint32_t a[2][3][4];
		for (int t0 = 0; t0 < steps; t0 += 3) {
#define WS_STEP(U)                                                                                                      \
	{                                                                                                               \
		const int t = t0 + U;                                                                                       \
		if (t < steps) {                                                                                            \
			const int i = t % WS_NBUF;                                                                              \
			bar_sync(FULL + i);                                                                                     \
			K::template step<U>(acc, a, planes + i * PLANE_BYTES + c * R * SX * 32, wbase, warp, lane);             \
			bar_arrive(EMPTY + i); /* its ldmatrix are done: the wgmma read registers and the weights */            \
			wg::wgmma_wait<0>();                                                                                    \
			for (int r_ = 0; r_ < R; ++r_) wg::fence_acc(acc[r_]);                                                  \
			const int j = j0 + t - 2;                                                                               \
			K::template epilogue<(U + 1) % 3>(acc, bias, out, p + D * j, t >= 2 && j < j1, x0, y0 + c * R, nx, ny,   \
			                                  warp, lane);                                                          \
			if (WS_PIN_ZEROS)                                                                                       \
				for (int r_ = 0; r_ < R; ++r_) wg::fence_acc(acc[r_]);                                              \
		}                                                                                                           \
	}
			WS_STEP(0) WS_STEP(1) WS_STEP(2)
#undef WS_STEP
		}
		wg::wgmma_wait<0>();
		// The producer waits on EMPTY only while it has planes left to load; arrivals it no longer
		// waits for leave the barriers in a state no later block sees (barriers are per block).
	}
};

} // namespace ws

extern "C" __global__ void __launch_bounds__(ws::THREADS, 1) conv_ws_d1(const __half* __restrict__ e, const uint8_t* __restrict__ wsm,
                                                                       const float* __restrict__ b, __half* __restrict__ out,
                                                                       int nx, int ny, int nz) {
	ws::Block<1>::run(e, wsm, b, out, nx, ny, nz);
}
extern "C" __global__ void __launch_bounds__(ws::THREADS, 1) conv_ws_d2(const __half* __restrict__ e, const uint8_t* __restrict__ wsm,
                                                                       const float* __restrict__ b, __half* __restrict__ out,
                                                                       int nx, int ny, int nz) {
	ws::Block<2>::run(e, wsm, b, out, nx, ny, nz);
}
