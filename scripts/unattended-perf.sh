#!/usr/bin/env bash
# What claims, provenance (the input's XXH3-128 hashed beside the read) and per-run records cost
# a `voxpipe run`, on the GPU machine, in one call: whole-process times of one 512x512x1000 int16
# volume (.nii and .nii.gz, page cache warm) with a binary before those changes (bin/voxpipe-old)
# and after (bin/voxpipe-cuda), interleaved, fresh output folder each time; summary.csv's
# read/segment/write/wall; then the cost of a rerun that finds the mask up to date; then a batch
# of 8 .nii.gz volumes done by 1 process and by 3 processes sharing the output folder.
# Build both binaries here first:
#   git worktree add /tmp/old eff7fe5 && (cd /tmp/old && CGO_ENABLED=1 go build -tags cuda -o $PWD/bin/voxpipe-old ./cmd/voxpipe)
#   CGO_ENABLED=1 go build -tags cuda -o bin/voxpipe-cuda ./cmd/voxpipe
# Local smoke test: PERF_DIMS=48x40x24 OLD=bin/voxpipe NEW=bin/voxpipe OUT=/tmp/up scripts/unattended-perf.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/unattended-perf}"
W=/tmp/voxpipe-unattended
rm -rf "$W"
mkdir -p "$out" "$W"
OLD=${OLD:-bin/voxpipe-old}
NEW=${NEW:-bin/voxpipe-cuda}
# Full-resolution engine work in both: binaries that resample to the model's spacing by
# default are told not to.
full() { "$1" run --help 2>&1 | grep -q -- '--resample' && echo --resample off; }
DIMS=${PERF_DIMS:-512x512x1000}
log="$out/unattended.txt"
: >"$log"
note() { echo "$*" | tee -a "$log"; }
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
col() { # col CSV NAME: the column NAME of the CSV's last row
	awk -F, -v n="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == n) c = i } END { print $c }' "$1"
}

note "== machine: $(nproc) cores; $($NEW version | tr '\n' ' ')"
$NEW gen -q -o "$W/nii" --dims "$DIMS" --count 1 --format nii
$NEW gen -q -o "$W/gz" --dims "$DIMS" --count 1 --format nii.gz
$NEW gen -q -o "$W/batch" --dims "$DIMS" --count 8 --format nii.gz --start 10
cat "$W"/nii/volumes/* "$W"/gz/volumes/* "$W"/batch/volumes/* >/dev/null

note "== one volume, whole process ms, then summary.csv read/segment/write/wall ms"
for kind in nii gz; do
	for i in 1 2 3 4 5; do
		for b in old new; do
			bin=$OLD
			[ "$b" = new ] && bin=$NEW
			o="$W/o-$kind-$b-$i"
			s=$(date +%s%N)
			$bin run -q $(full "$bin") "$W/$kind/volumes" -o "$o" --slab 64 --summary "$o.summary.csv" --timings "$o.timings.csv" >"$o.log" 2>&1
			rc=$?
			t=$(ms "$s")
			note "$kind $b run $i rc=$rc process_ms $t read $(col "$o.summary.csv" read_ms) segment $(col "$o.summary.csv" segment_ms) write $(col "$o.summary.csv" write_ms) wall $(col "$o.summary.csv" wall_ms)"
		done
	done
done
note "old and new masks: $(python3 -c "
import gzip, struct, sys
a, b = [gzip.open(p).read() for p in sys.argv[1:]]
oa, ob = [int(struct.unpack('<f', x[108:112])[0]) for x in (a, b)]
print('same labels' if a[oa:] == b[ob:] else 'labels DIFFER')" "$W"/o-nii-old-1/*_mask.nii.gz "$W"/o-nii-new-1/*_mask.nii.gz)"

note "== rerun finding the mask up to date (new), whole process ms"
for i in 1 2 3; do
	s=$(date +%s%N)
	$NEW run -q $(full "$NEW") "$W/nii/volumes" -o "$W/o-nii-new-1" --slab 64 --run-id "again-$i" >/dev/null 2>&1
	note "skip run $i rc=$? process_ms $(ms "$s") records left: $(ls -d "$W/o-nii-new-1/runs/again-$i" 2>/dev/null || echo none)"
done

note "== batch of 8 .nii.gz: 1 process, then 3 processes on one output folder (new), wall ms"
for i in 1 2; do
	s=$(date +%s%N)
	$NEW run -q $(full "$NEW") "$W/batch/volumes" -o "$W/b1-$i" --slab 64 --readers 4 --writers 2 >/dev/null 2>&1
	note "1 process: rc=$? wall_ms $(ms "$s")"
	s=$(date +%s%N)
	for p in 1 2 3; do $NEW run -q $(full "$NEW") "$W/batch/volumes" -o "$W/b3-$i" --slab 64 --readers 4 --writers 2 --run-id "p$p" >/dev/null 2>&1 & done
	wait
	ok=$(cat "$W"/b3-$i/runs/p*/summary.csv | grep -c ',ok,')
	note "3 processes: wall_ms $(ms "$s"), ok rows $ok (want 8), masks $(ls "$W"/b3-$i/*_mask.nii.gz | wc -l)"
done
note "== done"
