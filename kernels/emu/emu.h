// Host emulation of the little of CUDA C that voxpipe's kernels use, so their indexing can be
// checked on a machine without a GPU. Every CUDA thread of a block is a fiber (its own stack, a
// hand-written x86-64 context switch) on one OS thread, scheduled round-robin; a fiber runs until
// it waits at a barrier: __syncthreads (all threads of the block) or a warp-level operation
// (ldmatrix, mma.sync, shuffles: the 32 lanes of the warp exchange their operands). The kernels'
// static ("__shared__") arrays are shared by the block's fibers; blocks run one after another.
// Arithmetic is float32 with fmaf, as on the GPU (build with -ffp-contract=off); fp16 is
// _Float16 (round to nearest even); mma products are exact in float32 and summed in k order, the
// tensor cores' own summation order is not modelled (differences of float32 rounding only).
// Used only by emu_test.cpp (scripts/kernels-emu.sh); not part of any build.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <functional>
#include <random>
#include <vector>

#if !defined(__x86_64__)
#error "kernels/emu: the fiber switch is written for x86-64"
#endif

#define VOXPIPE_EMU 1

struct dim3 {
	unsigned x, y, z;
	dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3e {
	unsigned x, y, z;
};
struct alignas(8) float2 {
	float x, y;
};
struct alignas(16) float4 {
	float x, y, z, w;
};
struct alignas(8) uint2 {
	unsigned x, y;
};

inline uint3e threadIdx; // the running fiber's, set at every switch
inline uint3e blockIdx;
inline dim3 blockDim, gridDim;

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }

// ---- fibers ----

// emu_switch saves the callee-saved registers, MXCSR and the x87 control word on the current
// stack, stores the stack pointer in *from and continues on stack `to` (saved the same way).
extern "C" void emu_switch(void** from, void* to);
asm(R"(
.text
.globl emu_switch
.type emu_switch,@function
emu_switch:
	pushq %rbp
	pushq %rbx
	pushq %r12
	pushq %r13
	pushq %r14
	pushq %r15
	subq $8, %rsp
	stmxcsr (%rsp)
	fnstcw 4(%rsp)
	movq %rsp, (%rdi)
	movq %rsi, %rsp
	ldmxcsr (%rsp)
	fldcw 4(%rsp)
	addq $8, %rsp
	popq %r15
	popq %r14
	popq %r13
	popq %r12
	popq %rbx
	popq %rbp
	ret
.size emu_switch, .-emu_switch
)");

struct EmuFiber {
	void* sp = nullptr;
	std::vector<char> stack;
	uint3e tid{};
	unsigned linear = 0;
	bool done = false;
};

struct EmuBarrier {
	int count = 0, expected = 0;
	unsigned gen = 0;
};

// One warp's exchange area for the warp-level operations.
struct EmuWarp {
	EmuBarrier bar;
	const void* ptr[32];
	float af[32][8], bf[32][4]; // mma operands, converted to float
	unsigned u[32];
};

namespace emu {
inline void* schedSP;
inline EmuFiber* cur;
inline std::function<void()> body;
inline EmuBarrier block;
inline std::vector<EmuWarp> warps;
inline unsigned long long progress; // barrier arrivals and fiber ends: a pass without any is a deadlock
constexpr size_t stackBytes = 256 << 10;

inline void yield() { emu_switch(&cur->sp, schedSP); }

inline void wait(EmuBarrier& b) {
	++progress;
	const unsigned g = b.gen;
	if (++b.count == b.expected) {
		b.count = 0;
		++b.gen;
		return;
	}
	while (b.gen == g) yield();
}

inline EmuWarp& warp() { return warps[cur->linear / 32]; }
inline unsigned lane() { return cur->linear % 32; }
inline void warpSync() { wait(warp().bar); }

inline void fiberEntry() {
	body();
	cur->done = true;
	++progress;
	emu_switch(&cur->sp, schedSP);
	std::abort(); // a finished fiber is never resumed
}

inline void start(EmuFiber& f) {
	if (f.stack.empty()) f.stack.resize(stackBytes);
	uintptr_t top = (reinterpret_cast<uintptr_t>(f.stack.data()) + f.stack.size()) & ~uintptr_t(15);
	uint64_t* s = reinterpret_cast<uint64_t*>(top - 72);
	// [0] MXCSR and x87 control word, [1..6] r15 r14 r13 r12 rbx rbp, [7] return address, [8]
	// fiberEntry's own (never used) return address.
	const uint32_t mxcsr = 0x1F80;
	const uint16_t fpcw = 0x037F;
	std::memset(s, 0, 72);
	std::memcpy(s, &mxcsr, 4);
	std::memcpy(reinterpret_cast<char*>(s) + 4, &fpcw, 2);
	s[7] = reinterpret_cast<uint64_t>(&fiberEntry);
	f.sp = s;
	f.done = false;
}
} // namespace emu

inline void __syncthreads() { emu::wait(emu::block); }
template <class T> inline T __ldg(const T* p) { return *p; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }

// ---- fp16 and the warp-level operations of kernels/fused.cu ----

inline unsigned short emu_half_bits(float v) {
	const _Float16 h = (_Float16)v;
	unsigned short b;
	std::memcpy(&b, &h, 2);
	return b;
}
inline float emu_half_float(unsigned short b) {
	_Float16 h;
	std::memcpy(&h, &b, 2);
	return (float)h;
}
inline unsigned emu_pack_half2(float lo, float hi) { return unsigned(emu_half_bits(lo)) | unsigned(emu_half_bits(hi)) << 16; }

inline void emu_ldmatrix_x4(unsigned (&r)[4], const void* p, bool trans) {
	if (reinterpret_cast<uintptr_t>(p) % 16) {
		std::fprintf(stderr, "emu: ldmatrix row address %p not 16-byte aligned\n", p);
		std::abort();
	}
	EmuWarp& w = emu::warp();
	const unsigned l = emu::lane();
	w.ptr[l] = p;
	emu::warpSync();
	for (int j = 0; j < 4; ++j) {
		unsigned short lo, hi;
		if (!trans) {
			const unsigned short* row = static_cast<const unsigned short*>(w.ptr[8 * j + l / 4]);
			lo = row[2 * (l % 4)], hi = row[2 * (l % 4) + 1];
		} else {
			lo = static_cast<const unsigned short*>(w.ptr[8 * j + 2 * (l % 4)])[l / 4];
			hi = static_cast<const unsigned short*>(w.ptr[8 * j + 2 * (l % 4) + 1])[l / 4];
		}
		r[j] = unsigned(lo) | unsigned(hi) << 16;
	}
	emu::warpSync();
}

// d += A*B for m16n8k16 with the PTX fragment layouts: A (row m, col k) is in lane 4(m%8)+(k%8)/2,
// register (m/8)+2(k/8), half k%2; B (k, n) in lane 4n+(k%8)/2, register k/8, half k%2; C/D (m, n)
// in lane 4(m%8)+n/2, element 2(m/8)+n%2.
inline void emu_mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
	EmuWarp& w = emu::warp();
	const unsigned l = emu::lane();
	for (int i = 0; i < 8; ++i) w.af[l][i] = emu_half_float((unsigned short)(a[i / 2] >> (16 * (i % 2))));
	const unsigned b[2] = {b0, b1};
	for (int i = 0; i < 4; ++i) w.bf[l][i] = emu_half_float((unsigned short)(b[i / 2] >> (16 * (i % 2))));
	emu::warpSync();
	auto A = [&](int m, int k) { return w.af[4 * (m % 8) + (k % 8) / 2][2 * ((m / 8) + 2 * (k / 8)) + k % 2]; };
	auto B = [&](int k, int n) { return w.bf[4 * n + (k % 8) / 2][2 * (k / 8) + k % 2]; };
	const int g = l / 4, q = l % 4;
	float out[4];
	for (int i = 0; i < 4; ++i) {
		const int m = g + 8 * (i / 2), n = 2 * q + i % 2;
		float acc = d[i];
		for (int k = 0; k < 16; ++k) acc += A(m, k) * B(k, n); // products exact in float32
		out[i] = acc;
	}
	emu::warpSync();
	std::memcpy(d, out, sizeof out);
}

inline unsigned emu_shfl_xor_bits(unsigned v, int m) {
	EmuWarp& w = emu::warp();
	const unsigned l = emu::lane();
	w.u[l] = v;
	emu::warpSync();
	const unsigned r = w.u[l ^ m];
	emu::warpSync();
	return r;
}
inline float emu_shfl_xor(float v, int m) {
	unsigned b;
	std::memcpy(&b, &v, 4);
	b = emu_shfl_xor_bits(b, m);
	std::memcpy(&v, &b, 4);
	return v;
}
inline int emu_shfl_xor(int v, int m) { return (int)emu_shfl_xor_bits((unsigned)v, m); }

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __constant__
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))

// emu_launch runs kernel(args...) over grid x block, one block at a time, every thread a fiber.
template <class F, class... A> void emu_launch(F kernel, dim3 grid, dim3 block, A... args) {
	gridDim = grid;
	blockDim = block;
	const unsigned nthreads = block.x * block.y * block.z;
	static std::vector<EmuFiber> fibers;
	if (fibers.size() < nthreads) fibers.resize(nthreads);
	emu::warps.assign((nthreads + 31) / 32, EmuWarp{});
	for (auto& w : emu::warps) w.bar.expected = 32;
	if (nthreads % 32) emu::warps.back().bar.expected = nthreads % 32;
	emu::body = [&] { kernel(args...); };
	for (unsigned bz = 0; bz < grid.z; ++bz)
		for (unsigned by = 0; by < grid.y; ++by)
			for (unsigned bx = 0; bx < grid.x; ++bx) {
				blockIdx = {bx, by, bz};
				emu::block = EmuBarrier{0, int(nthreads), 0};
				for (unsigned t = 0; t < nthreads; ++t) {
					EmuFiber& f = fibers[t];
					f.tid = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
					f.linear = t;
					emu::start(f);
				}
				// EMU_SCHED_SEED=n: every pass visits the fibers in a new random order (seeded),
				// so that the warps' work between barriers interleaves in many orders; unset: in
				// thread order.
				static const char* seedEnv = std::getenv("EMU_SCHED_SEED");
				static std::mt19937 rng(seedEnv ? unsigned(std::strtoul(seedEnv, nullptr, 10)) : 0u);
				std::vector<unsigned> order(nthreads);
				for (unsigned t = 0; t < nthreads; ++t) order[t] = t;
				for (unsigned live = nthreads; live > 0;) {
					const unsigned long long before = emu::progress;
					live = 0;
					if (seedEnv) std::shuffle(order.begin(), order.end(), rng);
					for (unsigned t : order) {
						EmuFiber& f = fibers[t];
						if (f.done) continue;
						emu::cur = &f;
						threadIdx = f.tid;
						emu_switch(&emu::schedSP, f.sp);
						live += !f.done;
					}
					if (live > 0 && emu::progress == before) {
						std::fprintf(stderr, "emu: deadlock in block (%u,%u,%u): %u threads wait at barriers nobody else reaches\n", bx, by, bz, live);
						std::abort();
					}
				}
			}
}
