// Checks voxpipe's CUDA kernels on the host (see emu.h): random models (with C < 16 and K < 16
// exercising the zero padding), random volumes of awkward sizes, int16 and float32 inputs, cut
// into slabs exactly as segment's CUDA engine does; e, s, g and the labels are compared with a
// float64 reference of the network computed straight from segment/model.go's specification.
// The fused fp16 kernel runs on the same volumes with several slab and z-chunk cuts: its labels
// must not depend on the cut, must agree with the float32 kernels' on at least 99.9% of the
// voxels and differ from the float64 reference only at near-ties (relative logit gap <= 2e-2).
// Exit status 0 when everything agrees. Run through scripts/kernels-emu.sh; arguments:
//   fused           the fused kernel's cases only (quicker)
//   k16             the fused kernel with 9 and 16 classes on larger volumes
// (Dumped phantom cases run in lab/emucase.)
#include "emu.h"
#if defined(VF_WGMMA) && VF_WGMMA
#include "emu_sm90.h" // the fused kernel's convs on wgmma, as sm_90a builds it
#endif

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

#include "../voxpipe.cu"

#include "emu_ref.h"

namespace {

template <class T>
void run(const Model& m, int nx, int ny, int nz, int slab, std::vector<int> fusedChunks = {}) {
	const size_t plane = size_t(nx) * ny, n = plane * nz;
	// Smooth structure plus noise, as stored values.
	std::vector<T> stored(n);
	for (int z = 0; z < nz; ++z)
		for (int y = 0; y < ny; ++y)
			for (int x = 0; x < nx; ++x) {
				double v = 800 * std::exp(-((x - nx / 3.0) * (x - nx / 3.0) + (y - ny / 2.0) * (y - ny / 2.0) + (z - nz / 2.0) * (z - nz / 2.0)) / 40) +
				           300 * std::sin((x + 2 * y + z) / 3.0) + 200 * (std::uniform_real_distribution<double>(-0.5, 0.5)(rng)) + 100;
				stored[(size_t(z) * ny + y) * nx + x] = T(std::is_same<T, short>::value ? std::round(v) : v);
			}
	const float scale = 0.004f, shift = -0.6f;

	// float64 reference of the whole volume.
	Vol xv(nx, ny, nz, 1);
	for (size_t i = 0; i < n; ++i) xv.d[i] = double(float(float(stored[i]) * scale) + shift);
	Vol e = conv3(xv, m.c1w, m.c1b, m.C, 1);
	Vol s = conv3(e, m.c2w, m.c2b, m.C, 1);
	Vol g = conv3(e, m.cgw, m.cgb, m.C, 2);

	std::vector<float> w2, wg, b2, bg;
	upload(m, w2, wg, b2, bg);

	// Device buffers as the engine sizes them, poisoned with NaN.
	const int S = slab;
	const int ePlanes = (S + VP_TZ - 1) / VP_TZ * VP_TZ + 4;
	const float nan = std::numeric_limits<float>::quiet_NaN();
	std::vector<T> in(size_t(S + 6) * plane);
	std::vector<float> eb(size_t(VP_C) * ePlanes * plane, nan), sb(size_t(VP_C) * S * plane, nan), gb(size_t(VP_C) * S * plane, nan);
	std::vector<unsigned char> lab(size_t(S) * plane + 4, 0xEE);
	std::vector<unsigned char> out(n, 0xEE);
	std::vector<unsigned long long> cf32(VP_CONF_LEN, 0);

	int labelMismatch = 0, nearTies = 0;
	double maxErrE = 0, maxErrS = 0, maxErrG = 0;
	for (int z0 = 0; z0 < nz; z0 += S) {
		const int z1 = std::min(nz, z0 + S), nzOut = z1 - z0, zE0 = z0 - 2, nzE = nzOut + 4;
		const int lo = std::max(0, z0 - 3), hi = std::min(nz, z1 + 3);
		std::fill(in.begin(), in.end(), T(-7)); // garbage outside the uploaded planes
		std::memcpy(in.data() + size_t(lo - (z0 - 3)) * plane, stored.data() + size_t(lo) * plane, size_t(hi - lo) * plane * sizeof(T));
		std::fill(eb.begin(), eb.end(), nan), std::fill(sb.begin(), sb.end(), nan), std::fill(gb.begin(), gb.end(), nan);
		dim3 blk(VP_TX, VP_TY);
		auto conv1 = std::is_same<T, short>::value ? (void*)&conv1_i16 : (void*)&conv1_f32;
		emu_launch((void (*)(const T*, float*, int, int, int, int, int, int, float, float))conv1,
		           dim3((nx + VP_TX - 1) / VP_TX, (ny + VP_TY - 1) / VP_TY, (nzE + VP_TZ - 1) / VP_TZ), blk,
		           (const T*)in.data(), eb.data(), nx, ny, nz, zE0, nzE, ePlanes, scale, shift);
		for (int c = 0; c < VP_C; ++c)
			for (int p = 0; p < nzE; ++p)
				for (size_t i = 0; i < plane; ++i) {
					const int y = int(i / nx), x = int(i % nx);
					const double want = c < m.C ? e.at(c, zE0 + p, y, x) : 0.0;
					const float got = eb[(size_t(c) * ePlanes + p) * plane + i];
					const double err = std::fabs(got - want) / (1 + std::fabs(want));
					maxErrE = std::max(maxErrE, err);
					CHECK(err < 1e-5, "e c%d p%d y%d x%d: got %g want %g (slab z0=%d)", c, p, y, x, got, want, z0);
				}
		const dim3 gridO((nx + VP_TX - 1) / VP_TX, (ny + VP_TY - 1) / VP_TY, (nzOut + VP_TZ - 1) / VP_TZ);
		emu_launch(&conv2, gridO, blk, (const float*)eb.data(), (const float*)w2.data(), (const float*)b2.data(), sb.data(), nx, ny, ePlanes, nzOut, S);
		emu_launch(&convg, gridO, blk, (const float*)eb.data(), (const float*)wg.data(), (const float*)bg.data(), gb.data(), nx, ny, ePlanes, nzOut, S);
		for (int c = 0; c < VP_C; ++c)
			for (int o = 0; o < nzOut; ++o)
				for (size_t i = 0; i < plane; ++i) {
					const int y = int(i / nx), x = int(i % nx);
					const double ws = c < m.C ? s.at(c, z0 + o, y, x) : 0.0, wgv = c < m.C ? g.at(c, z0 + o, y, x) : 0.0;
					const float gs = sb[(size_t(c) * S + o) * plane + i], gg = gb[(size_t(c) * S + o) * plane + i];
					const double es = std::fabs(gs - ws) / (1 + std::fabs(ws)), eg = std::fabs(gg - wgv) / (1 + std::fabs(wgv));
					maxErrS = std::max(maxErrS, es), maxErrG = std::max(maxErrG, eg);
					CHECK(es < 1e-4, "s c%d z%d y%d x%d: got %g want %g", c, z0 + o, y, x, gs, ws);
					CHECK(eg < 1e-4, "g c%d z%d y%d x%d: got %g want %g", c, z0 + o, y, x, gg, wgv);
				}
		std::fill(lab.begin(), lab.end(), 0xEE);
		const size_t nv = size_t(nzOut) * plane;
		// A grid of at most 3 blocks: threads label several voxels each (the grid-stride loop).
		emu_launch(&gate_head, dim3(unsigned(std::min<size_t>(3, (nv + 255) / 256))), dim3(256), (const float*)sb.data(), (const float*)gb.data(),
		           lab.data(), cf32.data(), nx, ny, z0, nzOut, S, m.K);
		std::memcpy(out.data() + size_t(z0) * plane, lab.data(), nv);
		for (size_t i = nv; i < lab.size(); ++i) CHECK(lab[i] == 0xEE, "label written past the slab at %zu", i);
		countConfidence(lab.data(), nullptr, 0, plane, z0, nzOut, m.K, cf32);
	}
	// Labels against the float64 reference, near-ties (top-2 logits within 1e-4 relative) allowed.
	const int G = m.C / 2;
	Confidence ref;   // from the float64 logits
	size_t nearEdge = 0, nearLow = 0; // voxels whose float64 margin is within 1e-4 logit of a unit's edge, of 1 logit
	std::vector<int> refLabel(n);
	std::vector<std::vector<double>> refGap(n, std::vector<double>(m.K));
	for (size_t i = 0; i < n; ++i) {
		const int z = int(i / plane), y = int(i % plane / nx), x = int(i % nx);
		double p = m.psib[0];
		for (int j = 0; j < G; ++j) {
			double ax = m.wxb[j], ag = m.wgb[j];
			for (int c = 0; c < m.C; ++c) ax += m.wxw[j * m.C + c] * s.at(c, z, y, x), ag += m.wgw[j * m.C + c] * g.at(c, z, y, x);
			p += m.psiw[j] * std::max(ax + ag, 0.0);
		}
		const double a = 1 / (1 + std::exp(-p));
		std::vector<double> l(m.K);
		int best = 0;
		double scale = 1;
		for (int k = 0; k < m.K; ++k) {
			double acc = m.hb[k];
			for (int c = 0; c < m.C; ++c) acc += m.hw[k * m.C + c] * (a * s.at(c, z, y, x) + g.at(c, z, y, x));
			l[k] = acc;
			if (acc > l[best]) best = k;
			scale = std::max(scale, std::fabs(acc));
		}
		refLabel[i] = best;
		for (int k = 0; k < m.K; ++k) refGap[i][k] = (l[best] - l[k]) / scale;
		double second = -HUGE_VAL;
		for (int k = 0; k < m.K; ++k)
			if (k != best) second = std::max(second, l[k]);
		const double mg = l[best] - second, u = mg * VP_MARGIN_SCALE;
		if (u - std::floor(u) < 1e-4 * VP_MARGIN_SCALE || std::ceil(u) - u < 1e-4 * VP_MARGIN_SCALE) ++nearEdge;
		if (std::fabs(mg - 1) < 1e-4) ++nearLow;
		if (best > 0 && vp_conf_plane(z)) {
			const unsigned long long units = (unsigned long long)std::min(std::floor(u), double(VP_MARGIN_CAP));
			++ref.fg, ref.margin += units, ref.low += units < VP_LOW_MARGIN;
		}
		CHECK(out[i] < m.K, "label %d out of range at z%d y%d x%d", out[i], z, y, x);
		if (out[i] != best && out[i] < m.K) {
			const double gap = (l[best] - l[out[i]]) / scale;
			if (gap < 1e-4) {
				++nearTies;
			} else {
				++labelMismatch;
				CHECK(false, "label at z%d y%d x%d: got %d want %d (gap %g)", z, y, x, out[i], best, gap);
			}
		}
	}
	// The float32 kernels' confidence: the label counts exactly the labels', the margins the
	// float64 reference's up to voxels within rounding of a unit's edge, of 1 logit or of a tie
	// (one unit, or one low margin, each).
	const Confidence c32 = fromCounters(cf32, m.K);
	checkLabelCounts("float32", c32, std::vector<unsigned char>(out.begin(), out.end()), m.K, plane);
	auto diff = [](unsigned long long a, unsigned long long b) { return a > b ? a - b : b - a; };
	CHECK(diff(c32.fg, ref.fg) <= size_t(labelMismatch + nearTies), "float32 confidence: %llu foreground voxels, reference %llu", c32.fg, ref.fg);
	const size_t ties = size_t(labelMismatch + nearTies); // a label that flips has a margin near 0
	CHECK(diff(c32.margin, ref.margin) <= nearEdge + ties, "float32 confidence: margin units %llu, reference %llu (%zu voxels near an edge)", c32.margin,
	      ref.margin, nearEdge);
	CHECK(diff(c32.low, ref.low) <= nearLow + ties, "float32 confidence: %llu low-margin voxels, reference %llu", c32.low, ref.low);
	std::printf("      confidence: float32 fg %llu margin %llu low %llu; float64 reference fg %llu margin %llu low %llu (%zu voxels near an edge)\n", c32.fg,
	            c32.margin, c32.low, ref.fg, ref.margin, ref.low, nearEdge);
	// The fused fp16 kernel: the same labels for every slab and chunk cut, at least 99.9% equal to
	// the float32 kernels', every difference from the float64 reference a near-tie at fp16 precision.
	if (fusedChunks.size()) {
		const std::vector<float> wts = packFused(m);
		std::vector<unsigned char> first;
		std::vector<unsigned long long> firstConf;
		for (int chunk : fusedChunks) {
			std::vector<unsigned long long> cf;
			const std::vector<unsigned char> f = runFused<T>(wts, stored, nx, ny, nz, slab, chunk, scale, shift, m.K, &cf);
			if (first.empty()) {
				first = f, firstConf = cf;
			} else {
				CHECK(cf == firstConf, "fused: zChunk %d gives another confidence than zChunk %d", chunk, fusedChunks[0]);
				size_t d = 0;
				for (size_t i = 0; i < n; ++i) d += f[i] != first[i];
				CHECK(d == 0, "fused: zChunk %d gives %zu labels different from zChunk %d", chunk, d, fusedChunks[0]);
			}
		}
		size_t vsF32 = 0, vsRef = 0, far = 0;
		double maxGap = 0;
		std::vector<size_t> inter(m.K), sumA(m.K), sumB(m.K);
		for (size_t i = 0; i < n; ++i) {
			CHECK(first[i] < m.K, "fused: label %d out of range at %zu", first[i], i);
			if (first[i] >= m.K) continue;
			vsF32 += first[i] != out[i];
			++sumA[first[i]], ++sumB[out[i]];
			if (first[i] == out[i]) ++inter[out[i]];
			if (first[i] != refLabel[i]) {
				++vsRef;
				maxGap = std::max(maxGap, refGap[i][first[i]]);
				if (refGap[i][first[i]] > 2e-2) ++far;
			}
		}
		double dice = 0;
		int classes = 0;
		for (int k = 0; k < m.K; ++k)
			if (sumA[k] + sumB[k] > 0) dice += 2.0 * inter[k] / double(sumA[k] + sumB[k]), ++classes;
		const double agree = 1 - double(vsF32) / double(n);
		std::printf("      fused fp16 (chunks");
		for (int c : fusedChunks) std::printf(" %d", c);
		// FNV-1a of the labels: a kernel change meant to keep the arithmetic must leave it unchanged.
		unsigned long long fnv = 1469598103934665603ull;
		for (size_t i = 0; i < n; ++i) fnv = (fnv ^ first[i]) * 1099511628211ull;
		std::printf("): %zu of %zu differ from float32 (%.4f%% agree, mean Dice %.5f), %zu from float64 (largest relative logit gap %.2g); labels fnv %016llx\n",
		            vsF32, n, 100 * agree, dice / classes, vsRef, maxGap, fnv);
		// The 99.9% contract is for volumes of 10000 voxels or more (one flip in a 2000-voxel volume
		// is 0.05%); on smaller ones every difference must still be a near-tie.
		CHECK(n < 10000 || agree >= 0.999, "fused: agreement with float32 %.5f < 0.999", agree);
		CHECK(far == 0, "fused: %zu labels differ from float64 by more than a near-tie (relative gap > 2e-2)", far);
		// Its confidence: label counts exact; the margins those of fp16 logits, close to the
		// float64 reference's: the mean within 2 % (and 1/16 logit), the low-margin voxels within
		// 1 % of the foreground (and 2 voxels).
		const Confidence cf = fromCounters(firstConf, m.K);
		checkLabelCounts("fused", cf, first, m.K, plane);
		if (cf.fg > 0 && ref.fg > 0) {
			const double mf = double(cf.margin) / cf.fg, mr = double(ref.margin) / ref.fg;
			CHECK(std::fabs(mf - mr) <= std::max(0.02 * mr, VP_MARGIN_SCALE / 16.0), "fused: mean margin %.1f units, float64 reference %.1f", mf, mr);
			CHECK(double(diff(cf.low, ref.low)) <= std::max(0.01 * ref.fg, 2.0), "fused: %llu low-margin voxels, reference %llu", cf.low, ref.low);
		}
		std::printf("      fused confidence: fg %llu margin %llu low %llu\n", cf.fg, cf.margin, cf.low);
	}
	std::printf("%-5s C=%-2d K=%-2d %3dx%3dx%3d slab %3d: max rel err e %.2g s %.2g g %.2g; labels: %d wrong, %d near-ties of %zu\n",
	            std::is_same<T, short>::value ? "int16" : "f32", m.C, m.K, nx, ny, nz, slab, maxErrE, maxErrS, maxErrG, labelMismatch, nearTies, n);
}

} // namespace

int main(int argc, char** argv) {
	const Model m16 = randomModel(16, 4), m6 = randomModel(6, 3), m16k16 = randomModel(16, 16);
	if (argc > 1 && std::strcmp(argv[1], "k16") == 0) { // 9 and 16 classes on larger volumes
		run<float>(m16k16, 60, 50, 20, 7, {7});
		run<short>(randomModel(16, 9), 70, 33, 25, 6, {6});
	} else if (argc > 1 && std::strcmp(argv[1], "fused") == 0) { // the fused kernel alone, quicker
		run<short>(m16, 37, 53, 29, 7, {64, 3});
		run<short>(m16, 97, 41, 1, 1, {1});    // one plane
		run<float>(m16, 1, 40, 12, 5, {5, 2}); // one voxel wide
		run<float>(m6, 33, 9, 6, 4, {4, 1});
		run<short>(m16k16, 20, 11, 9, 9, {9, 2});
	} else {
		run<short>(m16, 37, 53, 29, 7, {64, 3});
		run<float>(m16, 37, 53, 29, 29, {29});
		run<short>(m16, 37, 53, 29, 1, {1});
		run<float>(m16, 37, 53, 29, 64, {5});
		run<float>(m6, 33, 9, 6, 4, {4, 1});
		run<short>(m6, 5, 70, 3, 2, {2});
		run<short>(m16k16, 20, 11, 9, 9, {9, 2});
		run<short>(m16, 97, 41, 1, 1, {1});
		run<float>(m16, 1, 40, 12, 5, {5, 2});
	}
#if defined(VF_WGMMA) && VF_WGMMA
	// The fused kernel's convs went through wgmma (a build that silently fell back would agree too).
	std::printf("wgmma executed (per warpgroup): %llu\n", emu::sm90::wgmmaExecuted);
	CHECK(emu::sm90::wgmmaExecuted > 0, "VF_WGMMA build ran no wgmma");
#endif
	if (failures) {
		std::printf("FAILED: %d checks\n", failures);
		return 1;
	}
	std::printf("PASS\n");
	return 0;
}
