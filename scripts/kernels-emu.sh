#!/usr/bin/env bash
# Runs voxpipe's CUDA kernels on the host through the emulator (engine/cuda/kernels/emu; no GPU
# needed), built with g++ (C++20):
# - engine/cuda/kernels/emu/emu_test.cpp compares the kernels' e, s, g and labels with a float64
#   reference on awkward sizes and slab cuts, and the fused fp16 kernel against both; and the
#   model's confidence gate_head and count_confidence accumulate (segment.Confidence: the margins
#   of every eighth plane, from gate_head's float32 logits or the fused kernel's stored fp16 ones,
#   reduced per warp; label counts per class with __vcmpeq4) with the float64 reference's, the
#   label counts exactly, the fused kernel's the same for every z-chunk cut, its stored logits
#   covering the sampled planes exactly (a few minutes on two cores);
# - the fused kernel as sm_90a builds it (-DVF_WGMMA=1: its convs on wgmma through
#   engine/cuda/kernels/emu/emu_sm90.h), on the fused cases;
# - lab/wgmma/emu/emu_wgmma_test.cpp runs the lab's sm_90a wgmma convolutions
#   (lab/wgmma/conv_wgmma.cu, both dilations) on awkward small volumes against a double reference,
#   once per build setting below: the committed GPU build's (WG_N=48, WG_R=6, WG_CHUNK=64), small z
#   chunks so that chunk boundaries are crossed, N = 16, and R = 2; then lab/wgmma/ws/conv_ws.cu
#   (the same convolutions in warp-specialised blocks: a producer warpgroup and two consumers
#   handing planes over through named barriers), at N = 48 and at N = 16, R = 2 with a ring of
#   two (about a minute in all).
# No argument: both. `wgmma`: the wgmma checks only. `case FILE...`: lab/emucase/emu_case.cpp on
# case files from lab/emucase/dumpcase (a diagnostic: agreement with the CPU engine's mask). Any
# other arguments go to emu_test (fused: the fused kernel only; k16). EMU_CFLAGS adds compiler flags to emu_test, e.g.
# EMU_CFLAGS="-DVF_ROWS=12 -DVF_GATE_SPLIT=0" for the fused kernel as sm_80-89 build it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cxx=(g++ -std=c++20 -O2 -ffp-contract=off -fno-strict-aliasing -Wall -Wno-unknown-pragmas -pthread)

emu_test() {
	# shellcheck disable=SC2086 # EMU_CFLAGS holds separate flags
	"${cxx[@]}" ${EMU_CFLAGS:-} -x c++ -o "$out/emu_test" engine/cuda/kernels/emu/emu_test.cpp
	"$out/emu_test" "$@"
}

wgmma_tests() {
	# The fused kernel as sm_90a builds it (its convs on wgmma; then conv2 at N = 16, the dilated
	# conv in parity rings at N = 48, and the dilated conv alone on wgmma):
	# the same checks as the mma.sync build's, and the same labels (the emulator sums a wgmma's
	# products in the order of the mma.sync it replaces).
	local build
	EMU_CFLAGS= emu_test fused | tee "$out/fused-mma.txt"
	for build in "-DVF_WGMMA=1" "-DVF_WGMMA=1 -DVF_WG_N2=16" "-DVF_WGMMA=1 -DVF_WG_GPAR=1" "-DVF_WGMMA=1 -DVF_WG_CONV2=0"; do
		EMU_CFLAGS="$build" emu_test fused | tee "$out/fused-wgmma.txt"
		if ! diff <(grep -o 'labels fnv [0-9a-f]*' "$out/fused-mma.txt") <(grep -o 'labels fnv [0-9a-f]*' "$out/fused-wgmma.txt"); then
			echo "kernels-emu: the fused kernel's labels differ between the mma.sync and the wgmma ($build) builds" >&2
			exit 1
		fi
	done
	local settings
	for settings in "" "-DWG_CHUNK=5" "-DWG_N=16 -DWG_CHUNK=4" "-DWG_R=2 -DWG_CHUNK=3" \
		"-DWG_WS=1 -DWG_CHUNK=5" "-DWG_WS=1 -DWS_NBUF=2 -DWG_N=16 -DWG_R=2 -DWG_CHUNK=3"; do
		# shellcheck disable=SC2086 # settings are separate flags
		"${cxx[@]}" $settings -x c++ -o "$out/emu_wgmma_test" lab/wgmma/emu/emu_wgmma_test.cpp
		"$out/emu_wgmma_test"
	done
}

case "${1:-}" in
"")
	emu_test
	wgmma_tests
	;;
wgmma) wgmma_tests ;;
case)
	shift
	"${cxx[@]}" -x c++ -o "$out/emu_case" lab/emucase/emu_case.cpp
	"$out/emu_case" "$@"
	;;
*) emu_test "$@" ;;
esac
