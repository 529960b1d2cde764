// The Hopper (sm_90a) operations of kernels/sm90a/conv_wgmma.cu for kernels/emu (included by
// emu.h): cp.async of 16 bytes with zero fill into dynamic shared memory, fence.proxy.async,
// ldmatrix.x4 from a shared-window address, and wgmma.mma_async m64nNk16 .f32.f16.f16 with A from
// registers and B from shared memory through a matrix descriptor (no swizzle, K-major B).
//
// Asynchrony, as far as it is modelled:
// - cp.async: a thread's copies are queued and land when its cp.async.wait_group retires their
//   group (the latest the hardware may), so shared memory read before the wait, or by other
//   threads without a barrier after it, is stale (0xFF bytes, fp16 NaN, at each block's start).
// - Proxies: cp.async writes are generic-proxy writes, wgmma reads B through the async proxy. A
//   16-byte granule written by thread T stays "unfenced" until T executes fence.proxy.async; a
//   wgmma reading an unfenced granule fails loudly. Ordinary C++ stores to shared memory are not
//   tracked (conv_wgmma makes none).
// - wgmma.mma_async: queued per thread and executed for the whole warpgroup when
//   wgmma.wait_group retires its group (all 128 threads arrive: a barrier): A registers, the
//   accumulators and B are read then, the latest moment the hardware may. So A registers
//   overwritten, or accumulators read or written, before the wait give wrong results here as they
//   may on the GPU; an ldmatrix into A registers that a pending wgmma reads, or a wgmma reading A
//   registers that an ldmatrix wrote after the thread's last wgmma.fence, fails loudly. Not
//   modelled: the earliest moment (the hardware may read operands right at issue: a kernel that
//   changes B in shared memory after the issue and expects the new values passes here), plain
//   register writes to accumulators without wgmma.fence (only ldmatrix writes are tracked), what
//   nvcc may reorder around the asm (fence_acc's purpose), and the tensor cores' summation order
//   (products are exact in float32 and summed in k order, as emu_mma_m16n8k16).
// Warpgroup uniformity is checked at every wait: the same wgmma sequence (shape, descriptor,
// groups) and wait count in all 128 threads.
#pragma once

struct EmuCpAsync {
	uint32_t dst;
	const void* src;
	int bytes; // 16 or 0 (zero fill)
	int group; // commit groups before it
};

struct EmuWgmmaOp {
	const uint32_t* a; // the thread's 4 A registers, read when the op executes
	float* d;          // its N/2 accumulators
	uint64_t desc;
	int n;
	int group;
};

struct EmuSm90Thread {
	std::vector<EmuCpAsync> cp;
	int cpGroups = 0; // cp.async.commit_group calls
	std::vector<EmuWgmmaOp> mma;
	int mmaGroups = 0; // wgmma.commit_group calls
	int waitN = 0;     // of the wgmma.wait_group the thread waits at
	std::vector<uint32_t> unfenced;    // granules it wrote by cp.async since its fence.proxy.async
	std::vector<const void*> aWritten; // A register arrays ldmatrix wrote since its wgmma.fence
};

struct EmuWarpgroup {
	EmuBarrier bar;
};

namespace emu::sm90 {
inline std::vector<EmuSm90Thread> threads;      // of the running block
inline std::vector<EmuWarpgroup> warpgroups;    // 128 threads each
inline std::vector<unsigned short> writer;      // per 16-byte granule of dynamic shared memory: unfenced writer + 1, or 0
inline unsigned long long executed;             // wgmma executed (per warpgroup), for the tests' reports

inline void blockStart(unsigned nthreads) {
	threads.assign(nthreads, EmuSm90Thread{});
	warpgroups.assign((nthreads + 127) / 128, EmuWarpgroup{});
	for (auto& g : warpgroups) g.bar.expected = 128;
	if (nthreads % 128) warpgroups.back().bar.expected = nthreads % 128;
	writer.assign((dynSmemBytes + 15) / 16, 0);
}

inline EmuSm90Thread& me() { return threads[cur->linear]; }

[[noreturn]] inline void fail(const char* msg) {
	std::fprintf(stderr, "emu: thread %u of block (%u,%u,%u): %s\n", cur->linear, blockIdx.x, blockIdx.y, blockIdx.z, msg);
	std::abort();
}
} // namespace emu::sm90

// ---- cp.async ----

// emu_cp_async16: cp.async.cg.shared.global [dst], [src], 16, srcBytes (16: copy, 0: zero fill).
inline void emu_cp_async16(uint32_t dst, const void* src, int srcBytes) {
	if (dst % 16) emu::sm90::fail("cp.async: shared address not 16-byte aligned");
	if (srcBytes != 0 && srcBytes != 16) emu::sm90::fail("cp.async: src-size other than 0 or 16 is not emulated");
	if (srcBytes && reinterpret_cast<uintptr_t>(src) % 16) emu::sm90::fail("cp.async: global address not 16-byte aligned");
	emu_shared(dst, 16, "cp.async"); // bounds, now rather than at the wait
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
	emu_ldmatrix_x4(r, emu_shared(addr, 16, "ldmatrix"), false);
	if (std::find(t.aWritten.begin(), t.aWritten.end(), (const void*)r) == t.aWritten.end()) t.aWritten.push_back(r);
}

// ---- wgmma ----

inline void emu_wgmma_fence() { emu::sm90::me().aWritten.clear(); }
inline void emu_wgmma_commit() { ++emu::sm90::me().mmaGroups; }

// emu_wgmma_rs: wgmma.mma_async.sync.aligned.m64n<n>k16.f32.f16.f16 d, a, bdesc, scale-d = 1
// (accumulate), imm-scale-a = imm-scale-b = 1, tnspB = 0; d: the thread's n/2 accumulators.
// Queued until wgmma.wait_group retires its group (see the header).
inline void emu_wgmma_rs(float* d, int n, const uint32_t (&a)[4], uint64_t bdesc) {
	if (n % 16 || n < 16 || n > 256) emu::sm90::fail("wgmma: N must be a multiple of 16 in 16..256 for f16 (8 is legal but not emulated)");
	auto& t = emu::sm90::me();
	if (std::find(t.aWritten.begin(), t.aWritten.end(), (const void*)a) != t.aWritten.end())
		emu::sm90::fail("wgmma reads A registers that ldmatrix wrote after the last wgmma.fence");
	t.mma.push_back({a, d, bdesc, n, t.mmaGroups});
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

// execute runs op i of every thread of warpgroup g: D (64 x n) += A (64 x 16) * B (16 x n).
// A: warp w's 16 rows 16w.. in mma.sync m16n8k16's A layout (row m, col k in lane 4(m%8)+(k%8)/2,
// register (m/8)+2(k/8), half k%2); D: thread (w, lane l) holds for column block j (8 columns)
// d[4j+e] = row 16w + l/4 + 8(e/2), column 8j + 2(l%4) + e%2.
inline void execute(unsigned g, size_t i) {
	EmuSm90Thread* T = &threads[128 * g];
	const EmuWgmmaOp& op0 = T[0].mma[i];
	static float A[64][16], B[16][256];
	decodeB(op0.desc, op0.n, B);
	for (int t = 0; t < 128; ++t) {
		const int w = t / 32, l = t % 32;
		const uint32_t* a = T[t].mma[i].a;
		for (int j = 0; j < 4; ++j)
			for (int h = 0; h < 2; ++h)
				A[16 * w + l / 4 + 8 * (j % 2)][2 * (l % 4) + h + 8 * (j / 2)] = emu_half_float((unsigned short)(a[j] >> (16 * h)));
	}
	for (int t = 0; t < 128; ++t) {
		const int w = t / 32, l = t % 32;
		float* d = T[t].mma[i].d;
		for (int j = 0; j < op0.n / 8; ++j)
			for (int e = 0; e < 4; ++e) {
				const int m = 16 * w + l / 4 + 8 * (e / 2), c = 8 * j + 2 * (l % 4) + e % 2;
				float acc = d[4 * j + e];
				for (int k = 0; k < 16; ++k) acc += A[m][k] * B[k][c]; // products exact in float32
				d[4 * j + e] = acc;
			}
	}
	++executed;
}

// retire runs, at a wgmma.wait_group all 128 threads of warpgroup g reached, every queued op of
// the groups the wait retires, after checking that the threads agree.
inline void retire(unsigned g) {
	if (warpgroups[g].bar.expected != 128) fail("wgmma: the block's last warpgroup has fewer than 128 threads");
	EmuSm90Thread* T = &threads[128 * g];
	for (int t = 1; t < 128; ++t) {
		bool same = T[t].waitN == T[0].waitN && T[t].mmaGroups == T[0].mmaGroups && T[t].mma.size() == T[0].mma.size();
		for (size_t i = 0; same && i < T[0].mma.size(); ++i)
			same = T[t].mma[i].desc == T[0].mma[i].desc && T[t].mma[i].n == T[0].mma[i].n && T[t].mma[i].group == T[0].mma[i].group;
		if (!same) {
			std::fprintf(stderr, "emu: warpgroup %u: threads %u and %d differ in their wgmma sequence (descriptor, shape or groups) or wait_group count\n", g, 128 * g,
			             int(128 * g) + t);
			std::abort();
		}
	}
	const int upto = T[0].mmaGroups - T[0].waitN;
	size_t i = 0;
	for (; i < T[0].mma.size() && T[0].mma[i].group < upto; ++i) execute(g, i);
	for (int t = 0; t < 128; ++t) T[t].mma.erase(T[t].mma.begin(), T[t].mma.begin() + i);
}
} // namespace emu::sm90

// emu_wgmma_wait: wgmma.wait_group.sync.aligned n: a warpgroup barrier; the ops of all but the
// newest n committed groups execute and their accumulators are final.
inline void emu_wgmma_wait(int n) {
	emu::sm90::me().waitN = n;
	const unsigned g = emu::cur->linear / 128;
	emu::wait(emu::sm90::warpgroups[g].bar, [g] { emu::sm90::retire(g); });
}
