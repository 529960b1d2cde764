// The fused kernel's convolutions on Hopper's warpgroup tensor-core instruction (part of fused.cu,
// VF_WGMMA builds only: sm_90a, and the host emulator with -DVF_WGMMA=1):
//
//   D[64 voxels][48 = (dz, co)] += A[64 voxels][16 ci] * B[16 ci][48]    wgmma m64n48k16, per tap (dy, dx)
//
// The same sums as vf_conv_plane's mma.sync (m16n8k16, fp16 operands, fp32 accumulation), issued
// per warpgroup instead of per warp. The four warps of a warpgroup are conv warps of one kind
// (VF_CW is a multiple of 4, and the conv2 warps come first), and each supplies its own 16 rows
// of M from registers: A fragments have mma.sync's layout, so each warp loads its tile row's
// voxels with the same ldmatrix as before, and M = 64 is four tile rows, not 64 contiguous voxels.
// B is the tap's weights for the three dz side by side (column block dz: the output plane that
// tap feeds), read by the tensor cores from shared memory through a matrix descriptor; its
// accumulators are the three ring slots of acc that the plane feeds, named register by register,
// so the ring and everything after the convs stay as they are.
#pragma once

#if VF_WGMMA
#define VF_WG_N 48                    // three dz taps of 16 output channels
#define VF_WG_TAP_BYTES (16 * VF_WG_N * 2) // one B operand: 16 ci x 48 fp16
static_assert(VF_CW % 4 == 0, "fused kernel (wgmma): each kind of conv warp must fill whole warpgroups");

// vf_wg_woff: byte offset of weight (n, ci) in a B operand: wgmma's K-major layout without
// swizzle, 8x8 core matrices of 16-byte rows (one row per column n, 8 ci), LBO = 128 bytes
// between the two K halves, SBO = 256 between 8-column groups (lab/wgmma's layout, measured there).
__host__ __device__ constexpr int vf_wg_woff(int n, int ci) {
	return (n & 7) * 16 + (n >> 3) * 256 + (ci >> 3) * 128 + (ci & 7) * 2;
}
#define VF_WG_LBO 128
#define VF_WG_SBO 256

// vf_wg_desc: the matrix descriptor of a B operand at shared address addr (16-byte aligned).
__device__ __forceinline__ unsigned long long vf_wg_desc(unsigned addr) {
	return (unsigned long long)((addr >> 4) & 0x3FFF) | ((unsigned long long)(VF_WG_LBO >> 4) << 16) | ((unsigned long long)(VF_WG_SBO >> 4) << 32);
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
__device__ __forceinline__ void vf_wg_mma48(float (&d0)[2][4], float (&d1)[2][4], float (&d2)[2][4], const unsigned (&a)[4],
                                            unsigned long long desc) {
	float* const d[3] = {&d0[0][0], &d1[0][0], &d2[0][0]};
	emu_wgmma_rs_blocks<3>(d, a, (uint64_t)desc);
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
// d0, d1, d2: the accumulators of column blocks dz = 0, 1, 2 (two n8 tiles of 4 each).
__device__ __forceinline__ void vf_wg_mma48(float (&d0)[2][4], float (&d1)[2][4], float (&d2)[2][4], const unsigned (&a)[4],
                                            unsigned long long desc) {
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n48k16.f32.f16.f16 "
	             "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23}, "
	             "{%24,%25,%26,%27}, %28, p, 1, 1, 0;\n}\n"
	             : "+f"(d0[0][0]), "+f"(d0[0][1]), "+f"(d0[0][2]), "+f"(d0[0][3]), "+f"(d0[1][0]), "+f"(d0[1][1]),
	               "+f"(d0[1][2]), "+f"(d0[1][3]), "+f"(d1[0][0]), "+f"(d1[0][1]), "+f"(d1[0][2]), "+f"(d1[0][3]),
	               "+f"(d1[1][0]), "+f"(d1[1][1]), "+f"(d1[1][2]), "+f"(d1[1][3]), "+f"(d2[0][0]), "+f"(d2[0][1]),
	               "+f"(d2[0][2]), "+f"(d2[0][3]), "+f"(d2[1][0]), "+f"(d2[1][1]), "+f"(d2[1][2]), "+f"(d2[1][3])
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

// VF_WG_ABUF: buffers of A fragments across taps (a buffer is refilled once the wgmma of
// VF_WG_ABUF taps back retired).
// VF_WG_PREFETCH: load tap t+1's A fragments after issuing tap t's wgmma (three buffers).
#ifndef VF_WG_PREFETCH
#define VF_WG_PREFETCH 0
#endif
#ifndef VF_WG_ABUF
#define VF_WG_ABUF (VF_WG_PREFETCH ? 3 : 2)
#endif

// vf_wg_conv_plane: vf_conv_plane on wgmma. Per tap, the A fragments of both rows (ldmatrix,
// into VF_WG_ABUF buffers in turn),
// then one m64n48k16 per row; all retired before the accumulators are read.
template <int D, int NP, int PH>
__device__ __forceinline__ void vf_wg_conv_plane(const unsigned* __restrict__ eb, unsigned wimg, float (&acc)[2][NP][2][4],
                                                 const int (&off)[3]) {
	unsigned a[VF_WG_ABUF][2][4]; // [buffer][row]
	// e plane p adds to output plane p + 1 - dz (times D): the (NP-1-D*dz)-th oldest.
	constexpr int k0 = (NP - 1 + PH) % NP, k1 = (NP - 1 - D + PH) % NP, k2 = (NP - 1 - 2 * D + PH) % NP;
#if VF_WG_PREFETCH
	// Tap t+1's A fragments are loaded while tap t's wgmma run: buffers t-1, t (in flight) and t+1.
	static_assert(VF_WG_ABUF == 3, "fused kernel (wgmma): prefetching needs three A buffers");
	vf_wg_ldsm4(a[0][0], eb + off[0] - D * VF_EW * 8);
	vf_wg_ldsm4(a[0][1], eb + off[0] - D * VF_EW * 8 + VF_EW * 8);
#pragma unroll
	for (int tap = 0; tap < 9; ++tap) {
		unsigned(&ab)[2][4] = a[tap % 3];
		vf_wg_fence();
		const unsigned long long desc = vf_wg_desc(wimg + tap * VF_WG_TAP_BYTES);
#pragma unroll
		for (int rr = 0; rr < 2; ++rr) vf_wg_mma48(acc[rr][k0], acc[rr][k1], acc[rr][k2], ab[rr], desc);
		vf_wg_commit();
		if (tap + 1 < 9) {
			const int dy = (tap + 1) / 3, dx = (tap + 1) % 3;
			if (tap >= 2) vf_wg_wait<2>(); // tap-2's group, which read buffer (tap+1) % 3
			const unsigned* pa = eb + off[dx] + D * (dy - 1) * VF_EW * 8;
			vf_wg_ldsm4(a[(tap + 1) % 3][0], pa);
			vf_wg_ldsm4(a[(tap + 1) % 3][1], pa + VF_EW * 8);
		}
	}
#else
#pragma unroll
	for (int tap = 0; tap < 9; ++tap) {
		const int dy = tap / 3, dx = tap % 3;
		unsigned(&ab)[2][4] = a[tap % VF_WG_ABUF];
		if (tap >= VF_WG_ABUF) vf_wg_wait<VF_WG_ABUF - 1>();
		const unsigned* pa = eb + off[dx] + D * (dy - 1) * VF_EW * 8;
		vf_wg_ldsm4(ab[0], pa);
		vf_wg_ldsm4(ab[1], pa + VF_EW * 8);
		vf_wg_fence();
		const unsigned long long desc = vf_wg_desc(wimg + tap * VF_WG_TAP_BYTES);
#pragma unroll
		for (int rr = 0; rr < 2; ++rr) vf_wg_mma48(acc[rr][k0], acc[rr][k1], acc[rr][k2], ab[rr], desc);
		vf_wg_commit();
	}
#endif
	vf_wg_wait<0>();
	vf_wg_acc_fence<NP>(acc);
}
#endif
