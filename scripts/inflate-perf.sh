#!/usr/bin/env bash
# The parallel gzip inflate on the GPU machine's CPUs (docs/perf.md, sixth session), in one call:
# io/inflate's benchmarks, the read stage alone and single-volume `voxpipe run`s on a 512x512x1000
# .nii.gz (voxpipe's own writer, GNU gzip -6 and -1), an older build against this one
# interleaved, and a batch of 16 .nii.gz volumes. Build first (here):
#   CGO_ENABLED=1 go build -tags cuda -o bin/voxpipe-cuda ./cmd/voxpipe
#   (the same from an older commit as bin/voxpipe-old), go test -c -o bin/inflate.test ./io/inflate
# then carry bin. Results in $OUT/inflate-perf.txt. INFLATE_PERF_DIMS and INFLATE_PERF_BATCH make
# a small local smoke run possible.
set -u
# Full-resolution engine work in both: binaries that resample to the model's spacing by
# default are told not to.
full() { "$1" run --help 2>&1 | grep -q -- '--resample' && echo --resample off; }
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/inflate-perf}
mkdir -p "$out"
o=$out/inflate-perf.txt
dims=${INFLATE_PERF_DIMS:-512x512x1000}
batch=${INFLATE_PERF_BATCH:-16}
W=/tmp/voxpipe-inflate-perf
rm -rf "$W" && mkdir -p "$W"
t0=$SECONDS
note() { echo "## t=$((SECONDS - t0)) $*" >>"$o"; }
lscpu | grep -E "^(CPU\(s\)|Thread|Core|Socket|Model name)" >"$o"
note "io/inflate benchmarks"
bin/inflate.test -test.run XXX -test.bench 'Gunzip|Decode' -test.benchtime 5x 2>&1 | grep Bench >>"$o"
bin/voxpipe-cuda gen -o "$W/g" --dims "$dims" --count 1 --format nii.gz -q >>"$o" 2>&1
vol=$(ls "$W"/g/volumes/*.nii.gz | head -1)
mkdir -p "$W/z6" "$W/z1"
gzip -dc "$vol" >"$W/plain.nii"
gzip -6 <"$W/plain.nii" >"$W/z6/zlib6.nii.gz"
gzip -1 <"$W/plain.nii" >"$W/z1/zlib1.nii.gz"
ls -l "$vol" "$W"/z6/*.gz "$W"/z1/*.gz | awk '{print $5, $9}' >>"$o"
note "files at 1..16 threads (MB/s, chunks used as decoded in parallel, runs decoded in order)"
for f in "$vol" "$W/z6/zlib6.nii.gz"; do
	INFLATE_BENCH_FILE=$f bin/inflate.test -test.run XXX -test.bench GunzipFile -test.benchtime 3x 2>&1 | grep Bench >>"$o"
done
note "read stage alone (bench --read-only, 1 reader), old and new interleaved"
for d in "$W/g/volumes" "$W/z6" "$W/z1"; do
	cat "$d"/* >/dev/null
	for i in 1 2 3; do for b in voxpipe-old voxpipe-cuda; do
		echo "$(basename "$d") $b $(bin/$b bench -q --read-only "$d" --readers 1 -o "$W/ro1" 2>&1 | tail -1)" >>"$o"
	done; done
done
note "single runs: process ms, peak RSS, then summary.csv's read_ms..wall_ms"
TIME=""
[ -x /usr/bin/time ] && TIME="/usr/bin/time -f maxrss_kb=%M"
for d in "$W/g/volumes" "$W/z6"; do
	for i in 1 2 3; do for b in voxpipe-old voxpipe-cuda; do
		s=$(date +%s%N)
		sum="$W/o-$b-$(basename "$d")-$i-summary.csv" # a new file each run: runs never reuse records
		$TIME bin/$b run -q $(full bin/$b) "$d" -o "$W/o-$b" --slab 64 --overwrite --summary "$sum" --timings "$sum.timings.csv" >>"$W/time.txt" 2>&1
		e=$(date +%s%N)
		echo "$(basename "$d") $b process_ms $(((e - s) / 1000000)) $(tail -1 "$W/time.txt") $(tail -1 "$sum" | cut -d, -f8-15)" >>"$o"
	done; done
	cmp <(gzip -dc "$W"/o-voxpipe-old/*_mask.nii.gz) <(gzip -dc "$W"/o-voxpipe-cuda/*_mask.nii.gz) && echo "masks identical" >>"$o"
done
if [ "$batch" -gt 0 ]; then
	note "batch of $batch"
	bin/voxpipe-cuda gen -o "$W/batch" --dims "$dims" --count "$batch" --format nii.gz -q >>"$o" 2>&1
	cat "$W"/batch/volumes/* >/dev/null
	for b in voxpipe-old voxpipe-cuda; do
		note "$b readers alone"
		bin/$b bench -q --read-only "$W/batch/volumes" --readers 8 -o "$W/ro" >>"$o" 2>&1
		s=$(date +%s%N)
		bin/$b run -q $(full bin/$b) "$W/batch/volumes" -o "$W/br-$b" --slab 64 --readers 8 --writers 4 >>"$o" 2>&1
		e=$(date +%s%N)
		echo "$b batch run process_ms $(((e - s) / 1000000))" >>"$o"
	done
fi
if [ "${INFLATE_PERF_PROFILE:-0}" != 0 ]; then
	note "CPU profile and execution trace of the gzip -6 file at 16 threads (\$OUT/cpu16.out, trace16.out)"
	INFLATE_BENCH_FILE=$W/z6/zlib6.nii.gz bin/inflate.test -test.run XXX -test.bench 'GunzipFile/threads=16' \
		-test.benchtime 5x -test.cpuprofile "$out/cpu16.out" -test.trace "$out/trace16.out" 2>&1 | grep Bench >>"$o"
fi
note done
cat "$o"
