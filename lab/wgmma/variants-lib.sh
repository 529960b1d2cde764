# What lab/wgmma/fused-variants.sh and fused-stage-cost.sh share: build fused-kernel variants
# for sm_90a, report what ptxas and the SASS say about them, time them beside the fatbin.
# Sourced, not run; run from the repository root on the GPU machine. A variant list is
# "name:flags ..." (flags joined by commas).

# variants_build DIR OUT VARIANTS: compiles DIR/voxpipe_sm90a.cu once per variant, in parallel,
# into OUT/NAME.cubin, ptxas's report in OUT/ptxas-NAME.txt.
variants_build() {
	local dir=$1 out=$2 v name flags
	(
		cd "$dir" || exit 1
		for v in $3; do
			IFS=: read -r name flags <<<"$v"
			# shellcheck disable=SC2086 # flags are separate words
			nvcc -cubin -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Xptxas -v ${flags//,/ } \
				-o "$out/$name.cubin" voxpipe_sm90a.cu >"$out/ptxas-$name.txt" 2>&1 &
		done
		wait
	)
}

# variants_report OUT VARIANTS: per variant, ptxas's wgmma notes (C75xx) on fused_i16, its
# registers and spills, and SASS counts (HGMMA, the waits after them, local loads and stores).
variants_report() {
	local out=$1 v name op
	for v in $2; do
		name=${v%%:*}
		echo "== $name (${v#*:}): $(grep "fused_i16'" "$out/ptxas-$name.txt" | grep -oE "C75[0-9]+" | sort | uniq -c | tr -s ' ' | tr '\n' ' ')"
		grep -A4 "entry function 'fused_i16'" "$out/ptxas-$name.txt" | grep -E "spill|Used"
		cuobjdump -sass -fun fused_i16 "$out/$name.cubin" >"$out/sass-$name.txt" 2>&1
		for op in HGMMA WARPGROUP.DEPBAR LDL STL; do printf "%s=%s " "$op" "$(grep -c "$op" "$out/sass-$name.txt")"; done
		echo
	done
}

# variants_time OUT VARIANTS VOLDIR ROUNDS: the kernels' median (voxpipe bench, 10 runs) on one
# 512x512x1000 phantom (made in VOLDIR once), the fatbin then each variant, ROUNDS times.
variants_time() {
	local out=$1 w=$3 round k
	[[ -f $w/volumes/phantom_000.nii ]] || bin/voxpipe-cuda gen -q -o "$w" --dims 512x512x1000 --count 1 --format nii
	for round in $(seq 1 "$4"); do
		for k in fatbin $(for v in $2; do echo "$out/${v%%:*}.cubin"; done); do
			printf "round %d %-24s " "$round" "$(basename "$k")"
			VOXPIPE_KERNELS=$k timeout 120 bin/voxpipe-cuda bench -q -o "$w/bench" --input "$w/volumes/phantom_000.nii" \
				--precision fp16 --slab 64 --runs 10 --warmup 2 --file-runs 0 2>&1 | grep -oE "kernels [0-9.]+ ms \[[0-9.-]+\]"
		done
	done
}
