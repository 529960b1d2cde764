#!/usr/bin/env bash
# Runs voxpipe's CUDA kernels on the host through kernels/emu (no GPU needed): builds
# kernels/emu/emu_test.cpp with g++ (C++20) and compares the kernels' e, s, g and labels with a
# float64 reference on awkward sizes and slab cuts. Takes a minute or so on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
g++ -std=c++20 -O2 -ffp-contract=off -Wall -Wno-unknown-pragmas -pthread -x c++ \
	-o "$out/emu_test" kernels/emu/emu_test.cpp
"$out/emu_test"
