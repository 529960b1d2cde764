// The fused kernel's input and conv1 (part of fused.cu):
//
//   x = float(v)*scale + shift (two roundings, as segment.Norm.Apply), 0 outside the volume,
//       as fp16 in three x-shifted copies
//   e = relu(conv1(x)): an implicit GEMM on the tensor cores, M = 16 e voxels, K = 27 taps
//       padded to 32, N = 16 channels, fp32 accumulation, stored as fp16 channel-last
//
// and where the conv warps read those e planes (vf_conv_offsets: a lane's ldmatrix row of tap
// (dy, dx) in the swizzled e layout conv1 writes).
#pragma once

// ---- per-thread input load: one raw x value of a plane, normalised ----

struct VfGeom {
	int nx, ny, nz, z0, x0, y0;
	float scale, shift;
};

// VfXLoader loads thread tid's element (row tid/VF_XRAW, column tid%VF_XRAW) of x planes: the
// thread's x-y position is fixed for the whole block, so its bounds and address are worked out
// once (nullptr: outside the volume or beyond the plane).
template <typename T> struct VfXLoader {
	const T* p; // the thread's voxel in slab plane 0 (slab-relative z -3)
	size_t plane;

	__device__ __forceinline__ VfXLoader(const T* __restrict__ in, const VfGeom& G, int tid) {
		plane = (size_t)G.nx * G.ny;
		const int gy = G.y0 - 3 + tid / VF_XRAW, gx = G.x0 - 3 + tid % VF_XRAW;
		p = nullptr;
		if (tid < VF_XH * VF_XRAW && gy >= 0 && gy < G.ny && gx >= 0 && gx < G.nx) p = in + (size_t)gy * G.nx + gx;
	}
	// fetch starts the load of x plane rel (slab-relative z); normalise, called as late as
	// possible, finishes it: a step's work hides the load's latency (the warp stalls at the
	// first use of the loaded register, not at the load). 0 outside the volume.
	struct Raw {
		T v;
		bool in;
	};
	__device__ __forceinline__ Raw fetch(const VfGeom& G, int rel) const {
		const int gz = G.z0 + rel;
		Raw r{T(0), p != nullptr && gz >= 0 && gz < G.nz};
		if (r.in) r.v = __ldg(p + (size_t)(rel + 3) * plane);
		return r;
	}
	__device__ __forceinline__ float normalise(const VfGeom& G, Raw r) const {
		return r.in ? __fadd_rn(__fmul_rn((float)r.v, G.scale), G.shift) : 0.f;
	}
	__device__ __forceinline__ float load(const VfGeom& G, int rel) const { return normalise(G, fetch(G, rel)); }
};

__device__ __forceinline__ void vf_store_x(VfSmem& sm, int slot, int tid, float v) {
	if (tid >= VF_XH * VF_XRAW) return;
	const int r = tid / VF_XRAW, c = tid % VF_XRAW;
	const unsigned short h = vf_half(vf_sat(v));
#pragma unroll
	for (int d = 0; d < 3; ++d) {
		const int i = c - d;
		if (i >= 0 && i < VF_XW) sm.x[slot][d][r][i] = h;
	}
}

// ---- conv1: e plane (slab-relative q) into e buffer buf, from x slots xs, xs+1, xs+2 ----

// Conv2 warp `row` makes conv1 groups row, row+VF_ROWS, ... of every e plane (a group: two
// segments of 8 e voxels, M = 16). VfConv1Plan holds what does not change from plane to plane,
// worked out once: lane l addresses row l%8 of A matrix l/8 (matrices 0/2: the group's first
// segment, 1/3: its second; k = 16h + 8(j>>1) + row). Padding taps k = 27..31 read tap 0's row:
// any finite value does, since their B rows are zero.
#define VF_G1 ((VF_NGROUP + VF_CW - 1) / VF_CW) // conv1 groups per conv2 warp (at most)
struct VfConv1Plan {
	int dz[2];          // per k step h: the lane's tap's plane offset
	int aoff[VF_G1][2]; // per group and k step: the lane's A row in an x slot (fp16 elements)
	int eoff[VF_G1][2]; // per group and row half m: the lane's e word for channels 0-7 (8-15: ^4);
	                    // a junk word past the plane (VF_E_JUNK) when the warp has no such group
	unsigned inside;    // bit 2k+m: group k's row half m lies inside the volume in x-y (else zeros are stored)
	float b1[4];
};

__device__ __forceinline__ VfConv1Plan vf_conv1_plan(const VfSmem& sm, const VfGeom& G, int row, int lane) {
	VfConv1Plan P;
	const int j = lane >> 3, r = lane & 7, g = lane >> 2, q = lane & 3;
	int off[2];
#pragma unroll
	for (int h = 0; h < 2; ++h) {
		const int k = 16 * h + 8 * (j >> 1) + r;
		const int dz = k / 9, dy = k / 3 % 3, dx = k % 3;
		P.dz[h] = k < 27 ? dz : 0;
		off[h] = k < 27 ? (dx * VF_XH + dy) * VF_XW : 0;
	}
	P.inside = 0;
#pragma unroll
	for (int kk = 0; kk < VF_G1; ++kk) {
		const int gi = min(row + kk * VF_CW, VF_NGROUP - 1);
		const bool real = row + kk * VF_CW < VF_NGROUP;
		const int segA = 2 * gi, segB = min(2 * gi + 1, VF_NSEG - 1);
		const bool hasB = 2 * gi + 1 < VF_NSEG;
		const int seg = (j & 1) ? segB : segA;
#pragma unroll
		for (int h = 0; h < 2; ++h) P.aoff[kk][h] = off[h] + seg / 3 * VF_XW + seg % 3 * 8;
#pragma unroll
		for (int m = 0; m < 2; ++m) {
			const int sg = m ? segB : segA;
			const int er = sg / 3, col = sg % 3 * 8 + g;
			const int gy = G.y0 - 2 + er, gx = G.x0 - 2 + col;
			const int pos = er * VF_EW + col;
			const bool store = real && (m == 0 || hasB);
			P.eoff[kk][m] = store ? pos * 8 + ((pos >> 2) & 1) * 4 + q : VF_EH * VF_EW * 8 + q;
			if (store && gy >= 0 && gy < G.ny && gx >= 0 && gx < G.nx) P.inside |= 1u << (2 * kk + m);
		}
	}
#pragma unroll
	for (int i = 0; i < 4; ++i) P.b1[i] = sm.b1[lane][i];
	return P;
}

__device__ __forceinline__ void vf_conv1(VfSmem& sm, int buf, int xs, bool planeInside, const VfConv1Plan& P, int first,
                                         int stride, int lane) {
	unsigned* eb = sm.e[buf];
	if (!planeInside) { // zero padding in z
		for (int i = first * 32 + lane; i < VF_EH * VF_EW * 8; i += stride * 32) eb[i] = 0u;
		return;
	}
	const unsigned short* xa = &sm.x[(xs + P.dz[0]) % VF_XSLOTS][0][0][0];
	const unsigned short* xb = &sm.x[(xs + P.dz[1]) % VF_XSLOTS][0][0][0];
	unsigned w[2][2][2]; // conv1 B fragments: [k step][n half][reg]
#pragma unroll
	for (int h = 0; h < 2; ++h)
#pragma unroll
		for (int nh = 0; nh < 2; ++nh)
#pragma unroll
			for (int r = 0; r < 2; ++r) w[h][nh][r] = sm.w1[h][nh][lane][r];
	// Every group, the warp's last one included when it owns one fewer (computed from a valid
	// row, stored to the junk words): a branch between groups, or around their stores, kept
	// ptxas from overlapping them.
#pragma unroll
	for (int kk = 0; kk < VF_G1; ++kk) {
		unsigned a[2][4];
		vf_ldsm4<true>(a[0], xa + P.aoff[kk][0]);
		vf_ldsm4<true>(a[1], xb + P.aoff[kk][1]);
		float acc[2][4];
#pragma unroll
		for (int nh = 0; nh < 2; ++nh)
#pragma unroll
			for (int i = 0; i < 4; ++i) acc[nh][i] = P.b1[2 * nh + (i & 1)];
#pragma unroll
		for (int h = 0; h < 2; ++h)
#pragma unroll
			for (int nh = 0; nh < 2; ++nh) vf_mma(acc[nh], a[h], w[h][nh][0], w[h][nh][1]);
		// Rows g (first segment) and g+8 (second), channels 8nh+2q, +1.
#pragma unroll
		for (int m = 0; m < 2; ++m) {
			const unsigned bit = 1u << (2 * kk + m);
#pragma unroll
			for (int nh = 0; nh < 2; ++nh) {
				unsigned v = vf_pack_relu_sat(acc[nh][2 * m], acc[nh][2 * m + 1]);
				if (!(P.inside & bit)) v = 0u;
				eb[P.eoff[kk][m] ^ (nh * 4)] = v;
			}
		}
	}
}

// ---- the conv warps: one e plane into the planes in flight ----

// vf_conv_offsets: the lane's A row (ldmatrix address, in e words) of taps (dy = 1, dx) of a
// conv with dilation D, for tile row `row`; tap (dy, dx) is D*(dy-1) e rows further. The swizzle
// bit (bit 0 of pos/4) is the same along a column: an e row is a multiple of 8 voxels.
static_assert(VF_EW % 8 == 0, "fused kernel: e rows must keep the swizzle bit of a column");
template <int D> __device__ __forceinline__ void vf_conv_offsets(int (&off)[3], int row, int lane) {
	const int j = lane >> 3, r = lane & 7;
	const int v = (j & 1) * 8 + r, c = j >> 1;
	const int pos0 = (row + 2) * VF_EW + v + 2;
#pragma unroll
	for (int dx = 0; dx < 3; ++dx) {
		const int pos = pos0 + D * (dx - 1);
		off[dx] = pos * 8 + ((c ^ (pos >> 2)) & 1) * 4;
	}
}
