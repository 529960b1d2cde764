// Host emulation of the little of CUDA C that voxpipe's kernels use, so their indexing can be
// checked on a machine without a GPU. Every CUDA thread of a block is a fiber (its own stack, a
// hand-written x86-64 context switch) on one OS thread, scheduled round-robin; a fiber runs until
// it waits at a barrier: __syncthreads (all threads of the block) or a warp-level operation
// (ldmatrix, mma.sync, shuffles: the 32 lanes of the warp exchange their operands). The kernels'
// static ("__shared__") arrays are shared by the block's fibers, and so is the dynamic shared
// memory of emu_launch_dyn (addressed through a shared window, __cvta_generic_to_shared, and
// poisoned with 0xFF bytes, fp16 NaN, before every block); blocks run one after another.
// Arithmetic is float32 with fmaf, as on the GPU (build with -ffp-contract=off); fp16 is
// _Float16 (round to nearest even); mma products are exact in float32 and summed in k order, the
// tensor cores' own summation order is not modelled (differences of float32 rounding only).
// emu_sm90.h extends it with the Hopper operations (cp.async, wgmma) through
// emu::onBlockStart; this header includes no extension.
// Used only by emu_test.cpp and lab/wgmma/emu/emu_wgmma_test.cpp (scripts/kernels-emu.sh); not part of any build.
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
#include <deque>
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

// wait blocks until b.expected fibers have arrived; the last to arrive runs last() first, while
// all the others still wait (a warpgroup operation computes there for every thread).
template <class F> inline void wait(EmuBarrier& b, F&& last) {
	++progress;
	const unsigned g = b.gen;
	if (++b.count == b.expected) {
		last();
		b.count = 0;
		++b.gen;
		return;
	}
	while (b.gen == g) yield();
}
inline void wait(EmuBarrier& b) {
	wait(b, [] {});
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

// ---- dynamic shared memory ----

namespace emu {
// The shared window's address of the dynamic shared memory: arbitrary and nonzero, so that a kernel
// relying on it being 0 fails; 1024-aligned, as are the host bytes behind it, so that alignments
// seen through either agree.
constexpr uint32_t sharedBase = 0x400;
constexpr size_t maxDynamicShared = 227 << 10; // sm_90's largest per-block opt-in
alignas(1024) inline unsigned char dynSmem[maxDynamicShared];
inline size_t dynSmemBytes; // of the running launch
// onBlockStart, when set, runs before each block's threads start, with the block's thread count:
// an extension's per-block state (emu_sm90.h sets it).
inline void (*onBlockStart)(unsigned nthreads) = nullptr;
} // namespace emu

// emu_dynamic_shared stands for a kernel's `extern __shared__ T smem[]`.
inline unsigned char* emu_dynamic_shared() { return emu::dynSmem; }

inline size_t __cvta_generic_to_shared(const void* p) {
	const unsigned char* c = static_cast<const unsigned char*>(p);
	if (c < emu::dynSmem || c > emu::dynSmem + emu::dynSmemBytes) {
		std::fprintf(stderr, "emu: __cvta_generic_to_shared(%p): not in the %zu bytes of dynamic shared memory (static __shared__ arrays have no shared address here)\n", p, emu::dynSmemBytes);
		std::abort();
	}
	return emu::sharedBase + size_t(c - emu::dynSmem);
}

// emu_shared returns the host bytes of shared-window address addr .. addr+n-1, failing loudly
// outside the launch's dynamic shared memory; what names the operation for the message.
inline unsigned char* emu_shared(uint32_t addr, size_t n, const char* what) {
	if (addr < emu::sharedBase || addr - emu::sharedBase + n > emu::dynSmemBytes) {
		std::fprintf(stderr, "emu: %s: shared address 0x%x (+%zu bytes) outside the dynamic shared memory [0x%x, 0x%zx)\n", what, addr, n,
		             emu::sharedBase, emu::sharedBase + emu::dynSmemBytes);
		std::abort();
	}
	return emu::dynSmem + (addr - emu::sharedBase);
}

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

// cuda_fp16.h's storage types and the conversions the kernels and tests use (no arithmetic).
struct alignas(2) __half {
	unsigned short x;
};
struct alignas(4) __half2 {
	__half x, y; // x: the low 16 bits
};
inline __half __float2half_rn(float v) { return {emu_half_bits(v)}; }
inline float __half2float(__half h) { return emu_half_float(h.x); }
inline __half2 __floats2half2_rn(float lo, float hi) { return {{emu_half_bits(lo)}, {emu_half_bits(hi)}}; }

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
inline unsigned long long emu_shfl_xor_u64(unsigned long long v, int m) {
	const unsigned lo = emu_shfl_xor_bits(unsigned(v), m), hi = emu_shfl_xor_bits(unsigned(v >> 32), m);
	return (unsigned long long)hi << 32 | lo;
}
// __ballot_sync over a full warp: bit l set when lane l's predicate holds.
inline unsigned emu_ballot(bool p) {
	EmuWarp& w = emu::warp();
	w.u[emu::lane()] = p;
	emu::warpSync();
	unsigned r = 0;
	for (int l = 0; l < 32; ++l) r |= (w.u[l] ? 1u : 0u) << l;
	emu::warpSync();
	return r;
}
// Atomics: every fiber runs on one OS thread and switches only at barriers, so a plain add is
// atomic.
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
	const unsigned long long old = *p;
	*p = old + v;
	return old;
}
inline unsigned __float2uint_rz(float v) { return (unsigned)v; }
inline int __popc(unsigned v) { return __builtin_popcount(v); }

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __constant__
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))

// emu_launch_dyn runs kernel(args...) over grid x block with smemBytes of dynamic shared memory
// (emu_dynamic_shared), one block at a time, every thread a fiber.
template <class F, class... A> void emu_launch_dyn(F kernel, dim3 grid, dim3 block, size_t smemBytes, A... args) {
	gridDim = grid;
	blockDim = block;
	const unsigned nthreads = block.x * block.y * block.z;
	if (smemBytes > emu::maxDynamicShared) {
		std::fprintf(stderr, "emu: %zu bytes of dynamic shared memory requested, at most %zu\n", smemBytes, emu::maxDynamicShared);
		std::abort();
	}
	emu::dynSmemBytes = smemBytes;
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
				std::memset(emu::dynSmem, 0xFF, smemBytes); // what an earlier block left: fp16 NaN
				if (emu::onBlockStart) emu::onBlockStart(nthreads);
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

// emu_launch runs kernel(args...) over grid x block without dynamic shared memory.
template <class F, class... A> void emu_launch(F kernel, dim3 grid, dim3 block, A... args) {
	emu_launch_dyn(kernel, grid, block, 0, args...);
}
