#!/usr/bin/env bash
# Compiles engine/cuda/kernels/*.cu (through the unity file engine/cuda/kernels/voxpipe.cu)
# into one fatbin: SASS for sm_80, sm_86, sm_89, sm_90 and PTX for compute_80 (JIT for anything
# newer). Called by `go generate ./engine/cuda/kernels` and by scripts/check-fatbin.sh. Usage:
# build-fatbin.sh [output] (default engine/cuda/kernels/voxpipe.fatbin). The committed fatbin is
# built with nvcc 11.8 (Debian 12's nvidia-cuda-toolkit, scripts/install-cuda.sh); the output is deterministic for a given nvcc, so
# fixed flags, relative paths and a fixed locale are all it needs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/engine/cuda/kernels/voxpipe.fatbin}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

want="release 11.8,"
if ! command -v nvcc >/dev/null; then
	echo "build-fatbin: nvcc not found (run scripts/install-cuda.sh)" >&2
	exit 1
fi
if ! nvcc --version | grep -q "$want"; then
	echo "build-fatbin: warning: nvcc is not 11.8 ($(nvcc --version | grep release)); the result will differ from the committed fatbin" >&2
fi

cd "$root/engine/cuda/kernels"
export LC_ALL=C
nvcc -fatbin -O3 \
	-gencode arch=compute_80,code=sm_80 \
	-gencode arch=compute_86,code=sm_86 \
	-gencode arch=compute_89,code=sm_89 \
	-gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_80,code=compute_80 \
	-o "$out" voxpipe.cu
