// The Hopper (sm_90a) operations of the fused kernel's wgmma build (fused_wgmma.cuh, VF_WGMMA)
// and of lab/wgmma/conv_wgmma.cu for the kernel emulator (emu.h, which this header includes and
// extends through emu::onBlockStart): cp.async of 16 bytes with zero fill into dynamic shared memory, fence.proxy.async,
// ldmatrix.x4 from a shared-window address, and wgmma.mma_async m64nNk16 .f32.f16.f16 with A from
// registers and B from shared memory through a matrix descriptor (no swizzle, K-major B).
//
// Asynchrony, as far as it is modelled:
// - cp.async: a thread's copies are queued and land when its cp.async.wait_group retires their
//   group (the latest the hardware may); an ldmatrix or wgmma reading a 16-byte granule with a
//   copy in flight (issued, not yet landed: a missing wait or barrier) fails loudly, and so does a
//   second copy to a granule in flight. Shared memory is 0xFF bytes (fp16 NaN) at each block's
//   start.
// - Proxies: cp.async writes are generic-proxy writes, wgmma reads B through the async proxy. A
//   16-byte granule written by thread T stays "unfenced" until T executes fence.proxy.async; a
//   wgmma reading an unfenced granule fails loudly. Ordinary C++ stores to shared memory are not
//   tracked (conv_wgmma makes none).
// - wgmma.mma_async: queued per thread; the warpgroup's k-th wgmma executes, for all 128 threads
//   at once, when a thread's wgmma.wait_group needs it and all 128 threads have issued it (the
//   hardware cannot run it sooner; until then the waiting thread waits). wait_group is no barrier
//   otherwise: warps that have issued what others need run on. A registers, accumulators and B
//   are read at execution, the latest moment the hardware may, so A registers overwritten, or
//   accumulators read or written, before the thread's own wait give wrong results here as they
//   may on the GPU; an ldmatrix into A registers of a wgmma the thread has not waited for, or a
//   wgmma reading A registers that an ldmatrix wrote after the thread's last wgmma.fence, fails
//   loudly. Not modelled: the earliest moment (the hardware may read B right at issue: a kernel
//   that rewrites B's shared memory while a wgmma reading it is in flight can pass here; conv_wgmma
//   writes its weights once, before any wgmma), plain register writes to accumulators without
//   wgmma.fence (only ldmatrix writes are tracked), what nvcc may reorder around the asm
//   (fence_acc's purpose), and the tensor cores' summation order (products are exact in float32
//   and summed in k order, as emu_mma_m16n8k16).
// Warpgroup uniformity is checked at every execution: the k-th wgmma of all 128 threads has the
// same shape, descriptor and commit group.
// Named barriers (bar.sync / bar.arrive with an id and a thread count, lab/wgmma/ws): bar.sync
// waits until the count of threads has arrived at the id, bar.arrive counts without waiting;
// setmaxnreg has nothing to emulate.
#pragma once
#include "emu.h"

struct EmuCpAsync {
	uint32_t dst;
	const void* src;
	int bytes; // 16 or 0 (zero fill)
	int group; // commit groups before it
};

struct EmuWgmmaOp {
	const uint32_t* a; // the thread's 4 A registers, read when the op executes
	float* d[32];      // its N/2 accumulators, 4 per 8-column block (anywhere: PTX names each register)
	uint64_t desc;
	int n;
	int group;
};

struct EmuSm90Thread {
	std::vector<EmuCpAsync> cp;
	int cpGroups = 0;           // cp.async.commit_group calls
	std::deque<EmuWgmmaOp> mma; // issued, not yet retired by the thread's wgmma.wait_group
	size_t mmaBase = 0;         // the warpgroup-wide index of mma.front()
	int mmaGroups = 0;          // wgmma.commit_group calls
	std::vector<uint32_t> unfenced;    // granules it wrote by cp.async since its fence.proxy.async
	std::vector<const void*> aWritten; // A register arrays ldmatrix wrote since its wgmma.fence
};

struct EmuWarpgroup {
	unsigned threads = 0;
	size_t executed = 0; // wgmma executed (all 128 threads' k-th, k < executed)
};

namespace emu::sm90 {
inline std::vector<EmuSm90Thread> threads;      // of the running block
inline std::vector<EmuWarpgroup> warpgroups;    // 128 threads each
// per 16-byte granule of dynamic shared memory, a thread index + 1 or 0:
inline std::vector<unsigned short> writer;   // wrote it by cp.async and has not run fence.proxy.async since
inline std::vector<unsigned short> inflight; // has a cp.async to it in flight
inline unsigned long long wgmmaExecuted; // wgmma executed (per warpgroup), for the tests' reports
inline EmuBarrier named[16];             // bar.sync / bar.arrive ids 0..15 of the running block

inline void blockStart(unsigned nthreads) {
	threads.assign(nthreads, EmuSm90Thread{});
	warpgroups.assign((nthreads + 127) / 128, EmuWarpgroup{});
	for (auto& g : warpgroups) g.threads = 128;
	if (nthreads % 128) warpgroups.back().threads = nthreads % 128;
	writer.assign((dynSmemBytes + 15) / 16, 0);
	inflight.assign((dynSmemBytes + 15) / 16, 0);
	for (auto& b : named) b = EmuBarrier{};
}
// Installed before main runs: every emulated launch then resets this state per block.
inline const bool blockStartInstalled = (onBlockStart = blockStart, true);

// checkLanded fails when shared address addr has a cp.async in flight; what names the reader.
inline void checkLanded(uint32_t addr, const char* what) {
	if (const unsigned w = inflight[(addr - sharedBase) / 16]) {
		std::fprintf(stderr, "emu: thread %u of block (%u,%u,%u): %s reads shared address 0x%x while thread %u's cp.async to it is in flight (no wait_group, or no barrier after it)\n",
		             cur->linear, blockIdx.x, blockIdx.y, blockIdx.z, what, addr, w - 1);
		std::abort();
	}
}

inline EmuSm90Thread& me() { return threads[cur->linear]; }

[[noreturn]] inline void fail(const char* msg) {
	std::fprintf(stderr, "emu: thread %u of block (%u,%u,%u): %s\n", cur->linear, blockIdx.x, blockIdx.y, blockIdx.z, msg);
	std::abort();
}
} // namespace emu::sm90

// ---- named barriers ----

namespace emu::sm90 {
// namedBarrier is barrier id's state, its expected count set to count (a whole number of warps,
// as the hardware requires, and the same at every arrival of a generation).
inline EmuBarrier& namedBarrier(int id, int count) {
	if (id < 1 || id > 15 || count <= 0 || count % 32) fail("bar.sync/bar.arrive: id outside 1..15 (0 is __syncthreads) or a count not a multiple of 32");
	EmuBarrier& b = named[id];
	if (b.count > 0 && b.expected != count) fail("bar.sync/bar.arrive: another thread count than the arrivals before it");
	b.expected = count;
	return b;
}
} // namespace emu::sm90

// emu_bar_sync: bar.sync id, count: waits until count threads have arrived (this one included).
inline void emu_bar_sync(int id, int count) { emu::wait(emu::sm90::namedBarrier(id, count)); }

// emu_bar_arrive: bar.arrive id, count: counts this thread's arrival and goes on, after letting
// the other fibers run (those its arrival released may act before anything this thread does
// next, as on the GPU: a copy it waits for only after arriving is then caught in flight).
inline void emu_bar_arrive(int id, int count) {
	EmuBarrier& b = emu::sm90::namedBarrier(id, count);
	++emu::progress;
	if (++b.count == b.expected) b.count = 0, ++b.gen;
	emu::yield();
}

// ---- cp.async ----

// emu_cp_async16: cp.async.cg.shared.global [dst], [src], 16, srcBytes (16: copy, 0: zero fill).
inline void emu_cp_async16(uint32_t dst, const void* src, int srcBytes) {
	if (dst % 16) emu::sm90::fail("cp.async: shared address not 16-byte aligned");
	if (srcBytes != 0 && srcBytes != 16) emu::sm90::fail("cp.async: src-size other than 0 or 16 is not emulated");
	if (srcBytes && reinterpret_cast<uintptr_t>(src) % 16) emu::sm90::fail("cp.async: global address not 16-byte aligned");
	emu_shared(dst, 16, "cp.async"); // bounds, now rather than at the wait
	unsigned short& f = emu::sm90::inflight[(dst - emu::sharedBase) / 16];
	if (f) emu::sm90::fail("cp.async to a shared granule that an earlier cp.async (not yet waited for) still copies to");
	f = (unsigned short)(emu::cur->linear + 1);
	auto& t = emu::sm90::me();
	t.cp.push_back({dst, src, srcBytes, t.cpGroups});
}

inline void emu_cp_async_commit() { ++emu::sm90::me().cpGroups; }

// emu_cp_async_wait_group: the thread's copies of all but its newest n committed groups land.
inline void emu_cp_async_wait_group(int n) {
	auto& t = emu::sm90::me();
	const int upto = t.cpGroups - n;
	size_t keep = 0;
	for (const EmuCpAsync& c : t.cp) {
		if (c.group >= upto) {
			t.cp[keep++] = c;
			continue;
		}
		unsigned char* p = emu_shared(c.dst, 16, "cp.async");
		if (c.bytes) std::memcpy(p, c.src, 16);
		else std::memset(p, 0, 16);
		const uint32_t g = (c.dst - emu::sharedBase) / 16;
		emu::sm90::writer[g] = (unsigned short)(emu::cur->linear + 1);
		emu::sm90::inflight[g] = 0;
		t.unfenced.push_back(g);
	}
	t.cp.resize(keep);
}

// emu_fence_proxy_async: fence.proxy.async.shared::cta; the thread's generic-proxy writes become
// visible to the async proxy (wgmma's B reads).
inline void emu_fence_proxy_async() {
	auto& t = emu::sm90::me();
	const unsigned short self = (unsigned short)(emu::cur->linear + 1);
	for (uint32_t g : t.unfenced)
		if (emu::sm90::writer[g] == self) emu::sm90::writer[g] = 0;
	t.unfenced.clear();
}

// ---- ldmatrix from a shared address ----

// emu_ldmatrix_x4_shared: ldmatrix.sync.aligned.m8n8.x4.shared.b16 (no .trans) at shared address
// addr; r are registers a later wgmma may read as its A fragment (tracked for wgmma.fence).
inline void emu_ldmatrix_x4_shared(unsigned (&r)[4], uint32_t addr) {
	auto& t = emu::sm90::me();
	for (const EmuWgmmaOp& op : t.mma)
		if (op.a == r) emu::sm90::fail("ldmatrix overwrites the A registers of a wgmma not yet retired by wgmma.wait_group");
	const unsigned char* p = emu_shared(addr, 16, "ldmatrix"); // bounds first: checkLanded indexes by it
	emu::sm90::checkLanded(addr, "ldmatrix");
	emu_ldmatrix_x4(r, p, false);
	if (std::find(t.aWritten.begin(), t.aWritten.end(), (const void*)r) == t.aWritten.end()) t.aWritten.push_back(r);
}

// ---- wgmma ----

inline void emu_wgmma_fence() { emu::sm90::me().aWritten.clear(); }
inline void emu_wgmma_commit() { ++emu::sm90::me().mmaGroups; }

// emu_wgmma_rs: wgmma.mma_async.sync.aligned.m64n<n>k16.f32.f16.f16 d, a, bdesc, scale-d = 1
// (accumulate), imm-scale-a = imm-scale-b = 1, tnspB = 0; d: the thread's n/2 accumulators.
// Queued until wgmma.wait_group retires its group (see the header).
namespace emu::sm90 {
// issue queues op (its a, desc and n set) after the checks every wgmma gets.
inline void issue(EmuWgmmaOp op) {
	if (op.n % 16 || op.n < 16 || op.n > 256) fail("wgmma: N must be a multiple of 16 in 16..256 for f16 (8 is legal but not emulated)");
	auto& t = me();
	if (std::find(t.aWritten.begin(), t.aWritten.end(), (const void*)op.a) != t.aWritten.end())
		fail("wgmma reads A registers that ldmatrix wrote after the last wgmma.fence");
	op.group = t.mmaGroups;
	t.mma.push_back(op);
}
} // namespace emu::sm90

inline void emu_wgmma_rs(float* d, int n, const uint32_t (&a)[4], uint64_t bdesc) {
	EmuWgmmaOp op{a, {}, bdesc, n, 0};
	for (int j = 0; j < std::min(n, 256) / 8; ++j) op.d[j] = d + 4 * j;
	emu::sm90::issue(op);
}

namespace emu::sm90 {
// The B operand (16 x n, K-major, no swizzle) through descriptor desc, as float: element (k, col)
// is the fp16 at start + (k/8)*LBO + (col/8)*SBO + (col%8)*16 + (k%8)*2, i.e. 8x8 core matrices
// of 16-byte rows (one row per column, 8 consecutive k), LBO apart along K, SBO apart along N.
inline void decodeB(uint64_t desc, int n, float (*B)[256]) {
	const uint32_t start = uint32_t(desc & 0x3FFF) << 4, lbo = uint32_t((desc >> 16) & 0x3FFF) << 4,
	               sbo = uint32_t((desc >> 32) & 0x3FFF) << 4;
	const unsigned baseOffset = unsigned(desc >> 49) & 7, swizzle = unsigned(desc >> 62) & 3;
	const uint64_t known = 0x3FFFull | 0x3FFFull << 16 | 0x3FFFull << 32 | 7ull << 49 | 3ull << 62;
	if (desc & ~known) fail("wgmma: descriptor has bits set outside its fields");
	if (swizzle != 0 || baseOffset != 0) fail("wgmma: only the no-swizzle layout with base offset 0 is emulated");
	for (int k = 0; k < 16; ++k)
		for (int c = 0; c < n; ++c) {
			const uint32_t addr = start + (k / 8) * lbo + (c / 8) * sbo + (c % 8) * 16 + (k % 8) * 2;
			const unsigned char* p = emu_shared(addr, 2, "wgmma B operand");
			checkLanded(addr, "wgmma");
			if (writer[(addr - sharedBase) / 16]) {
				std::fprintf(stderr, "emu: wgmma reads shared address 0x%x, written by cp.async of thread %u without a fence.proxy.async since\n", addr,
				             writer[(addr - sharedBase) / 16] - 1u);
				std::abort();
			}
			unsigned short h;
			std::memcpy(&h, p, 2);
			B[k][c] = emu_half_float(h);
		}
}

// execute runs the k-th wgmma of every thread of warpgroup g (all have issued it): D (64 x n) +=
// A (64 x 16) * B (16 x n). A: warp w's 16 rows 16w.. in mma.sync m16n8k16's A layout (row m,
// col k in lane 4(m%8)+(k%8)/2, register (m/8)+2(k/8), half k%2); D: thread (w, lane l) holds
// for column block j (8 columns) d[4j+e] = row 16w + l/4 + 8(e/2), column 8j + 2(l%4) + e%2.
inline void execute(unsigned g, size_t k) {
	EmuSm90Thread* T = &threads[128 * g];
	auto op = [&](int t) -> const EmuWgmmaOp& { return T[t].mma[k - T[t].mmaBase]; };
	const EmuWgmmaOp& op0 = op(0);
	for (int t = 1; t < 128; ++t)
		if (op(t).desc != op0.desc || op(t).n != op0.n || op(t).group != op0.group) {
			std::fprintf(stderr, "emu: warpgroup %u: wgmma %zu of threads %u and %d differ in descriptor, shape or commit group\n", g, k, 128 * g,
			             int(128 * g) + t);
			std::abort();
		}
	static float A[64][16], B[16][256];
	decodeB(op0.desc, op0.n, B);
	for (int t = 0; t < 128; ++t) {
		const int w = t / 32, l = t % 32;
		const uint32_t* a = op(t).a;
		for (int j = 0; j < 4; ++j)
			for (int h = 0; h < 2; ++h)
				A[16 * w + l / 4 + 8 * (j % 2)][2 * (l % 4) + h + 8 * (j / 2)] = emu_half_float((unsigned short)(a[j] >> (16 * h)));
	}
	for (int t = 0; t < 128; ++t) {
		const int w = t / 32, l = t % 32;
		for (int j = 0; j < op0.n / 8; ++j)
			for (int e = 0; e < 4; ++e) {
				float* d = op(t).d[j];
				const int m = 16 * w + l / 4 + 8 * (e / 2), c = 8 * j + 2 * (l % 4) + e % 2;
				float acc = d[e];
				for (int kk = 0; kk < 16; ++kk) acc += A[m][kk] * B[kk][c]; // products exact in float32
				d[e] = acc;
			}
	}
	++wgmmaExecuted;
}
} // namespace emu::sm90

// emu_wgmma_wait: wgmma.wait_group.sync.aligned n: returns when the thread's wgmma of all but its
// newest n committed groups have executed, executing each as soon as all 128 threads issued it.
inline void emu_wgmma_wait(int n) {
	using namespace emu::sm90;
	auto& t = me();
	EmuWarpgroup& wg = warpgroups[emu::cur->linear / 128];
	const unsigned g = emu::cur->linear / 128;
	if (wg.threads != 128) fail("wgmma: the block's last warpgroup has fewer than 128 threads");
	size_t mine = 0; // the thread's queued wgmma the wait retires: a prefix, groups are in order
	while (mine < t.mma.size() && t.mma[mine].group < t.mmaGroups - n) ++mine;
	const size_t need = t.mmaBase + mine;
	++emu::progress;
	while (wg.executed < need) {
		bool issued = true;
		for (int i = 0; i < 128 && issued; ++i) {
			const EmuSm90Thread& o = threads[128 * g + i];
			issued = o.mmaBase + o.mma.size() > wg.executed;
		}
		if (issued) {
			execute(g, wg.executed++);
			++emu::progress;
		} else {
			emu::yield(); // until the other warps issue it
		}
	}
	t.mma.erase(t.mma.begin(), t.mma.begin() + mine);
	t.mmaBase = need;
}
