// Checks voxpipe's CUDA kernels on the host (see emu.h): random models (with C < 16 and K < 16
// exercising the zero padding), random volumes of awkward sizes, int16 and float32 inputs, cut
// into slabs exactly as segment's CUDA engine does; e, s, g and the labels are compared with a
// float64 reference of the network computed straight from segment/model.go's specification.
// Exit status 0 when everything agrees. Run through scripts/kernels-emu.sh.
#include "emu.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

#include "../voxpipe.cu"

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

template <class T>
void run(const Model& m, int nx, int ny, int nz, int slab) {
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
	std::vector<unsigned char> lab(size_t(S) * plane, 0xEE);
	std::vector<unsigned char> out(n, 0xEE);

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
		emu_launch(&gate_head, dim3(unsigned((nv + 255) / 256)), dim3(256), (const float*)sb.data(), (const float*)gb.data(), lab.data(), nx, ny, nzOut, S, m.K);
		std::memcpy(out.data() + size_t(z0) * plane, lab.data(), nv);
		for (size_t i = nv; i < lab.size(); ++i) CHECK(lab[i] == 0xEE, "label written past the slab at %zu", i);
	}
	// Labels against the float64 reference, near-ties (top-2 logits within 1e-4 relative) allowed.
	const int G = m.C / 2;
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
	std::printf("%-5s C=%-2d K=%-2d %3dx%3dx%3d slab %3d: max rel err e %.2g s %.2g g %.2g; labels: %d wrong, %d near-ties of %zu\n",
	            std::is_same<T, short>::value ? "int16" : "f32", m.C, m.K, nx, ny, nz, slab, maxErrE, maxErrS, maxErrG, labelMismatch, nearTies, n);
}

} // namespace

int main() {
	const Model m16 = randomModel(16, 4), m6 = randomModel(6, 3);
	run<short>(m16, 37, 53, 29, 7);
	run<float>(m16, 37, 53, 29, 29);
	run<short>(m16, 37, 53, 29, 1);
	run<float>(m16, 37, 53, 29, 64);
	run<float>(m6, 33, 9, 6, 4);
	run<short>(m6, 5, 70, 3, 2);
	if (failures) {
		std::printf("FAILED: %d checks\n", failures);
		return 1;
	}
	std::printf("PASS\n");
	return 0;
}
