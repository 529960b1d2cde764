// Checks lab/wgmma/conv_wgmma.cu (conv_wgmma_d1, conv_wgmma_d2: the C = 16 3x3x3 convolutions
// on wgmma) on the host through the emulator (emu.h, emu_sm90.h): its tiling, halo, z chunks and
// parities, accumulator slot rotation, the weights' shared-memory image against the descriptor
// and the fragment layouts. Awkward small volumes, launched with wgmma_conv_bench.cu's grid;
// every output voxel against a CPU double reference (wgmma_conv_bench's check_small: fp16 inputs
// and weights, tolerance 2e-3 + 2e-3 |want| for the fp16 output rounding), outputs prefilled
// with NaN (each must be written), NaN guards around the input (a read outside it poisons an
// output) and the output (no write outside it). Exit status 0 when everything agrees.
// Compile-time settings as the kernel's: -DWG_N, -DWG_R, -DWG_CHUNK (a small chunk makes small
// volumes cross chunk boundaries); -DWG_WS=1 checks lab/wgmma/ws/conv_ws.cu's warp-specialised
// blocks instead (their producer/consumer hand-off through named barriers; -DWS_NBUF). Built
// and run by scripts/kernels-emu.sh.
#include "../../../engine/cuda/kernels/emu/emu_sm90.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "../conv_wgmma.cu"
#include "../ws/kernel_under_test.h" // Kern, kThreads, kRows, KERNEL: the bench's launch shape

namespace {

uint32_t hash32(uint64_t x) {
	x ^= x >> 33, x *= 0xff51afd7ed558ccdULL, x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ULL, x ^= x >> 33;
	return (uint32_t)x;
}

constexpr size_t GUARD = 4096; // fp16 NaN elements before and after the input and the output
constexpr unsigned short NAN_BITS = 0xFFFF;

int failures = 0;

// check runs the kernel (KERNEL) with dilation D on an nx x ny x nz volume and compares every
// output with the double reference; false on any mismatch.
template <int D>
bool check(int nx, int ny, int nz, uint64_t seed) {
	using K = Kern<D>;
	const size_t n = size_t(nx) * ny * nz * 16;
	// e: relu-like fp16 values in [0, 2), a quarter zeros (wgmma_conv_bench's check_small).
	std::vector<__half> e(GUARD + n + GUARD, __half{NAN_BITS});
	std::vector<float> fe(n);
	for (size_t i = 0; i < n; ++i) {
		const uint32_t h = hash32(i * 31 + seed);
		const __half v = __float2half_rn((h & 3) == 0 ? 0.f : float(h >> 8) * (2.f / 16777216.f));
		e[GUARD + i] = v, fe[i] = __half2float(v);
	}
	// weights w[co][ci][27], fp16-representable, and their shared-memory image; bias.
	std::vector<float> w(16 * 16 * 27), b(16);
	for (size_t i = 0; i < w.size(); ++i)
		w[i] = __half2float(__float2half_rn((float(hash32(i + seed + 5) >> 8) / 16777216.f - 0.5f) * 0.2f));
	for (int i = 0; i < 16; ++i) b[i] = (float(hash32(i + (seed + 5) * 7 + 1) >> 8) / 16777216.f - 0.6f) * 0.5f;
	alignas(16) static uint8_t img[wg::W_BYTES];
	std::memset(img, 0, sizeof img);
	wg::pack_weights<__half>(w.data(), img, [](float v) { return __float2half_rn(v); });

	std::vector<__half> out(GUARD + n + GUARD, __half{NAN_BITS});
	// wgmma_conv_bench's launch<D>
	const int np = (nz + D - 1) / D;
	const dim3 grid((nx + wg::TX - 1) / wg::TX, (ny + kRows - 1) / kRows, ((np + WG_CHUNK - 1) / WG_CHUNK) * D);
	emu_launch_dyn(KERNEL(D), grid, dim3(kThreads), size_t(K::SMEM_BYTES), (const __half*)(e.data() + GUARD),
	               (const uint8_t*)img, (const float*)b.data(), out.data() + GUARD, nx, ny, nz);

	size_t bad = 0, guard = 0;
	double maxerr = 0;
	for (size_t i = 0; i < GUARD; ++i) guard += (out[i].x != NAN_BITS) + (out[GUARD + n + i].x != NAN_BITS);
	for (int z = 0; z < nz; ++z)
		for (int y = 0; y < ny; ++y)
			for (int x = 0; x < nx; ++x)
				for (int co = 0; co < 16; ++co) {
					double s = b[co];
					for (int t = 0; t < 27; ++t) {
						const int zz = z + D * (t / 9 - 1), yy = y + D * (t / 3 % 3 - 1), xx = x + D * (t % 3 - 1);
						if (zz < 0 || zz >= nz || yy < 0 || yy >= ny || xx < 0 || xx >= nx) continue;
						const float* ev = &fe[((size_t(zz) * ny + yy) * nx + xx) * 16];
						for (int ci = 0; ci < 16; ++ci) s += double(w[(co * 16 + ci) * 27 + t]) * ev[ci];
					}
					const double want = std::max(s, 0.0);
					const double got = __half2float(out[GUARD + ((size_t(z) * ny + y) * nx + x) * 16 + co]);
					const double err = std::isnan(got) ? 1e30 : std::fabs(got - want);
					maxerr = std::max(maxerr, err);
					if (err > 2e-3 + 2e-3 * std::fabs(want)) {
						if (bad < 5) std::printf("  D=%d %dx%dx%d: (x %d, y %d, z %d) co %d: got %g want %g\n", D, nx, ny, nz, x, y, z, co, got, want);
						++bad;
					}
				}
	std::printf("D=%d %3dx%3dx%3d (grid %ux%ux%u): %zu of %zu outputs off, max |err| %.3g, %zu written outside\n", D, nx, ny, nz, grid.x, grid.y,
	            grid.z, bad, n, maxerr, guard);
	if (bad || guard) ++failures;
	return !bad && !guard;
}

} // namespace

int main() {
	const auto t0 = std::chrono::steady_clock::now();
	std::printf("%s in the emulator: WG_N=%d WG_R=%d WG_CHUNK=%d, %d bytes of shared memory (D=1), %d (D=2)\n", WG_WS ? "conv_ws" : "conv_wgmma", WG_N,
	            WG_R, WG_CHUNK, Kern<1>::SMEM_BYTES, Kern<2>::SMEM_BYTES);
	// x not a multiple of 64 (and one voxel past it), y not a multiple of R, z crossing chunks
	// (both parities with D = 2, odd and even depths), one plane, volumes smaller than the halo.
	for (uint64_t s = 1; s <= 2; ++s) {
		check<1>(100, 37, 11, s), check<2>(100, 37, 11, s + 10);
	}
	check<1>(65, 6, 2 * WG_CHUNK + 3, 3), check<2>(65, 6, 4 * WG_CHUNK + 1, 4), check<2>(70, 9, 4 * WG_CHUNK + 2, 5);
	check<1>(64, 4, 1, 6), check<2>(64, 4, 1, 7); // one plane: with D = 2 parity 1 has none
	check<2>(40, 5, 2, 8);                        // one plane per parity
	check<1>(5, 3, 2, 9), check<2>(5, 3, 3, 10);  // smaller than a tile and its halo
	check<1>(130, 1, 7, 11), check<2>(3, 11, 9, 12);
	const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	std::printf("%llu wgmma executed (per warpgroup), %.1f s\n", emu::sm90::wgmmaExecuted, sec);
	if (failures) {
		std::printf("FAILED: %d volumes\n", failures);
		return 1;
	}
	std::printf("PASS\n");
	return 0;
}
