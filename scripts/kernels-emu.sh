#!/usr/bin/env bash
# Runs voxpipe's CUDA kernels on the host through kernels/emu (no GPU needed): builds
# kernels/emu/emu_test.cpp with g++ (C++20) and compares the kernels' e, s, g and labels with a
# float64 reference on awkward sizes and slab cuts, and the fused fp16 kernel against both.
# Takes a few minutes on two cores. Arguments go to emu_test (fused: the fused kernel only);
# EMU_CFLAGS adds compiler flags, e.g. EMU_CFLAGS="-DVF_ROWS=12 -DVF_GATE_SPLIT=0" for the fused
# kernel as sm_80-89 build it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
g++ -std=c++20 -O2 -ffp-contract=off -Wall -Wno-unknown-pragmas -pthread ${EMU_CFLAGS:-} -x c++ \
	-o "$out/emu_test" kernels/emu/emu_test.cpp
"$out/emu_test" "$@"
