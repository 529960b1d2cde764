// The fused kernel's convolutions on Hopper's warpgroup tensor-core instruction (part of fused.cu,
// VF_WGMMA builds only: sm_90a, and the host emulator with -DVF_WGMMA=1):
//
//   D[64 voxels][N] += A[64 voxels][16 ci] * B[16 ci][N]    wgmma m64nNk16, per tap
//
// The same sums as vf_conv_plane's mma.sync (m16n8k16, fp16 operands, fp32 accumulation), issued
// per warpgroup instead of per warp. The four warps of a warpgroup are conv warps of one kind
// (VF_CW is a multiple of 4, and the conv2 warps come first), and each supplies its own 16 rows
// of M from registers: A fragments have mma.sync's layout, so each warp loads its tile row's
// voxels with the same ldmatrix as before, and M = 64 is four tile rows, not 64 contiguous voxels.
// B (the weights) is read by the tensor cores from shared memory through a matrix descriptor.
//
// A wgmma's accumulators must be one contiguous block of registers: ptxas copies scattered ones
// in and out and waits for the wgmma in between. So each wgmma writes one ring slot whole:
// N = 16, one (tap, dz) into the slot that tap feeds (both convs); or, for conv2 (VF_WG_N2 = 48),
// N = 48 into its three slots at once, in slot order, with the weights' column blocks rotated by
// the ring's phase (three B images) so that column block c holds the dz that feeds slot c. The
// dilated conv's three slots of a step are not adjacent in its ring of five: it runs at N = 16,
// or at N = 48 with its planes in two parity rings of three (VF_WG_GPAR, more registers).
// VF_WG_CONV2 and VF_WG_CONVG choose which convs run here (the other stays on mma.sync).
//
// Measured on the H100 (docs/perf.md, notes/perf-journal.md), this build is slower than the
// mma.sync kernel: ptxas serialises the wgmma (C7511, too few registers for the wgmma pipeline,
// with 16 rows and with 8), so it is not what the engine loads by default.
#pragma once

#if VF_WGMMA

// vf_wg_woff: byte offset of weight (n, ci) in a B operand: wgmma's K-major layout without
// swizzle, 8x8 core matrices of 16-byte rows (one row per column n, 8 ci), LBO = 128 bytes
// between the two K halves, SBO = 256 between 8-column groups (lab/wgmma's layout).
__host__ __device__ constexpr int vf_wg_woff(int n, int ci) {
	return (n & 7) * 16 + (n >> 3) * 256 + (ci >> 3) * 128 + (ci & 7) * 2;
}
#define VF_WG_LBO 128
#define VF_WG_SBO 256

// vf_wg_imgoff: where weight (tap t = (dz*3+dy)*3+dx, co, ci) goes in a conv's B images: N = 48,
// phase PH's image, column block (2 - dz + PH) % 3 (the ring slot it feeds); N = 16, tap t's.
template <int N> __host__ __device__ constexpr int vf_wg_imgoff(int PH, int t, int co, int ci) {
	return N == 48 ? (PH * 9 + t % 9) * VF_WG_B48 + vf_wg_woff(16 * ((2 - t / 9 + PH) % 3) + co, ci)
	               : t * VF_WG_B16 + vf_wg_woff(co, ci);
}

// vf_wg_desc: the matrix descriptor of a B operand at shared address addr (16-byte aligned).
__device__ __forceinline__ unsigned long long vf_wg_desc(unsigned addr) {
	return (unsigned long long)((addr >> 4) & 0x3FFF) | ((unsigned long long)(VF_WG_LBO >> 4) << 16) |
	       ((unsigned long long)(VF_WG_SBO >> 4) << 32);
}

__device__ __forceinline__ unsigned vf_smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

#if defined(VOXPIPE_EMU)
__device__ __forceinline__ void vf_wg_fence() { emu_wgmma_fence(); }
__device__ __forceinline__ void vf_wg_commit() { emu_wgmma_commit(); }
template <int N> __device__ __forceinline__ void vf_wg_wait() { emu_wgmma_wait(N); }
__device__ __forceinline__ void vf_fence_proxy_async() { emu_fence_proxy_async(); }
// ldmatrix into A registers of a wgmma: the emulator tracks them (overwritten in flight, or
// read without a wgmma.fence since, fail loudly).
__device__ __forceinline__ void vf_wg_ldsm4(unsigned (&r)[4], const void* p) { emu_ldmatrix_x4_shared(r, vf_smem_addr(p)); }
__device__ __forceinline__ void vf_wg_mma16(float (&d)[2][4], const unsigned (&a)[4], unsigned long long desc) {
	emu_wgmma_rs(&d[0][0], 16, a, (uint64_t)desc);
}
__device__ __forceinline__ void vf_wg_mma48(float (&d)[3][2][4], const unsigned (&a)[4], unsigned long long desc) {
	emu_wgmma_rs(&d[0][0][0], 48, a, (uint64_t)desc);
}
template <int NP> __device__ __forceinline__ void vf_wg_acc_fence(float (&)[2][NP][2][4]) {}
#else
__device__ __forceinline__ void vf_wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void vf_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void vf_wg_wait() {
	asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// The weights are written by ordinary stores (generic proxy) and read by wgmma (async proxy).
__device__ __forceinline__ void vf_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void vf_wg_ldsm4(unsigned (&r)[4], const void* p) { vf_ldsm4<false>(r, p); }
__device__ __forceinline__ void vf_wg_mma16(float (&d)[2][4], const unsigned (&a)[4], unsigned long long desc) {
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
	             "{%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, 1, 0;\n}\n"
	             : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
	               "+f"(d[1][2]), "+f"(d[1][3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}
__device__ __forceinline__ void vf_wg_mma48(float (&d)[3][2][4], const unsigned (&a)[4], unsigned long long desc) {
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n48k16.f32.f16.f16 "
	             "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23}, "
	             "{%24,%25,%26,%27}, %28, p, 1, 1, 0;\n}\n"
	             : "+f"(d[0][0][0]), "+f"(d[0][0][1]), "+f"(d[0][0][2]), "+f"(d[0][0][3]), "+f"(d[0][1][0]),
	               "+f"(d[0][1][1]), "+f"(d[0][1][2]), "+f"(d[0][1][3]), "+f"(d[1][0][0]), "+f"(d[1][0][1]),
	               "+f"(d[1][0][2]), "+f"(d[1][0][3]), "+f"(d[1][1][0]), "+f"(d[1][1][1]), "+f"(d[1][1][2]),
	               "+f"(d[1][1][3]), "+f"(d[2][0][0]), "+f"(d[2][0][1]), "+f"(d[2][0][2]), "+f"(d[2][0][3]),
	               "+f"(d[2][1][0]), "+f"(d[2][1][1]), "+f"(d[2][1][2]), "+f"(d[2][1][3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}
// Keeps the compiler from moving reads and writes of the accumulators across the wait.
template <int NP> __device__ __forceinline__ void vf_wg_acc_fence(float (&acc)[2][NP][2][4]) {
#pragma unroll
	for (int rr = 0; rr < 2; ++rr)
#pragma unroll
		for (int k = 0; k < NP; ++k)
#pragma unroll
			for (int nh = 0; nh < 2; ++nh)
#pragma unroll
				for (int i = 0; i < 4; ++i) asm volatile("" : "+f"(acc[rr][k][nh][i])::"memory");
}
#endif

// vf_wg_conv_plane: vf_conv_plane on wgmma, N = 16 or (conv2) 48: per tap, the A fragments of
// both rows (ldmatrix into two buffers in turn: a buffer is refilled once the wgmma of two taps
// back retired), then the tap's wgmma; all retired before the accumulators are read. wimg: the
// shared address of the conv's B images.
// RD: the output planes between two that a plane feeds, in the ring's own numbering (D, or 1
// for a parity ring).
template <int D, int NP, int PH, int N, int RD = D>
__device__ __forceinline__ void vf_wg_conv_plane(const unsigned* __restrict__ eb, unsigned wimg, float (&acc)[2][NP][2][4],
                                                 const int (&off)[3]) {
	static_assert(N == 16 || (N == 48 && NP == 3 && RD == 1), "fused kernel (wgmma): N = 48 needs a step's slots adjacent");
	unsigned a[2][2][4]; // [buffer][row]
#pragma unroll
	for (int tap = 0; tap < 9; ++tap) {
		const int dy = tap / 3, dx = tap % 3;
		unsigned(&ab)[2][4] = a[tap & 1];
		if (tap >= 2) vf_wg_wait<1>();
		const unsigned* pa = eb + off[dx] + D * (dy - 1) * VF_EW * 8;
		vf_wg_ldsm4(ab[0], pa);
		vf_wg_ldsm4(ab[1], pa + VF_EW * 8);
		vf_wg_fence();
		if constexpr (N == 48) {
			const unsigned long long desc = vf_wg_desc(wimg + (PH * 9 + tap) * VF_WG_B48);
			vf_wg_mma48(acc[0], ab[0], desc);
			vf_wg_mma48(acc[1], ab[1], desc);
		} else {
#pragma unroll
			for (int dz = 0; dz < 3; ++dz) {
				// e plane p adds to output plane p + 1 - dz (times D): the (NP-1-D*dz)-th oldest.
				const int k = (NP - 1 - RD * dz + PH) % NP;
				const unsigned long long desc = vf_wg_desc(wimg + (dz * 9 + tap) * VF_WG_B16);
				vf_wg_mma16(acc[0][k], ab[0], desc);
				vf_wg_mma16(acc[1][k], ab[1], desc);
			}
		}
		vf_wg_commit();
	}
	vf_wg_wait<0>();
	vf_wg_acc_fence<NP>(acc);
}
#endif
