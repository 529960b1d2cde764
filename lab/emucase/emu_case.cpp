// emu_case runs the fused kernel on the host emulator (engine/cuda/kernels/emu) over case
// files: a phantom, a model and the CPU engine's mask of it (written by dumpcase), and reports
// its agreement with that mask and the Dice of both against the phantom's truth: the fused
// kernel on realistic data without a GPU. A diagnostic, not a check: it fails only on a case
// file it cannot read. Built and run by `scripts/kernels-emu.sh case FILE...`.
#include "../../engine/cuda/kernels/emu/emu.h"

#include <cstdio>
#include <vector>

#include "../../engine/cuda/kernels/voxpipe.cu"

#include "../../engine/cuda/kernels/emu/emu_ref.h"

namespace {

// runCase segments a case file (a phantom, a model and a reference mask, written by a helper
// such as lab/emucase/dumpcase: int32 nx ny nz C K, float32 scale shift, the model's tensors in
// PyTorch layouts, int16 volume, uint8 reference mask, uint8 truth) with the fused kernel and
// reports its agreement with the reference mask and the Dice of both against the truth.
void runCase(const char* path, int slab) {
	FILE* f = std::fopen(path, "rb");
	if (!f) {
		std::printf("FAIL: open %s\n", path);
		++failures;
		return;
	}
	int hdr[5];
	float ns[2];
	bool ok = std::fread(hdr, 4, 5, f) == 5 && std::fread(ns, 4, 2, f) == 2;
	const int nx = hdr[0], ny = hdr[1], nz = hdr[2];
	Model m{hdr[3], hdr[4]};
	const int C = m.C, G = C / 2, K = m.K;
	auto rd = [&](std::vector<float>& v, size_t n) { v.resize(n); ok = ok && std::fread(v.data(), 4, n, f) == n; };
	rd(m.c1w, C * 27), rd(m.c1b, C), rd(m.c2w, C * C * 27), rd(m.c2b, C), rd(m.cgw, C * C * 27), rd(m.cgb, C);
	rd(m.wxw, G * C), rd(m.wxb, G), rd(m.wgw, G * C), rd(m.wgb, G), rd(m.psiw, G), rd(m.psib, 1), rd(m.hw, K * C), rd(m.hb, K);
	const size_t n = size_t(nx) * ny * nz;
	std::vector<short> vol(n);
	std::vector<unsigned char> ref(n), truth(n);
	ok = ok && std::fread(vol.data(), 2, n, f) == n && std::fread(ref.data(), 1, n, f) == n && std::fread(truth.data(), 1, n, f) == n;
	std::fclose(f);
	if (!ok) {
		std::printf("FAIL: short case file %s\n", path);
		++failures;
		return;
	}
	const std::vector<unsigned char> got = runFused<short>(packFused(m), vol, nx, ny, nz, slab, slab, ns[0], ns[1], K);
	auto dice = [&](const std::vector<unsigned char>& a, const std::vector<unsigned char>& b) {
		double sum = 0;
		for (int k = 0; k < K; ++k) {
			size_t na = 0, nb = 0, both = 0;
			for (size_t i = 0; i < n; ++i) na += a[i] == k, nb += b[i] == k, both += a[i] == k && b[i] == k;
			sum += na + nb ? 2.0 * both / double(na + nb) : 1.0;
		}
		return sum / K;
	};
	size_t diff = 0;
	for (size_t i = 0; i < n; ++i) diff += got[i] != ref[i];
	std::printf("case %s (%dx%dx%d, C=%d K=%d): fused vs reference mask: %zu of %zu differ (%.4f%% agree, mean Dice %.5f); Dice vs truth: fused %.4f, reference %.4f\n",
	            path, nx, ny, nz, C, K, diff, n, 100 * (1 - double(diff) / n), dice(got, ref), dice(got, truth), dice(ref, truth));
}

} // namespace

int main(int argc, char** argv) {
	if (argc < 2) {
		std::fprintf(stderr, "usage: emu_case FILE...\n");
		return 2;
	}
	for (int i = 1; i < argc; ++i) runCase(argv[i], 32);
	if (failures) {
		std::printf("FAILED: %d checks\n", failures);
		return 1;
	}
	std::printf("PASS\n");
	return 0;
}
