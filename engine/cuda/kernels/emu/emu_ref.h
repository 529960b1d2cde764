// The host emulator tests' shared pieces (emu_test.cpp): a random model and its weight buffers
// laid out as the engine uploads them, the confidence counters, the fused kernel run slab by
// slab as the engine runs it, and a float64 reference of the network's convolutions. Include it
// after the kernels (../voxpipe.cu): it launches them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace {

struct Model {
	int C, K;
	std::vector<float> c1w, c1b, c2w, c2b, cgw, cgb, wxw, wxb, wgw, wgb, psiw, psib, hw, hb;
};

std::mt19937_64 rng(12345);
float uni(double bound) { return float(std::uniform_real_distribution<double>(-bound, bound)(rng)); }
std::vector<float> rnd(size_t n, double bound) {
	std::vector<float> v(n);
	for (auto& x : v) x = uni(bound);
	return v;
}

Model randomModel(int C, int K) {
	Model m{C, K};
	int G = C / 2;
	m.c1w = rnd(C * 27, std::sqrt(6.0 / 27)), m.c1b = rnd(C, 0.1);
	m.c2w = rnd(C * C * 27, std::sqrt(6.0 / (27 * C))), m.c2b = rnd(C, 0.1);
	m.cgw = rnd(C * C * 27, std::sqrt(6.0 / (27 * C))), m.cgb = rnd(C, 0.1);
	m.wxw = rnd(G * C, std::sqrt(6.0 / C)), m.wxb = rnd(G, 0.1);
	m.wgw = rnd(G * C, std::sqrt(6.0 / C)), m.wgb = rnd(G, 0.1);
	m.psiw = rnd(G, std::sqrt(6.0 / G)), m.psib = rnd(1, 0.1);
	m.hw = rnd(K * C, std::sqrt(6.0 / C)), m.hb = rnd(K, 0.1);
	return m;
}

// upload mirrors kernels/module_cuda.go's SetWeights: transposes and zero padding.
std::vector<float> upload(const Model& m, std::vector<float>& w2, std::vector<float>& wg, std::vector<float>& b2, std::vector<float>& bg) {
	const int C = m.C, G = C / 2, K = m.K;
	std::memset(c_conv1_w, 0, sizeof c_conv1_w);
	std::memset(c_conv1_b, 0, sizeof c_conv1_b);
	for (int co = 0; co < C; ++co) {
		for (int t = 0; t < 27; ++t) c_conv1_w[t * VP_C + co] = m.c1w[co * 27 + t];
		c_conv1_b[co] = m.c1b[co];
	}
	w2.assign(VP_C * 27 * VP_C, 0.f), wg.assign(VP_C * 27 * VP_C, 0.f);
	b2.assign(VP_C, 0.f), bg.assign(VP_C, 0.f);
	for (int co = 0; co < C; ++co) {
		b2[co] = m.c2b[co], bg[co] = m.cgb[co];
		for (int ci = 0; ci < C; ++ci)
			for (int t = 0; t < 27; ++t) {
				w2[(ci * 27 + t) * VP_C + co] = m.c2w[(co * C + ci) * 27 + t];
				wg[(ci * 27 + t) * VP_C + co] = m.cgw[(co * C + ci) * 27 + t];
			}
	}
	std::memset(c_gate_wx, 0, sizeof c_gate_wx), std::memset(c_gate_bx, 0, sizeof c_gate_bx);
	std::memset(c_gate_wg, 0, sizeof c_gate_wg), std::memset(c_gate_bg, 0, sizeof c_gate_bg);
	std::memset(c_gate_psi, 0, sizeof c_gate_psi);
	std::memset(c_head_w, 0, sizeof c_head_w), std::memset(c_head_b, 0, sizeof c_head_b);
	for (int j = 0; j < G; ++j) {
		for (int c = 0; c < C; ++c) c_gate_wx[j * VP_C + c] = m.wxw[j * C + c], c_gate_wg[j * VP_C + c] = m.wgw[j * C + c];
		c_gate_bx[j] = m.wxb[j], c_gate_bg[j] = m.wgb[j], c_gate_psi[j] = m.psiw[j];
	}
	c_gate_psib[0] = m.psib[0];
	for (int k = 0; k < K; ++k) {
		for (int c = 0; c < C; ++c) c_head_w[k * VP_C + c] = m.hw[k * C + c];
		c_head_b[k] = m.hb[k];
	}
	return {};
}

int failures = 0;
#define CHECK(cond, ...)                          \
	do {                                          \
		if (!(cond)) {                            \
			if (failures++ < 20) {                \
				std::printf("FAIL: " __VA_ARGS__); \
				std::printf("\n");                \
			}                                     \
		}                                         \
	} while (0)

// packFused mirrors kernels/module_cuda.go's packFused: the fused kernel's weight buffer
// (VF_OFF_* layout in fused.cu), zero-padded to 16 channels, 8 gate units and 16 classes.
std::vector<float> packFused(const Model& m) {
	const int C = m.C, G = C / 2, K = m.K;
	std::vector<float> w(VF_WEIGHTS, 0.f);
	for (int co = 0; co < C; ++co) {
		for (int t = 0; t < 27; ++t) w[VF_OFF_W1 + t * 16 + co] = m.c1w[co * 27 + t];
		w[VF_OFF_B1 + co] = m.c1b[co], w[VF_OFF_B2 + co] = m.c2b[co], w[VF_OFF_BG + co] = m.cgb[co];
		for (int ci = 0; ci < C; ++ci)
			for (int t = 0; t < 27; ++t) {
				w[VF_OFF_W2 + (t * 16 + co) * 16 + ci] = m.c2w[(co * C + ci) * 27 + t];
				w[VF_OFF_WG + (t * 16 + co) * 16 + ci] = m.cgw[(co * C + ci) * 27 + t];
			}
	}
	for (int j = 0; j < G; ++j) {
		for (int c = 0; c < C; ++c) w[VF_OFF_GX + j * 16 + c] = m.wxw[j * C + c], w[VF_OFF_GG + j * 16 + c] = m.wgw[j * C + c];
		w[VF_OFF_GXB + j] = m.wxb[j], w[VF_OFF_GGB + j] = m.wgb[j], w[VF_OFF_PSI + j] = m.psiw[j];
	}
	w[VF_OFF_PSIB] = m.psib[0];
	for (int k = 0; k < K; ++k) {
		for (int c = 0; c < C; ++c) w[VF_OFF_HW + k * 16 + c] = m.hw[k * C + c];
		w[VF_OFF_HB + k] = m.hb[k];
	}
	return w;
}

// countConfidence launches count_confidence on a slab of nzOut planes of labels starting at
// plane z0, with the fused kernel's logits (words fp16 pairs a voxel) or none (nullptr), as the
// engine does (blocks of 256, a grid that leaves some warps without words, so the loops' bounds
// are exercised).
void countConfidence(unsigned char* lab, const unsigned* logits, int words, size_t plane, int z0, int nzOut, int K,
                     std::vector<unsigned long long>& cf) {
	const size_t n = plane * nzOut;
	const unsigned blocks = unsigned(std::min<size_t>(4, (n + 1023) / 1024));
	emu_launch(&count_confidence, dim3(blocks), dim3(256), (const unsigned char*)lab, logits, words, cf.data(), (long long)plane, z0, nzOut, K);
}

// Confidence is segment.Confidence as the kernels' VP_CONF_* counters hold it.
struct Confidence {
	unsigned long long fg = 0, margin = 0, low = 0;
	std::vector<unsigned long long> labels;
};

Confidence fromCounters(const std::vector<unsigned long long>& c, int K) {
	Confidence r{c[VP_CONF_FG], c[VP_CONF_MARGIN], c[VP_CONF_LOW], {}};
	for (int k = 0; k < K; ++k) r.labels.push_back(c[VP_CONF_LABELS + k]);
	for (int k = K; k < VP_MAXK; ++k) CHECK(c[VP_CONF_LABELS + k] == 0, "count_confidence counted %llu voxels of class %d of a %d-class model", c[VP_CONF_LABELS + k], k, K);
	return r;
}

// checkLabelCounts: the label counters hold exactly the labels' histogram, and the foreground
// counter the voxels beyond label 0 of the sampled planes (VP_CONF_STRIDE; planes of plane voxels).
void checkLabelCounts(const char* what, const Confidence& c, const std::vector<unsigned char>& labels, int K, size_t plane) {
	std::vector<unsigned long long> want(K, 0);
	unsigned long long fg = 0;
	for (size_t i = 0; i < labels.size(); ++i) {
		const unsigned char l = labels[i];
		if (l < K) ++want[l];
		if (l > 0 && l < K && vp_conf_plane((long long)(i / plane))) ++fg;
	}
	for (int k = 0; k < K; ++k)
		CHECK(c.labels[k] == want[k], "%s: count_confidence: class %d: %llu voxels, the labels have %llu", what, k, c.labels[k], want[k]);
	CHECK(c.fg == fg, "%s: %llu foreground voxels counted by the head, the labels have %llu", what, c.fg, fg);
}

// runFused segments the volume slab by slab with the fused kernel (zChunk output planes per
// block), exactly as segment's CUDA engine does with --precision fp16.
template <class T>
std::vector<unsigned char> runFused(const std::vector<float>& wts, const std::vector<T>& stored, int nx, int ny, int nz, int slab,
                                    int zChunk, float scale, float shift, int K, std::vector<unsigned long long>* conf = nullptr) {
	const size_t plane = size_t(nx) * ny;
	std::vector<T> in(size_t(slab + 6) * plane);
	// Labels padded to whole words, as the engine's label slot (guard bytes follow it):
	// count_confidence reads 4 at a time.
	std::vector<unsigned char> lab(size_t(slab) * plane + 4), out(plane * nz, 0xEE);
	// The sampled planes' logits, and a guard after them: nothing may be written there.
	const int words = K > VF_NARROW_CLASSES ? 8 : 4;
	const size_t marginPlanes = size_t(slab + VP_CONF_STRIDE - 1) / VP_CONF_STRIDE;
	std::vector<unsigned> logits(marginPlanes * plane * words + 64);
	std::vector<unsigned long long> cf(VP_CONF_LEN, 0);
	for (int z0 = 0; z0 < nz; z0 += slab) {
		const int z1 = std::min(nz, z0 + slab), nzOut = z1 - z0;
		const int lo = std::max(0, z0 - 3), hi = std::min(nz, z1 + 3);
		std::fill(in.begin(), in.end(), T(-7));
		std::memcpy(in.data() + size_t(lo - (z0 - 3)) * plane, stored.data() + size_t(lo) * plane, size_t(hi - lo) * plane * sizeof(T));
		std::fill(lab.begin(), lab.end(), 0xEE);
		std::fill(logits.begin(), logits.end(), 0xDEADBEEFu);
		const int chunk = std::min(zChunk, nzOut);
		const dim3 grid((nx + VF_TX - 1) / VF_TX, (ny + VF_ROWS - 1) / VF_ROWS, (nzOut + chunk - 1) / chunk);
		const bool wide = K > VF_NARROW_CLASSES;
		auto k = std::is_same<T, short>::value ? (wide ? (void*)&fused_i16_k16 : (void*)&fused_i16)
		                                       : (wide ? (void*)&fused_f32_k16 : (void*)&fused_f32);
		emu_launch_dyn((void (*)(const T*, unsigned char*, unsigned*, const float*, int, int, int, int, int, int, float, float, int))k, grid,
		           dim3(VF_THREADS), sizeof(VfSmem), (const T*)in.data(), lab.data(), logits.data(), wts.data(), nx, ny, nz, z0, nzOut, chunk, scale, shift, K);
		for (size_t i = size_t(nzOut) * plane; i < lab.size(); ++i) CHECK(lab[i] == 0xEE, "fused: label written past the slab at %zu", i);
		const size_t sampled = size_t(vp_margin_planes(z0, nzOut)) * plane * words;
		for (size_t i = 0; i < logits.size(); ++i)
			CHECK((i < sampled) == (logits[i] != 0xDEADBEEFu), "fused: logit word %zu of %zu of the sampled planes %s", i, sampled,
			      i < sampled ? "not written" : "written past them");
		countConfidence(lab.data(), logits.data(), words, plane, z0, nzOut, K, cf);
		std::memcpy(out.data() + size_t(z0) * plane, lab.data(), size_t(nzOut) * plane);
	}
	if (conf) *conf = cf;
	return out;
}

struct Vol {
	int nx, ny, nz, c;
	std::vector<double> d;
	Vol(int nx_, int ny_, int nz_, int c_) : nx(nx_), ny(ny_), nz(nz_), c(c_), d(size_t(nx_) * ny_ * nz_ * c_) {}
	double at(int ch, int z, int y, int x) const {
		if (z < 0 || z >= nz || y < 0 || y >= ny || x < 0 || x >= nx) return 0;
		return d[((size_t(ch) * nz + z) * ny + y) * nx + x];
	}
	double& ref(int ch, int z, int y, int x) { return d[((size_t(ch) * nz + z) * ny + y) * nx + x]; }
};

Vol conv3(const Vol& in, const std::vector<float>& w, const std::vector<float>& b, int cout, int dil) {
	Vol out(in.nx, in.ny, in.nz, cout);
	for (int co = 0; co < cout; ++co)
		for (int z = 0; z < in.nz; ++z)
			for (int y = 0; y < in.ny; ++y)
				for (int x = 0; x < in.nx; ++x) {
					double acc = b[co];
					for (int ci = 0; ci < in.c; ++ci)
						for (int dz = 0; dz < 3; ++dz)
							for (int dy = 0; dy < 3; ++dy)
								for (int dx = 0; dx < 3; ++dx)
									acc += double(w[(((co * in.c + ci) * 3 + dz) * 3 + dy) * 3 + dx]) *
									       in.at(ci, z + (dz - 1) * dil, y + (dy - 1) * dil, x + (dx - 1) * dil);
					out.ref(co, z, y, x) = std::max(acc, 0.0);
				}
	return out;
}

} // namespace
