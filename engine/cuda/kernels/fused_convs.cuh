// The fused kernel's conv warps (part of fused.cu): per e plane, the output planes in flight of
// two tile rows, accumulators in registers, weights from shared memory:
//
//   s = relu(conv3x3x3(e; w2) + b2)               conv2 warps, 3 planes in flight
//   g = relu(conv3x3x3 dilation 2(e; wg) + bg)    dilated-conv warps, 5 planes in flight
//
// fp16 e and weights, fp32 accumulation; the conv2 warps also make conv1, the dilated-conv
// warps run the epilogue one step later.
#pragma once

// ---- the kernel ----

// vf_params fills the per-lane fragments and biases (one warp).
__device__ __forceinline__ void vf_params(VfSmem& sm, const float* __restrict__ w, int lane) {
	const int g = lane >> 2, q = lane & 3;
	// conv1 B: k = tap (27..31 zero), n = channel.
#pragma unroll
	for (int h = 0; h < 2; ++h)
#pragma unroll
		for (int nh = 0; nh < 2; ++nh)
#pragma unroll
			for (int reg = 0; reg < 2; ++reg) {
				const int k = 16 * h + 8 * reg + 2 * q, n = 8 * nh + g;
				const float lo = k < 27 ? __ldg(w + VF_OFF_W1 + k * 16 + n) : 0.f;
				const float hi = k + 1 < 27 ? __ldg(w + VF_OFF_W1 + (k + 1) * 16 + n) : 0.f;
				sm.w1[h][nh][lane][reg] = vf_pack(lo, hi);
			}
#pragma unroll
	for (int i = 0; i < 4; ++i) {
		const int co = 8 * (i >> 1) + 2 * q + (i & 1); // accumulator column of value pair i
		sm.b1[lane][i] = __ldg(w + VF_OFF_B1 + co);
		sm.b2[lane][i] = __ldg(w + VF_OFF_B2 + co);
		sm.bg[lane][i] = __ldg(w + VF_OFF_BG + co);
	}
	// Gate (n = gate unit g, k = channel) and head (n = class, k = channel) B fragments.
	sm.gx[lane][0] = vf_pack(__ldg(w + VF_OFF_GX + g * 16 + 2 * q), __ldg(w + VF_OFF_GX + g * 16 + 2 * q + 1));
	sm.gx[lane][1] = vf_pack(__ldg(w + VF_OFF_GX + g * 16 + 2 * q + 8), __ldg(w + VF_OFF_GX + g * 16 + 2 * q + 9));
	sm.gg[lane][0] = vf_pack(__ldg(w + VF_OFF_GG + g * 16 + 2 * q), __ldg(w + VF_OFF_GG + g * 16 + 2 * q + 1));
	sm.gg[lane][1] = vf_pack(__ldg(w + VF_OFF_GG + g * 16 + 2 * q + 8), __ldg(w + VF_OFF_GG + g * 16 + 2 * q + 9));
#pragma unroll
	for (int nt = 0; nt < 2; ++nt) {
		const float* hr = w + VF_OFF_HW + (8 * nt + g) * 16;
		sm.hw[nt][lane][0] = vf_pack(__ldg(hr + 2 * q), __ldg(hr + 2 * q + 1));
		sm.hw[nt][lane][1] = vf_pack(__ldg(hr + 2 * q + 8), __ldg(hr + 2 * q + 9));
		sm.hwl[nt][lane][0] = vf_pack(vf_half_rest(__ldg(hr + 2 * q)), vf_half_rest(__ldg(hr + 2 * q + 1)));
		sm.hwl[nt][lane][1] = vf_pack(vf_half_rest(__ldg(hr + 2 * q + 8)), vf_half_rest(__ldg(hr + 2 * q + 9)));
		sm.hb[nt][lane][0] = __ldg(w + VF_OFF_HB + 8 * nt + 2 * q);
		sm.hb[nt][lane][1] = __ldg(w + VF_OFF_HB + 8 * nt + 2 * q + 1);
	}
#pragma unroll
	for (int b = 0; b < 2; ++b) {
		const int j = 2 * q + b; // gate column
		sm.gb[lane][b] = __ldg(w + VF_OFF_GXB + j) + __ldg(w + VF_OFF_GGB + j);
		sm.psi[lane][b] = __ldg(w + VF_OFF_PSI + j);
	}
	if (lane == 0) sm.psib = __ldg(w + VF_OFF_PSIB);
	if (lane < 4) sm.zero[lane] = 0u;
}

// ---- per-warp state of the body ----

// The two x values of a plane each thread loads (a plane has more than VF_THREADS of them).
template <typename T> struct VfXPair {
	VfXLoader<T> x0, x1;
	struct Raw {
		typename VfXLoader<T>::Raw r0, r1;
	};
	__device__ __forceinline__ VfXPair(const T* __restrict__ in, const VfGeom& G, int tid)
	    : x0(in, G, tid), x1(in, G, tid + VF_THREADS) {}
	__device__ __forceinline__ Raw fetch(const VfGeom& G, int rel) const { return {x0.fetch(G, rel), x1.fetch(G, rel)}; }
	// store normalises the fetched values into x ring slot `slot`.
	__device__ __forceinline__ void store(VfSmem& sm, int slot, int tid, const VfGeom& G, const Raw& r) const {
		vf_store_x(sm, slot, tid, x0.normalise(G, r.r0));
		vf_store_x(sm, slot, tid + VF_THREADS, x1.normalise(G, r.r1));
	}
	// load fetches and stores at once (the first planes, before the loop).
	__device__ __forceinline__ void load(VfSmem& sm, int slot, int tid, const VfGeom& G, int rel) const {
		vf_store_x(sm, slot, tid, x0.load(G, rel));
		vf_store_x(sm, slot, tid + VF_THREADS, x1.load(G, rel));
	}
};

// Accumulators of the output planes in flight (per row: [slot][n half][4]), a ring: in step t
// (phase PH = t mod NP) slot (k + PH) mod NP holds the k-th oldest plane. The step loops are
// unrolled by NP so that every slot index is a constant: retiring a plane costs no register
// moves (shifting NP-1 planes down cost 64 moves per step in the dilated-conv warps).
template <int NP>
__device__ __forceinline__ void vf_acc_bias(float (&acc)[2][NP][2][4], const float (&bias)[32][4], int lane) {
#pragma unroll
	for (int rr = 0; rr < 2; ++rr)
#pragma unroll
		for (int k = 0; k < NP; ++k)
#pragma unroll
			for (int nh = 0; nh < 2; ++nh)
#pragma unroll
				for (int i = 0; i < 4; ++i) acc[rr][k][nh][i] = bias[lane][2 * nh + (i & 1)];
}

// vf_acc_restart starts a retired slot again at the bias: it becomes the newest plane.
__device__ __forceinline__ void vf_acc_restart(float (&a)[2][4], const float (&bias)[32][4], int lane) {
#pragma unroll
	for (int nh = 0; nh < 2; ++nh)
#pragma unroll
		for (int i = 0; i < 4; ++i) a[nh][i] = bias[lane][2 * nh + (i & 1)];
}

// ---- the body: two tile rows per conv warp, weights from shared memory ----

// One e plane into the planes in flight of two tile rows (row0, row0+1): per tap, two A
// fragments (one per row) and, per dz, one ldmatrix.x4 of the tap's weights (both n halves, k
// low and high), used by 4 mma.
template <int D, int NP, int PH, int PF = 0>
__device__ __forceinline__ void vf_conv_plane(const unsigned* __restrict__ eb, const unsigned short* __restrict__ wc,
                                                  int boff, float (&acc)[2][NP][2][4], const int (&off)[3]) {
	if (PF == 0) { // per tap A of both rows, then per dz its B and 4 mma
		unsigned a0[4], a1[4];
#pragma unroll
		for (int dy = 0; dy < 3; ++dy)
#pragma unroll
			for (int dx = 0; dx < 3; ++dx) {
				const unsigned* pa = eb + off[dx] + D * (dy - 1) * VF_EW * 8;
				vf_ldsm4<false>(a0, pa);
				vf_ldsm4<false>(a1, pa + VF_EW * 8);
				unsigned b[4];
#pragma unroll
				for (int dz = 0; dz < 3; ++dz) {
					const int t = (dz * 3 + dy) * 3 + dx;
					vf_ldsm4<false>(b, wc + boff + t * 256);
#pragma unroll
					for (int nh = 0; nh < 2; ++nh) {
						// e plane p adds to output plane p + 1 - dz (times D): the (NP-1-D*dz)-th oldest.
						const int k = (NP - 1 - D * dz + PH) % NP;
						vf_mma(acc[0][k][nh], a0, b[2 * nh], b[2 * nh + 1]);
						vf_mma(acc[1][k][nh], a1, b[2 * nh], b[2 * nh + 1]);
					}
				}
			}
		return;
	}
	// PF 1: a tap's five fragments (A of both rows, B of the three dz), then its 12 mma.
#pragma unroll
	for (int tap = 0; tap < 9; ++tap) {
		const int dy = tap / 3, dx = tap % 3;
		const unsigned* pa = eb + off[dx] + D * (dy - 1) * VF_EW * 8;
		unsigned a[2][4], b[3][4];
		vf_ldsm4<false>(a[0], pa);
		vf_ldsm4<false>(a[1], pa + VF_EW * 8);
#pragma unroll
		for (int dz = 0; dz < 3; ++dz) vf_ldsm4<false>(b[dz], wc + boff + (dz * 9 + tap) * 256);
#pragma unroll
		for (int dz = 0; dz < 3; ++dz)
#pragma unroll
			for (int nh = 0; nh < 2; ++nh) {
				const int k = (NP - 1 - D * dz + PH) % NP;
				vf_mma(acc[0][k][nh], a[0], b[dz][2 * nh], b[dz][2 * nh + 1]);
				vf_mma(acc[1][k][nh], a[1], b[dz][2 * nh], b[dz][2 * nh + 1]);
			}
	}
}

// What both kinds of conv warp hold (the block's geometry, the thread's x loads, the z chunk),
// and the frame of a step: step t (one e plane, slab-relative p = o0-2+t) starts the x load
// of a later plane, runs the warp's own work (W::work), stores the x plane and ends at the
// block barrier.
template <typename T> struct VfWarp {
	VfSmem& sm;
	const VfGeom& G;
	const VfXPair<T>& X;
	int boff, o0, o1, steps, tid, lane, row0;
	int off[3]; // vf_conv_offsets

	__device__ __forceinline__ VfWarp(VfSmem& sm, const VfGeom& G, const VfXPair<T>& X, int boff, int o0, int o1,
	                                  int steps, int tid, int lane, int row0)
	    : sm(sm), G(G), X(X), boff(boff), o0(o0), o1(o1), steps(steps), tid(tid), lane(lane), row0(row0) {}

	template <int PH, class W> __device__ __forceinline__ void step(W& w, int t) const {
		// x plane o0+1+t (k = t+4 in the ring); input planes up to o1+2.
		const bool loadX = o0 + 1 + t <= o1 + 2;
		const auto xr = X.fetch(G, loadX ? o0 + 1 + t : -1 - G.z0);
		w.template work<PH>(t, o0 - 2 + t);
		if (loadX) X.store(sm, (t + 4) % VF_XSLOTS, tid, G, xr);
		vf_barrier();
	}
};

// A conv2 warp's work in step t, phase PH = t mod 3: conv1 of the next e plane, conv2 of e plane
// p into two rows' planes in flight, s of the plane that completes (p-1) into shared memory.
template <typename T> struct VfConv2Warp : VfWarp<T> {
	const VfConv1Plan& cp;
	int cw;
	float acc[2][3][2][4];

	__device__ __forceinline__ VfConv2Warp(const VfWarp<T>& w, const VfConv1Plan& cp, int cw)
	    : VfWarp<T>(w), cp(cp), cw(cw) {
		vf_conv_offsets<1>(this->off, this->row0, this->lane);
		vf_acc_bias(acc, this->sm.b2, this->lane);
	}

	template <int PH> __device__ __forceinline__ void work(int t, int p) {
		VfSmem& sm = this->sm;
		const VfGeom& G = this->G;
		const int lane = this->lane;
		// This step's e/s/qs buffer and the next step's.
		const int b = t & 1, bn = (t + 1) & 1;
		if (t + 1 < this->steps) {
			const int q = p + 1;
			vf_conv1(sm, bn, (t + 1) % VF_XSLOTS, G.z0 + q >= 0 && G.z0 + q < G.nz, cp, cw, VF_CW, lane);
		}
		// Step 0's e plane (o0-2) adds only to planes o0-3..o0-1, whose s no one reads.
		if (t > 0 && G.z0 + p >= 0 && G.z0 + p < G.nz)
#if VF_WG_CONV2
			vf_wg_conv_plane<1, 3, PH, VF_WG_N2>(sm.e[b], vf_smem_addr(sm.w2img), acc, this->off);
#else
			vf_conv_plane<1, 3, PH, VF_LOADS_FIRST>(sm.e[b], &sm.wsm[0][0][0][0], this->boff, acc, this->off);
#endif
#pragma unroll
		for (int rr = 0; rr < 2; ++rr) {
			float(&a)[2][4] = acc[rr][PH];
			float* sp = &sm.s[b][this->row0 + rr][0][0][0];
			float4 v[2];
#pragma unroll
			for (int nh = 0; nh < 2; ++nh) {
				v[nh].x = fmaxf(a[nh][0], 0.f), v[nh].y = fmaxf(a[nh][1], 0.f);
				v[nh].z = fmaxf(a[nh][2], 0.f), v[nh].w = fmaxf(a[nh][3], 0.f);
				*reinterpret_cast<float4*>(sp + nh * 128 + lane * 4) = v[nh];
			}
#if VF_GATE_SPLIT
			unsigned as[4]; // s >= 0: saturated fp16
#pragma unroll
			for (int nh = 0; nh < 2; ++nh) {
				as[2 * nh] = vf_pack_relu_sat(v[nh].x, v[nh].y);
				as[2 * nh + 1] = vf_pack_relu_sat(v[nh].z, v[nh].w);
			}
			float qa[4];
#pragma unroll
			for (int i = 0; i < 4; ++i) qa[i] = sm.gb[lane][i & 1];
			vf_mma(qa, as, sm.gx[lane][0], sm.gx[lane][1]);
			float4 q4;
			q4.x = qa[0], q4.y = qa[1], q4.z = qa[2], q4.w = qa[3];
			*reinterpret_cast<float4*>(&sm.qs[b][this->row0 + rr][lane][0]) = q4;
#endif
			vf_acc_restart(a, sm.b2, lane);
		}
	}
};

// A dilated-conv warp's work in step t, phase PH = t mod 5: the dilated conv of e plane p into
// two rows' planes in flight, then for the plane that completes (p-2) the gate, head and argmax
// (its s came from the conv2 warps in the step before).
template <typename T, bool WIDE> struct VfConvGWarp : VfWarp<T> {
	int classes;
	unsigned char* __restrict__ labels;
	unsigned* __restrict__ logits; // the sampled planes' logits (vf_logit_plane)
	size_t plane;
	// The planes in flight: one ring of five, or (VF_WG_GPAR) two rings of three by parity.
	float acc[VF_G_RING == 6 ? 2 : 1][2][VF_G_RING == 6 ? 3 : 5][2][4];

	__device__ __forceinline__ VfConvGWarp(const VfWarp<T>& w, int classes, unsigned char* __restrict__ labels,
	                                       unsigned* __restrict__ logits, size_t plane)
	    : VfWarp<T>(w), classes(classes), labels(labels), logits(logits), plane(plane) {
		vf_conv_offsets<2>(this->off, this->row0, this->lane);
#pragma unroll
		for (int r = 0; r < (VF_G_RING == 6 ? 2 : 1); ++r) vf_acc_bias(acc[r], this->sm.bg, this->lane);
	}

	template <int PH> __device__ __forceinline__ void work(int t, int p) {
		VfSmem& sm = this->sm;
		const VfGeom& G = this->G;
		const int lane = this->lane, row0 = this->row0;
		// This step's e buffer and the previous step's s buffer.
		const int b = t & 1, bp = (t - 1) & 1;
		// The ring this step's plane feeds and, at phase S, its oldest slot S (the plane that completes).
		constexpr int S = VF_G_RING == 6 ? PH >> 1 : PH;
		auto& ring = acc[VF_G_RING == 6 ? PH & 1 : 0];
		if (G.z0 + p >= 0 && G.z0 + p < G.nz)
#if VF_WG_CONVG && VF_WG_GPAR
			vf_wg_conv_plane<2, 3, S, 48, 1>(sm.e[b], vf_smem_addr(sm.wgimg), ring, this->off);
#elif VF_WG_CONVG
			vf_wg_conv_plane<2, 5, PH, 16>(sm.e[b], vf_smem_addr(sm.wgimg), ring, this->off);
#else
			vf_conv_plane<2, 5, PH, VF_LOADS_FIRST>(sm.e[b], &sm.wsm[1][0][0][0], this->boff, ring, this->off);
#endif
		if (t >= 4)
			vf_epilogue<WIDE>(sm, ring[0][S], ring[1][S], &sm.s[bp][row0][0][0][0],
#if VF_GATE_SPLIT
			            &sm.qs[bp][row0][0][0],
#else
			            nullptr,
#endif
			            lane, classes, labels + (size_t)(p - 2) * plane, vf_logit_plane<WIDE>(logits, G, p - 2, plane),
			            G.y0 + row0, G);
		vf_acc_restart(ring[0][S], sm.bg, lane);
		vf_acc_restart(ring[1][S], sm.bg, lane);
	}
};

// vf_steps runs a warp's step loop, unrolled by its accumulator ring (NP steps).
template <int NP, class W> __device__ __forceinline__ void vf_steps(W& w, int steps) {
	for (int t = 0; t < steps; t += NP) {
		w.template step<0>(w, t);
		if (t + 1 < steps) w.template step<1>(w, t + 1);
		if (t + 2 < steps) w.template step<2>(w, t + 2);
		if constexpr (NP >= 5) {
			if (t + 3 < steps) w.template step<3>(w, t + 3);
			if (t + 4 < steps) w.template step<4>(w, t + 4);
		}
		if constexpr (NP == 6) {
			if (t + 5 < steps) w.template step<5>(w, t + 5);
		}
	}
}

