#!/usr/bin/env bash
# Builds the fused kernel for sm_90a with other compile-time settings and times each beside the
# fatbin, on the GPU machine (nvcc >= 12; build bin/voxpipe-cuda here first and carry bin):
#
#	VARIANTS="n48: gonly:-DVF_WG_CONV2=0 r8:-DVF_ROWS=8" lab/wgmma/fused-variants.sh
#
# Each variant is name:flags (flags joined by commas; none: the committed build). Prints per
# variant ptxas's registers and spills, its wgmma serialisation notes (C75xx) and SASS counts
# (HGMMA, the waits after them, local loads and stores), then the kernels' median on one
# 512x512x1000 phantom (voxpipe bench, 10 runs), two rounds alternated with the fatbin. Logs and
# SASS go to $OUT (or /tmp/fused-variants).
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/fused-variants}"
mkdir -p "$out"
export PATH="$PATH:/usr/local/cuda/bin"
V="${VARIANTS:-n48:}"
(
	cd lab/wgmma || exit 1
	for v in $V; do
		IFS=: read -r name flags <<<"$v"
		# shellcheck disable=SC2086 # flags are separate words
		nvcc -cubin -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Xptxas -v ${flags//,/ } \
			-o "$out/$name.cubin" voxpipe_sm90a.cu >"$out/ptxas-$name.txt" 2>&1 &
	done
	wait
)
for v in $V; do
	name=${v%%:*}
	echo "== $name (${v#*:}): $(grep "fused_i16'" "$out/ptxas-$name.txt" | grep -oE "C75[0-9]+" | sort | uniq -c | tr -s ' ' | tr '\n' ' ')"
	grep -A4 "entry function 'fused_i16'" "$out/ptxas-$name.txt" | grep -E "spill|Used"
	cuobjdump -sass -fun fused_i16 "$out/$name.cubin" >"$out/sass-$name.txt" 2>&1
	for op in HGMMA WARPGROUP.DEPBAR LDL STL; do printf "%s=%s " "$op" "$(grep -c "$op" "$out/sass-$name.txt")"; done
	echo
done
w=/tmp/fused-variants-vol
[[ -f $w/volumes/phantom_000.nii ]] || bin/voxpipe-cuda gen -q -o "$w" --dims 512x512x1000 --count 1 --format nii
for round in 1 2; do
	for k in fatbin $(for v in $V; do echo "$out/${v%%:*}.cubin"; done); do
		printf "round %d %-24s " "$round" "$(basename "$k")"
		VOXPIPE_KERNELS=$k timeout 120 bin/voxpipe-cuda bench -q -o "$w/bench" --input "$w/volumes/phantom_000.nii" \
			--precision fp16 --slab 64 --runs 10 --warmup 2 --file-runs 0 2>&1 | grep -oE "kernels [0-9.]+ ms \[[0-9.-]+\]"
	done
done
