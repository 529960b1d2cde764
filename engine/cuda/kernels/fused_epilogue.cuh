// The fused kernel's epilogue, per warp, two tile rows of one plane (part of fused.cu):
//
//   q     = relu(wx.s + wg'.g + bx + bg')   s, g and the gate weights as fp16, fp32 sums
//   a     = sigmoid(psi.q + bpsi)           fp32 (approximate exp and divide)
//   f     = a*s + g                         fp32
//   logit = head.f + bh                     f and head as fp16, fp32 sums
//   label = argmax (lowest class on ties), uint8; logits stored as fp16 on sampled planes
#pragma once

// ---- the epilogue: gate, head, argmax for the two tile rows of a warp, one plane ----

// vf_sigmoid: 1/(1+exp(-x)). VF_FAST_SIGMOID: exp as ex2.approx.ftz of x*log2(e) (what __expf
// does, less its denormal fix-up: a result below 2^-126 flushes to 0, and 1 + it is 1 either
// way) and the approximate reciprocal.
__device__ __forceinline__ float vf_sigmoid(float x) {
#if VF_FAST_SIGMOID && defined(__CUDA_ARCH__)
	float e;
	asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(e) : "f"(__fmul_rn(x, -1.44269504088896341f)));
	return __fdividef(1.f, 1.f + e);
#else
	return 1.f / (1.f + expf(-x));
#endif
}

// vf_logit_plane: where the logits of output plane o (slab-relative) go, or nullptr when its z
// in the volume is not sampled for the confidence: the slab's sampled planes in order, from the
// first multiple of VP_CONF_STRIDE at or after G.z0 (common.cuh's vp_margin_index), each
// [ny][nx][VF_LOGIT_WORDS] fp16 pairs.
template <bool WIDE>
__device__ __forceinline__ unsigned* vf_logit_plane(unsigned* __restrict__ logits, const VfGeom& G, int o, size_t plane) {
	const int z = G.z0 + o;
	return vp_conf_plane(z) ? logits + (size_t)vp_margin_index(G.z0, z) * plane * VF_LOGIT_WORDS(WIDE) : nullptr;
}

// vf_argmax: the label of each of the lane's voxels (rows r, columns m) from its logits lg: the
// argmax over this lane's classes (in increasing order), then over the quad; the lowest class
// wins ties. A lane without classes holds (-inf, 255) and never wins: logits are finite (a NaN
// one, from a hostile model, would lose every comparison: label 0).
__device__ __forceinline__ void vf_argmax(const float (&lg)[2][2][4], int q, int classes, bool wide, float (&best)[2][2],
                                          int (&idx)[2][2]) {
#pragma unroll
	for (int r = 0; r < 2; ++r)
#pragma unroll
		for (int m = 0; m < 2; ++m) {
			best[r][m] = -__builtin_huge_valf(), idx[r][m] = 255;
#pragma unroll
			for (int nt = 0; nt < 2; ++nt) {
				if (nt == 1 && !wide) break;
#pragma unroll
				for (int b = 0; b < 2; ++b) {
					const int k = 8 * nt + 2 * q + b;
					const float l = lg[r][nt][2 * m + b];
					if (k < classes && l > best[r][m]) best[r][m] = l, idx[r][m] = k;
				}
			}
		}
#pragma unroll
	for (int off = 1; off < 4; off <<= 1)
#pragma unroll
		for (int r = 0; r < 2; ++r)
#pragma unroll
			for (int m = 0; m < 2; ++m) {
				const float ob = vf_shfl_xor(best[r][m], off);
				const int oi = vf_shfl_xor(idx[r][m], off);
				if (ob > best[r][m] || (ob == best[r][m] && oi < idx[r][m])) best[r][m] = ob, idx[r][m] = oi;
			}
}

// vf_epilogue: g of both rows in gacc[row] (the dilated conv's accumulators, before relu), s of
// row r at sp + 256r (fp32, after relu). Every stage runs for both rows (and both row halves)
// before the next, so the mma, shuffle and special-function latencies of one row hide behind
// the other's work: this is the dilated-conv warps' critical path.
template <bool WIDE>
__device__ __forceinline__ void vf_epilogue(const VfSmem& sm, const float (&g0)[2][4], const float (&g1)[2][4],
                                            const float* sp, const float* qsp, int lane, int classes,
                                            unsigned char* __restrict__ out, unsigned* __restrict__ lout, int gy0,
                                            const VfGeom& G) {
	// lout: the plane's logits (vf_logit_plane) when it is sampled for the confidence, else
	// nullptr (warp-uniform).
	const int g = lane >> 2, q = lane & 3;
	float gv[2][2][4], sv[2][2][4]; // [row][n half][4]
#pragma unroll
	for (int r = 0; r < 2; ++r)
#pragma unroll
		for (int nh = 0; nh < 2; ++nh) {
			const float4 s4 = *reinterpret_cast<const float4*>(sp + r * 256 + nh * 128 + lane * 4);
			sv[r][nh][0] = s4.x, sv[r][nh][1] = s4.y, sv[r][nh][2] = s4.z, sv[r][nh][3] = s4.w;
#pragma unroll
			for (int i = 0; i < 4; ++i) gv[r][nh][i] = fmaxf((r ? g1 : g0)[nh][i], 0.f);
		}
	unsigned ag[2][4]; // g after relu, saturated fp16
#pragma unroll
	for (int r = 0; r < 2; ++r)
#pragma unroll
		for (int nh = 0; nh < 2; ++nh)
#pragma unroll
			for (int m = 0; m < 2; ++m)
				ag[r][2 * nh + m] = vf_pack_relu_sat((r ? g1 : g0)[nh][2 * m], (r ? g1 : g0)[nh][2 * m + 1]);
	float qa[2][4];
#if VF_GATE_SPLIT
#pragma unroll
	for (int r = 0; r < 2; ++r) {
		const float4 q4 = *reinterpret_cast<const float4*>(qsp + r * 128 + lane * 4);
		qa[r][0] = q4.x, qa[r][1] = q4.y, qa[r][2] = q4.z, qa[r][3] = q4.w;
	}
#else
	(void)qsp;
#pragma unroll
	for (int r = 0; r < 2; ++r) {
		unsigned as[4]; // s >= 0 already: saturated fp16
#pragma unroll
		for (int nh = 0; nh < 2; ++nh)
#pragma unroll
			for (int m = 0; m < 2; ++m) as[2 * nh + m] = vf_pack_relu_sat(sv[r][nh][2 * m], sv[r][nh][2 * m + 1]);
#pragma unroll
		for (int i = 0; i < 4; ++i) qa[r][i] = sm.gb[lane][i & 1];
		vf_mma(qa[r], as, sm.gx[lane][0], sm.gx[lane][1]);
	}
#endif
#pragma unroll
	for (int r = 0; r < 2; ++r) vf_mma(qa[r], ag[r], sm.gg[lane][0], sm.gg[lane][1]);
	// psi: this lane's two gate columns for rows g and g+8, summed over the quad.
	float pr[2][2];
#pragma unroll
	for (int r = 0; r < 2; ++r)
#pragma unroll
		for (int m = 0; m < 2; ++m)
			pr[r][m] = sm.psi[lane][0] * fmaxf(qa[r][2 * m], 0.f) + sm.psi[lane][1] * fmaxf(qa[r][2 * m + 1], 0.f);
#pragma unroll
	for (int off = 1; off < 4; off <<= 1)
#pragma unroll
		for (int r = 0; r < 2; ++r)
#pragma unroll
			for (int m = 0; m < 2; ++m) pr[r][m] += vf_shfl_xor(pr[r][m], off);
	unsigned af[2][4], afl[2][4];
#pragma unroll
	for (int r = 0; r < 2; ++r)
#pragma unroll
		for (int m = 0; m < 2; ++m) {
			const float a = vf_sigmoid(pr[r][m] + sm.psib);
#pragma unroll
			for (int nh = 0; nh < 2; ++nh) {
				// f >= 0 (a, s, g are): saturating is one min.
				const float f0 = fminf(fmaf(a, sv[r][nh][2 * m], gv[r][nh][2 * m]), VF_HALF_MAX);
				const float f1 = fminf(fmaf(a, sv[r][nh][2 * m + 1], gv[r][nh][2 * m + 1]), VF_HALF_MAX);
				af[r][2 * nh + m] = vf_pack(f0, f1);
				if (VF_HEAD_SPLIT) afl[r][2 * nh + m] = vf_pack(vf_half_rest(f0), vf_half_rest(f1));
			}
		}
	float lg[2][2][4]; // [row][n tile][4]
	const bool wide = WIDE && classes > VF_NARROW_CLASSES;
#pragma unroll
	for (int nt = 0; nt < 2; ++nt) {
		if (nt == 1 && !wide) break;
#pragma unroll
		for (int r = 0; r < 2; ++r)
#pragma unroll
			for (int i = 0; i < 4; ++i) lg[r][nt][i] = sm.hb[nt][lane][i & 1];
#pragma unroll
		for (int r = 0; r < 2; ++r) vf_mma(lg[r][nt], af[r], sm.hw[nt][lane][0], sm.hw[nt][lane][1]);
		if (VF_HEAD_SPLIT) {
#pragma unroll
			for (int r = 0; r < 2; ++r) vf_mma(lg[r][nt], afl[r], sm.hw[nt][lane][0], sm.hw[nt][lane][1]);
#pragma unroll
			for (int r = 0; r < 2; ++r) vf_mma(lg[r][nt], af[r], sm.hwl[nt][lane][0], sm.hwl[nt][lane][1]);
		}
	}
	float best[2][2];
	int idx[2][2];
	vf_argmax(lg, q, classes, wide, best, idx);
	// A sampled plane's logits, as they are: each lane its two classes of each of its voxels, as
	// fp16 pairs (count_confidence finds the margin from them). Stores only: the epilogue of
	// every plane keeps its registers and instructions.
	if (VF_CONF && lout != nullptr)
#pragma unroll
		for (int r = 0; r < 2; ++r)
#pragma unroll
			for (int m = 0; m < 2; ++m) {
				const int gx = G.x0 + g + 8 * m, gy = gy0 + r;
				if (gy < G.ny && gx < G.nx) {
					unsigned* v = lout + ((size_t)gy * G.nx + gx) * VF_LOGIT_WORDS(WIDE);
					v[q] = vf_pack(lg[r][0][2 * m], lg[r][0][2 * m + 1]);
					if (WIDE) v[4 + q] = vf_pack(lg[r][1][2 * m], lg[r][1][2 * m + 1]);
				}
			}
	if (q == 0)
#pragma unroll
		for (int r = 0; r < 2; ++r)
#pragma unroll
			for (int m = 0; m < 2; ++m) {
				const int gx = G.x0 + g + 8 * m, gy = gy0 + r;
				if (gy < G.ny && gx < G.nx) out[(size_t)gy * G.nx + gx] = (unsigned char)(idx[r][m] == 255 ? 0 : idx[r][m]);
			}
}
