#!/usr/bin/env bash
# Builds, on the development machine, what scripts/gpu-check.sh runs on the GPU machine:
# bin/voxpipe-cuda (when cmd/voxpipe builds; skipped with a warning otherwise) and the cuda-tagged
# test binaries bin/cuda.test, bin/kernels.test, bin/pinned.test (internal/hostmem) and
# bin/bench.test (lab/bench). Needs the CUDA headers and libcuda.so
# (scripts/install-cuda.sh). bin/ is git-ignored: carry it to the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=1
mkdir -p bin
if go build -tags cuda -o bin/voxpipe-cuda ./cmd/voxpipe; then
	echo "gpu-build: bin/voxpipe-cuda"
else
	rm -f bin/voxpipe-cuda
	echo "gpu-build: warning: cmd/voxpipe does not build with -tags cuda; bin/voxpipe-cuda skipped" >&2
fi
go test -c -tags cuda -o bin/cuda.test ./engine/cuda
go test -c -tags cuda -o bin/kernels.test ./engine/cuda/kernels
go test -c -tags cuda -o bin/pinned.test ./internal/hostmem # BenchmarkPinnedCost
go test -c -tags cuda -o bin/bench.test ./lab/bench
echo "gpu-build: bin/cuda.test bin/kernels.test bin/pinned.test bin/bench.test"
# Kernel variants under study, timed by gpu-check when present: the float32 convs
# (lab/bench/conv_variants.cu, GPU_BUILD_CONV_VARIANTS=1) and builds of the fused kernel with other
# compile-time settings (lab/bench/fused_variants_cuda_test.go; each build's tile rows, threads and
# shared memory come from its fused_geometry; full-*: same labels; prec-*: other arithmetic;
# skip-*: a stage left out, from a copy of fused.cu patched with lab/patches/fused-skip.patch),
# listed in bin/fused-variants.txt. GPU_BUILD_FUSED_VARIANTS="name:flags[:source.cu] ..." (flags
# joined by commas) chooses them.
if [[ "${GPU_BUILD_EXPERIMENTS:-1}" != 0 ]] && command -v nvcc >/dev/null; then
	rm -f bin/experiments.fatbin bin/fused-*.fatbin
	if [[ "${GPU_BUILD_CONV_VARIANTS:-0}" != 0 ]]; then
		(cd lab/bench && nvcc -fatbin -O3 -gencode arch=compute_90,code=sm_90 \
			-o ../../bin/experiments.fatbin conv_variants.cu)
		echo "gpu-build: bin/experiments.fatbin"
	fi
	# The mma.sync ceiling (BenchmarkMMAPeak).
	(cd lab/bench && nvcc -fatbin -O3 -gencode arch=compute_90,code=sm_90 -o ../../bin/mma-peak.fatbin mma_peak.cu)
	variants=()
	for v in ${GPU_BUILD_FUSED_VARIANTS:-full-r12:-DVF_ROWS=12 prec-nosplit:-DVF_HEAD_SPLIT=0}; do
		# name:flags[:source] (source: another .cu file, e.g. an older fused.cu to compare with)
		IFS=: read -r name flags src <<<"$v"
		src=${src:-engine/cuda/kernels/fused.cu}
		nvcc -fatbin -O3 -gencode arch=compute_90,code=sm_90 -I engine/cuda/kernels ${flags//,/ } -o "bin/fused-$name.fatbin" "$src"
		variants+=("$name=bin/fused-$name.fatbin")
	done
	(IFS=,; echo "${variants[*]}") >bin/fused-variants.txt
	echo "gpu-build: fused variants: $(cat bin/fused-variants.txt)"
fi
ls -l bin
