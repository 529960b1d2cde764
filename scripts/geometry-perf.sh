#!/usr/bin/env bash
# Cost of geometry-aware inference at 512x512x1000 on the GPU machine, in one call (build
# bin/voxpipe-cuda and bin/geometry.test here first and carry bin):
#   1. the geometry kernels alone (parallel CPU): reorientation (flips; a permutation),
#      resampling 0.47x0.47x0.56 mm -> 2.5x2.5x3 mm, labels back;
#   2. `voxpipe run` on one 512x512x1000 phantom (.nii in the page cache): --resample off (the
#      engine at full resolution) against --resample auto (the model's spacing), then auto with
#      --statistics --preview; summary and timings rows of each.
# Local smoke test: GEO_DIMS=64x64x50 GEO_ENGINE=cpu OUT=/tmp/geo scripts/geometry-perf.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/geometry-perf}"
W=/tmp/voxpipe-geo
rm -rf "$W"
mkdir -p "$out" "$W"
V=${GEO_BIN:-bin/voxpipe-cuda}
DIMS=${GEO_DIMS:-512x512x1000}
ENGINE=${GEO_ENGINE:-auto}
log="$out/geometry.txt"
: >"$log"
note() { echo "$*" | tee -a "$log"; }
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }

note "== geometry kernels, $DIMS, $(nproc) cores"
VOXPIPE_GEOMETRY_DIMS=$DIMS bin/geometry.test -test.run '^$' -test.bench . -test.benchtime 5x 2>&1 | grep -E '^Benchmark' | tee -a "$log"

note "== voxpipe run, one $DIMS phantom, engine $ENGINE"
$V gen -q -o "$W/g" --dims "$DIMS" --count 1 --format nii >/dev/null
cat "$W/g/volumes/"*.nii >/dev/null
for mode in "off" "auto" "auto --statistics --preview"; do
	tag=${mode// /_}
	for i in 1 2; do
		o="$W/out-$tag-$i"
		s=$(date +%s%N)
		$V run -q --engine "$ENGINE" --resample $mode --slab 64 "$W/g/volumes" -o "$o" --run-id r >"$o.log" 2>&1
		note "run --resample $mode #$i: rc=$? process_ms $(ms "$s")"
		cut -d, -f2,3,5,8,10,14,15,22- "$o/runs/r/summary.csv" | sed 's/^/    /' | tee -a "$log"
		grep -E ',(prepare|restore|analyse),' "$o/runs/r/timings.csv" | cut -d, -f3,7 | sed 's/^/    /' | tee -a "$log"
	done
done
