// wgmma_conv_bench: checks and times lab/wgmma/conv_wgmma.cu (the C = 16 3x3x3 convolutions
// on wgmma) on the GPU machine, against a naive fp32 reference of the same formula:
//
//   out(z,y,x)[co] = relu(b[co] + sum_ci sum_{dz,dy,dx} w[co][ci][dz][dy][dx] * e(z+D*(dz-1), y+D*(dy-1), x+D*(dx-1))[ci])
//
// Build and run there (nvcc >= 12):
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Xptxas -v -o wgmma_conv_bench wgmma_conv_bench.cu
//   ./wgmma_conv_bench [NX NY NZ [runs]]
// 1. awkward small volumes, D = 1 and 2: every output voxel against a CPU double reference
//    (fp16 inputs and weights, so only the summation order and the fp16 rounding of the output
//    differ);
// 2. NX x NY x NZ (default 512x512x1000), D = 1 and 2: every voxel against the naive GPU
//    reference, then the median of `runs` timed launches (CUDA events) and the TFLOP/s of the
//    convolution's 2*16*16*27 FLOP per voxel;
// Compile-time settings (lab/wgmma/conv_wgmma.cu): -DWG_N=16 or 48 (wgmma N), -DWG_R=rows
// per block, -DWG_MINB=blocks per SM for __launch_bounds__; -DWG_WS=1 checks and times the
// warp-specialised blocks of lab/wgmma/ws/conv_ws.cu instead (-DWS_NBUF: its ring of planes).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../conv_wgmma.cu"
#include "../ws/kernel_under_test.h"

#define CK(x)                                                                                    \
	do {                                                                                         \
		cudaError_t err_ = (x);                                                                  \
		if (err_ != cudaSuccess) {                                                               \
			fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(err_)); \
			exit(1);                                                                             \
		}                                                                                        \
	} while (0)

static uint32_t hash32(uint64_t x) {
	x ^= x >> 33, x *= 0xff51afd7ed558ccdULL, x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ULL, x ^= x >> 33;
	return (uint32_t)x;
}
__device__ __forceinline__ uint32_t dhash32(uint64_t x) {
	x ^= x >> 33, x *= 0xff51afd7ed558ccdULL, x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ULL, x ^= x >> 33;
	return (uint32_t)x;
}

// e: relu-like values in [0, 2) (e is a ReLU output), some zeros.
__global__ void fill_e(__half* e, size_t n, uint64_t seed) {
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		const uint32_t h = dhash32(i * 0x9E3779B97F4A7C15ULL + seed);
		const float v = (h & 3) == 0 ? 0.f : (float)(h >> 8) * (2.f / 16777216.f);
		e[i] = __float2half_rn(v);
	}
}

// The naive reference: one thread per output voxel and channel, fp32.
template <int D>
__global__ void conv_ref(const __half* e, const float* w /*[co][ci][27]*/, const float* b, float* out, int nx, int ny, int nz) {
	const size_t n = (size_t)nx * ny * nz * 16;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		const int co = i & 15;
		const size_t v = i >> 4;
		const int x = v % nx, y = (v / nx) % ny, z = v / ((size_t)nx * ny);
		float s = b[co];
		for (int t = 0; t < 27; ++t) {
			const int zz = z + D * (t / 9 - 1), yy = y + D * (t / 3 % 3 - 1), xx = x + D * (t % 3 - 1);
			if (zz < 0 || zz >= nz || yy < 0 || yy >= ny || xx < 0 || xx >= nx) continue;
			const __half* ev = e + (((size_t)zz * ny + yy) * nx + xx) * 16;
			for (int ci = 0; ci < 16; ++ci) s += w[(co * 16 + ci) * 27 + t] * __half2float(ev[ci]);
		}
		out[i] = fmaxf(s, 0.f);
	}
}

// Counts outputs that differ from the reference by more than fp16 rounding plus summation order.
__global__ void compare(const __half* got, const float* want, size_t n, unsigned long long* bad, float* maxerr) {
	unsigned long long nbad = 0;
	float m = 0.f;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		const float g = __half2float(got[i]), r = want[i];
		const float err = g == g ? fabsf(g - r) : 1e30f; // NaN: never written
		nbad += err > 2e-3f + 2e-3f * fabsf(r);
		m = fmaxf(m, err);
	}
	if (nbad) atomicAdd(bad, nbad);
	atomicMax((int*)maxerr, __float_as_int(m)); // m >= 0: int order is float order
}

struct Weights {
	std::vector<float> w, b;      // w[co][ci][27] (fp16-representable), b[16]
	std::vector<uint8_t> sm;      // the 27 taps in wgmma's shared-memory layout
};
static Weights make_weights(uint64_t seed) {
	Weights W;
	W.w.resize(16 * 16 * 27), W.b.resize(16), W.sm.assign(wg::W_BYTES, 0);
	for (size_t i = 0; i < W.w.size(); ++i) {
		const float v = ((float)(hash32(i + seed) >> 8) / 16777216.f - 0.5f) * 0.2f;
		W.w[i] = __half2float(__float2half_rn(v));
	}
	for (int i = 0; i < 16; ++i) W.b[i] = ((float)(hash32(i + seed * 7 + 1) >> 8) / 16777216.f - 0.6f) * 0.5f;
	wg::pack_weights<__half>(W.w.data(), W.sm.data(), [](float v) { return __float2half_rn(v); });
	return W;
}

template <int D>
static void launch(const __half* e, const uint8_t* wsm, const float* b, __half* out, int nx, int ny, int nz, cudaStream_t s = 0) {
	const int np = (nz + D - 1) / D; // planes of parity 0, the most
	dim3 grid((nx + wg::TX - 1) / wg::TX, (ny + kRows - 1) / kRows, ((np + WG_CHUNK - 1) / WG_CHUNK) * D);
	KERNEL(D)<<<grid, kThreads, Kern<D>::SMEM_BYTES, s>>>(e, wsm, b, out, nx, ny, nz);
}

template <int D>
static void setup() {
	CK(cudaFuncSetAttribute(KERNEL(D), cudaFuncAttributeMaxDynamicSharedMemorySize, Kern<D>::SMEM_BYTES));
}

// Small volumes: the whole output against a CPU double reference.
template <int D>
static bool check_small(int nx, int ny, int nz, uint64_t seed) {
	const size_t nv = (size_t)nx * ny * nz, n = nv * 16;
	std::vector<__half> he(n);
	std::vector<float> fe(n);
	for (size_t i = 0; i < n; ++i) {
		const uint32_t h = hash32(i * 31 + seed);
		fe[i] = (h & 3) == 0 ? 0.f : __half2float(__float2half_rn((float)(h >> 8) * (2.f / 16777216.f)));
		he[i] = __float2half_rn(fe[i]);
	}
	Weights W = make_weights(seed + 5);
	__half *de, *dout;
	uint8_t* dw;
	float* db;
	CK(cudaMalloc(&de, n * 2)); CK(cudaMalloc(&dout, n * 2)); CK(cudaMalloc(&dw, W.sm.size())); CK(cudaMalloc(&db, 64));
	CK(cudaMemcpy(de, he.data(), n * 2, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dw, W.sm.data(), W.sm.size(), cudaMemcpyHostToDevice));
	CK(cudaMemcpy(db, W.b.data(), 64, cudaMemcpyHostToDevice));
	CK(cudaMemset(dout, 0xFF, n * 2)); // NaN: unwritten outputs fail
	launch<D>(de, dw, db, dout, nx, ny, nz);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	std::vector<__half> ho(n);
	CK(cudaMemcpy(ho.data(), dout, n * 2, cudaMemcpyDeviceToHost));
	size_t bad = 0;
	double maxerr = 0;
	for (int z = 0; z < nz; ++z)
		for (int y = 0; y < ny; ++y)
			for (int x = 0; x < nx; ++x)
				for (int co = 0; co < 16; ++co) {
					double s = W.b[co];
					for (int t = 0; t < 27; ++t) {
						const int zz = z + D * (t / 9 - 1), yy = y + D * (t / 3 % 3 - 1), xx = x + D * (t % 3 - 1);
						if (zz < 0 || zz >= nz || yy < 0 || yy >= ny || xx < 0 || xx >= nx) continue;
						const float* ev = &fe[(((size_t)zz * ny + yy) * nx + xx) * 16];
						for (int ci = 0; ci < 16; ++ci) s += (double)W.w[(co * 16 + ci) * 27 + t] * ev[ci];
					}
					const double want = std::max(s, 0.0);
					const double got = __half2float(ho[(((size_t)z * ny + y) * nx + x) * 16 + co]);
					const double err = std::isnan(got) ? 1e30 : std::fabs(got - want);
					maxerr = std::max(maxerr, err);
					if (err > 2e-3 + 2e-3 * std::fabs(want)) {
						if (bad < 5)
							printf("  D=%d %dx%dx%d: (%d,%d,%d) co %d: got %g want %g\n", D, nx, ny, nz, x, y, z, co, got, want);
						++bad;
					}
				}
	printf("check D=%d %dx%dx%d: %zu of %zu outputs off, max |err| %.3g\n", D, nx, ny, nz, bad, n, maxerr);
	CK(cudaFree(de)); CK(cudaFree(dout)); CK(cudaFree(dw)); CK(cudaFree(db));
	return bad == 0;
}

template <int D>
static double timed(const __half* e, const uint8_t* dw, const float* db, __half* out, int nx, int ny, int nz, int runs) {
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
	std::vector<float> ms;
	for (int i = 0; i < runs; ++i) {
		CK(cudaEventRecord(a));
		launch<D>(e, dw, db, out, nx, ny, nz);
		CK(cudaEventRecord(b));
		CK(cudaEventSynchronize(b));
		float t;
		CK(cudaEventElapsedTime(&t, a, b));
		ms.push_back(t);
	}
	std::sort(ms.begin(), ms.end());
	return ms[ms.size() / 2];
}

template <int D>
static bool big(int nx, int ny, int nz, int runs) {
	const size_t nv = (size_t)nx * ny * nz, n = nv * 16;
	__half *de, *dout;
	float *dref, *dwf, *db, *dmax;
	uint8_t* dw;
	unsigned long long* dbad;
	Weights W = make_weights(99 + D);
	CK(cudaMalloc(&de, n * 2)); CK(cudaMalloc(&dout, n * 2)); CK(cudaMalloc(&dref, n * 4));
	CK(cudaMalloc(&dw, W.sm.size())); CK(cudaMalloc(&dwf, W.w.size() * 4)); CK(cudaMalloc(&db, 64));
	CK(cudaMalloc(&dbad, 8)); CK(cudaMalloc(&dmax, 4));
	fill_e<<<4096, 256>>>(de, n, 1234 + D);
	CK(cudaMemcpy(dw, W.sm.data(), W.sm.size(), cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dwf, W.w.data(), W.w.size() * 4, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(db, W.b.data(), 64, cudaMemcpyHostToDevice));
	CK(cudaMemset(dout, 0xFF, n * 2)); CK(cudaMemset(dbad, 0, 8)); CK(cudaMemset(dmax, 0, 4));
	launch<D>(de, dw, db, dout, nx, ny, nz);
	CK(cudaGetLastError());
	conv_ref<D><<<8192, 256>>>(de, dwf, db, dref, nx, ny, nz);
	compare<<<8192, 256>>>(dout, dref, n, dbad, dmax);
	CK(cudaDeviceSynchronize());
	unsigned long long bad;
	float maxerr;
	CK(cudaMemcpy(&bad, dbad, 8, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&maxerr, dmax, 4, cudaMemcpyDeviceToHost));
	const double ms = timed<D>(de, dw, db, dout, nx, ny, nz, runs);
	const double flop = 2.0 * 16 * 16 * 27 * (double)nv;
	printf("big D=%d %dx%dx%d: %llu of %zu outputs off vs the GPU reference (max |err| %.3g); %.3f ms, %.0f TFLOP/s, %.2f TB/s (in + out once)\n",
	       D, nx, ny, nz, bad, n, maxerr, ms, flop / ms / 1e9, 4.0 * n / ms / 1e9);
	CK(cudaFree(dref));
	CK(cudaFree(de)); CK(cudaFree(dout)); CK(cudaFree(dw)); CK(cudaFree(dwf)); CK(cudaFree(db));
	return bad == 0;
}

int main(int argc, char** argv) {
	int nx = 512, ny = 512, nz = 1000, runs = 7;
	if (argc >= 4) nx = atoi(argv[1]), ny = atoi(argv[2]), nz = atoi(argv[3]);
	if (argc >= 5) runs = atoi(argv[4]);
	setup<1>(), setup<2>();
	bool ok = true;
	ok &= check_small<1>(100, 37, 23, 1), ok &= check_small<2>(100, 37, 23, 2);
	ok &= check_small<1>(64, 4, 1, 3), ok &= check_small<2>(130, 9, 70, 4);
	ok &= check_small<1>(5, 3, 2, 5), ok &= check_small<2>(70, 6, 131, 6);
	ok &= big<1>(nx, ny, nz, runs), ok &= big<2>(nx, ny, nz, runs);
	printf("settings: N=%d R=%d MINB=%d CHUNK=%d WS=%d\n", WG_N, WG_R, WG_MINB, WG_CHUNK, WG_WS);
	printf(ok ? "wgmma_conv_bench: all outputs match\n" : "wgmma_conv_bench: MISMATCH\n");
	return ok ? 0 : 1;
}
