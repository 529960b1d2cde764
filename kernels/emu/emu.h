// Host emulation of the little of CUDA C that voxpipe's kernels use, so their indexing can be
// checked on a machine without a GPU: each block runs as VP_THREADS std::threads sharing the
// kernel's static ("__shared__") arrays, __syncthreads is a std::barrier. Blocks run one after
// another. Arithmetic is float32 with fmaf, as on the GPU (build with -ffp-contract=off).
// Used only by emu_test.cpp (scripts/kernels-emu.sh); not part of any build.
#pragma once
#include <barrier>
#include <cmath>
#include <cstddef>
#include <thread>
#include <vector>

struct dim3 {
	unsigned x, y, z;
	dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3e {
	unsigned x, y, z;
};
struct alignas(16) float4 {
	float x, y, z, w;
};

inline thread_local uint3e threadIdx;
inline uint3e blockIdx;
inline dim3 blockDim, gridDim;
inline std::barrier<>* emu_barrier;

inline void __syncthreads() { emu_barrier->arrive_and_wait(); }
template <class T> inline T __ldg(const T* p) { return *p; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __constant__
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))

// emu_launch runs kernel(args...) over grid x block, one block at a time.
template <class F, class... A> void emu_launch(F kernel, dim3 grid, dim3 block, A... args) {
	gridDim = grid;
	blockDim = block;
	const unsigned nthreads = block.x * block.y * block.z;
	for (unsigned bz = 0; bz < grid.z; ++bz)
		for (unsigned by = 0; by < grid.y; ++by)
			for (unsigned bx = 0; bx < grid.x; ++bx) {
				blockIdx = {bx, by, bz};
				std::barrier<> bar(nthreads);
				emu_barrier = &bar;
				std::vector<std::thread> threads;
				threads.reserve(nthreads);
				for (unsigned t = 0; t < nthreads; ++t) {
					threads.emplace_back([&, t] {
						threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
						kernel(args...);
					});
				}
				for (auto& th : threads) th.join();
			}
}
