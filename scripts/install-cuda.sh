#!/usr/bin/env bash
# Installs what the `cuda` build of voxpipe needs on Debian 12 (the development machine and CI):
# cuda.h, libcuda.so (link-time stub from the driver package) and nvcc 11.8, all from Debian's
# non-free component. Idempotent: does nothing when cuda.h and nvcc are already present.
# No GPU is needed to build; the binaries run on a GPU machine (see docs/gpu-engine.md).
set -euo pipefail

have_cuda_h() { [[ -f /usr/include/cuda.h || -f /usr/local/cuda/include/cuda.h ]]; }

if have_cuda_h && command -v nvcc >/dev/null 2>&1; then
	echo "install-cuda: cuda.h and nvcc present ($(nvcc --version | tail -n 2 | head -n 1)); nothing to do"
	exit 0
fi

if [[ ! -r /etc/os-release ]] || ! grep -q '^ID=debian' /etc/os-release; then
	echo "install-cuda: this script knows Debian only; install the CUDA toolkit (11.x or 12.x) yourself" >&2
	exit 1
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
	SUDO="sudo"
fi

# Enable contrib/non-free in whichever sources format the system uses.
if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
	$SUDO sed -i 's/^Components: main$/Components: main contrib non-free non-free-firmware/' \
		/etc/apt/sources.list.d/debian.sources
fi
if [[ -f /etc/apt/sources.list ]]; then
	$SUDO sed -i -E '/^deb /{/ non-free( |$)/! s/ main( |$)/ main contrib non-free non-free-firmware\1/}' \
		/etc/apt/sources.list
fi

$SUDO apt-get update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends nvidia-cuda-toolkit

have_cuda_h || { echo "install-cuda: cuda.h still missing after install" >&2; exit 1; }
command -v nvcc >/dev/null || { echo "install-cuda: nvcc still missing after install" >&2; exit 1; }
echo "install-cuda: done ($(nvcc --version | tail -n 2 | head -n 1))"
