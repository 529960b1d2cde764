#!/usr/bin/env bash
# Builds, on the development machine, what scripts/gpu-check.sh runs on the GPU machine:
# bin/voxpipe-cuda (when cmd/voxpipe builds; skipped with a warning otherwise) and the cuda-tagged
# test binaries bin/segment.test and bin/kernels.test. Needs the CUDA headers and libcuda.so
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
go test -c -tags cuda -o bin/segment.test ./segment
go test -c -tags cuda -o bin/kernels.test ./kernels
echo "gpu-build: bin/segment.test bin/kernels.test"
# Kernel variants under study (kernels/experiments), timed by gpu-check when present.
if [[ "${GPU_BUILD_EXPERIMENTS:-1}" != 0 ]] && command -v nvcc >/dev/null; then
	(cd kernels/experiments && nvcc -fatbin -O3 -gencode arch=compute_90,code=sm_90 \
		-o ../../bin/experiments.fatbin conv_variants.cu)
	echo "gpu-build: bin/experiments.fatbin"
fi
ls -l bin
