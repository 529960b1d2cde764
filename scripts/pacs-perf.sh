#!/usr/bin/env bash
# The PACS loop's added latency per series (issue 35), on this machine's CPU engine, against a
# real Orthanc (Debian's, with its DICOMweb plugin and a user) started here on free loopback
# ports with its own storage in a temporary folder, and always stopped by a trap:
#   1. local baseline against the loop: `voxpipe run --engine cpu -q SERIES -o local/` and
#      `voxpipe pacs sync --all --engine cpu -o work/` on the same series stored in Orthanc,
#      PACS_PERF_RUNS times each, alternating; before each sync its work folder and the SEG
#      series in Orthanc are deleted, so that each sync does the whole loop (search, retrieve,
#      segment, store). Whole-process wall times (date +%s%N), their medians, the median of
#      the paired differences sync - run, and the sync's own retrieve_ms and store_ms (JSON log);
#   2. `voxpipe pacs watch --interval 2s --settle 2s` (QIDO-RS polling), then `--orthanc`
#      (Orthanc's /changes feed, StableAge 2 s in its config): a copy of the series with new
#      UIDs is stored by STOW-RS, PACS_PERF_WATCH_RUNS times one at a time, and timed from the
#      end of the STOW to the SEG appearing in Orthanc (QIDO ?Modality=SEG polled every 100 ms);
#      each watch is stopped by SIGTERM and must exit 0;
#   3. checks: every sync exits 0 and leaves exactly one SEG; at the end every MR series in
#      Orthanc is referenced by exactly one SEG series. Any failure exits 1.
# Usage: scripts/pacs-perf.sh  (about 5 minutes on 2 cores at the default size).
# PACS_PERF_DIMS (default 256x256x128) sizes the phantom, PACS_PERF_RUNS (3) the sync/run pairs,
# PACS_PERF_WATCH_RUNS (3) the arrivals per watch; VOXPIPE=/path/to/voxpipe skips the build;
# PACS_PERF_LOGS=DIR keeps the voxpipe and Orthanc logs and the raw results there.
# Smoke test: PACS_PERF_DIMS=64x64x32 PACS_PERF_RUNS=1 PACS_PERF_WATCH_RUNS=1 scripts/pacs-perf.sh
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3 # Debian's, which has pydicom and nibabel
dims=${PACS_PERF_DIMS:-256x256x128}
runs=${PACS_PERF_RUNS:-3}
wruns=${PACS_PERF_WATCH_RUNS:-3}
interval=2s settle=2s stable_age=2

# shellcheck source=lib/debian.sh
. scripts/lib/debian.sh
# shellcheck source=lib/orthanc.sh
. scripts/lib/orthanc.sh
apt_need orthanc orthanc-dicomweb curl python3-pydicom python3-nibabel python3-numpy

W=$(mktemp -d /tmp/pacs-perf.XXXXXX)
opid="" wpid=""
# Stops the watch and Orthanc (each by its PID, waiting for it) and removes the work folder.
cleanup() {
	local p
	for p in "$wpid" "$opid"; do
		if [ -n "$p" ]; then
			kill -TERM "$p" 2>/dev/null || true
			wait "$p" 2>/dev/null || true
		fi
	done
	if [ -n "${PACS_PERF_LOGS:-}" ]; then
		mkdir -p "$PACS_PERF_LOGS"
		cp "$W"/*.log "$W"/results.txt "$PACS_PERF_LOGS"/ 2>/dev/null || true
	fi
	rm -rf "$W"
}
trap cleanup EXIT
fail() {
	echo "pacs-perf: FAIL: $*" >&2
	if [ -f "$W/orthanc.log" ]; then tail -5 "$W/orthanc.log" >&2; fi
	exit 1
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# Results, one "KEY VALUE" a line, summarised at the end.
res=$W/results.txt
: >"$res"

echo "== build, phantom series ($dims), $(nproc) cores"
V=${VOXPIPE:-}
if [ -z "$V" ]; then
	timeout 600 go build -o "$W/voxpipe" ./cmd/voxpipe
	V=$W/voxpipe
fi
timeout 300 "$V" gen -o "$W/g" --dims "$dims" --count 1 --seed 35 -q
timeout 300 "$py" scripts/dicom_gen.py --from-nifti "$W/g/volumes/phantom_000.nii.gz" "$W/series"
# The watch's arrivals: the same volume written again, each time with new series and SOP
# Instance UIDs (dicom_gen.py generates them afresh; the study stays the same).
for k in $(seq "$((2 * wruns))"); do
	timeout 300 "$py" scripts/dicom_gen.py --from-nifti "$W/g/volumes/phantom_000.nii.gz" "$W/copy$k"
done
nfiles=$(find "$W/series" -type f | wc -l)
echo "$nfiles files, $(du -sh "$W/series" | cut -f1)"

echo "== Orthanc"
orthanc_start "$W" voxpipe-pacs-perf VOXPERF "$stable_age" 3600 || fail "Orthanc did not answer"
printf 'secret\n' >"$W/password"
echo "Orthanc $(timeout 5 curl -sf -u "$auth" "$base/system" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["Version"])') on 127.0.0.1:$hport, StableAge $stable_age s"
pacs=(--url "$dw" --user voxpipe --password-file "$W/password" --all --engine cpu)

# stow DIR: the series in DIR in one STOW-RS request; fails unless Orthanc answers 200.
stow() {
	local code
	code=$(orthanc_stow "$dw" "$auth" "$W/stow.json" "$1"/*)
	[ "$code" = 200 ] || fail "STOW of $1 answered $code: $(head -c 400 "$W/stow.json")"
}
# segs: how many SEG series Orthanc holds (QIDO-RS); "err" when the search fails.
segs() {
	local j
	j=$(timeout 5 curl -sf -u "$auth" "$dw/series?Modality=SEG") || { echo err; return; }
	grep -c '"0020000E"' <<<"$j" || true
}
# delete_segs: removes every SEG series from Orthanc (its REST API), so that a sync stores anew.
delete_segs() {
	local id
	for id in $(timeout 10 curl -sf -u "$auth" -X POST "$base/tools/find" -d '{"Level":"Series","Query":{"Modality":"SEG"}}' |
		"$py" -c 'import json,sys; print(" ".join(json.load(sys.stdin)))'); do
		timeout 30 curl -sf -u "$auth" -X DELETE "$base/series/$id" >/dev/null || fail "DELETE /series/$id"
	done
	[ "$(segs)" = 0 ] || fail "SEG series left in Orthanc after deleting them"
}
# field LOG MSG KEY: KEY's numbers in LOG's JSON lines whose msg is MSG, space-separated.
field() {
	grep -F "\"msg\":\"$2\"" "$1" | grep -o "\"$3\":[0-9.]*" | cut -d: -f2 | tr '\n' ' ' || true
}

stow "$W/series"
echo "stored the series ($nfiles instances)"

echo "== local run against pacs sync, $runs pairs, alternating (whole processes, wall)"
for i in $(seq "$runs"); do
	rm -rf "$W/local"
	t0=$(now_ms)
	timeout 900 "$V" run --engine cpu -q "$W/series" -o "$W/local" || fail "voxpipe run exited $?"
	t1=$(now_ms)
	ls "$W/local"/*.seg.dcm >/dev/null 2>&1 || fail "voxpipe run wrote no SEG"
	echo "run $((t1 - t0))" >>"$res"

	delete_segs
	rm -rf "$W/work"
	rc=0
	t0=$(now_ms)
	timeout 900 "$V" pacs sync "${pacs[@]}" --log-format json --progress-interval 0 -o "$W/work" 2>"$W/sync$i.log" || rc=$?
	t1=$(now_ms)
	[ "$rc" = 0 ] || { tail -5 "$W/sync$i.log" >&2; fail "pacs sync $i exited $rc"; }
	[ "$(grep -c '"msg":"series done: SEG stored"' "$W/sync$i.log")" = 1 ] || fail "pacs sync $i did not store exactly one series' SEG"
	[ "$(segs)" = 1 ] || fail "after pacs sync $i Orthanc holds $(segs) SEG series, want 1"
	echo "sync $((t1 - t0))" >>"$res"
	echo "retrieve_ms $(field "$W/sync$i.log" "series retrieved" retrieve_ms)" >>"$res"
	echo "store_ms $(field "$W/sync$i.log" "series done: SEG stored" store_ms)" >>"$res"
	tail -4 "$res" | tr '\n' ' '
	echo
done

# watch_phase NAME FIRST [FLAGS...]: starts pacs watch on the last sync's work folder (the first
# series is done there), stores copies FIRST.. one at a time, each timed from the end of its STOW
# to one more SEG series in Orthanc, then stops the watch by SIGTERM: it must exit 0.
watch_phase() {
	local name=$1 first=$2 k n c t0 t1 ts deadline rc=0
	shift 2
	# --foreground: a SIGTERM to timeout then reaches voxpipe once; without it timeout also
	# signals its process group, and a second SIGTERM makes the watch abandon its work (143).
	timeout --foreground 1200 "$V" pacs watch "${pacs[@]}" "$@" --log-format json --progress-interval 0 \
		-o "$W/work" 2>"$W/$name.log" &
	wpid=$!
	for _ in $(seq 600); do
		grep -q '"msg":"pacs watch"' "$W/$name.log" && break
		kill -0 "$wpid" 2>/dev/null || { tail -5 "$W/$name.log" >&2; fail "$name exited at start"; }
		sleep 0.1
	done
	grep -q '"msg":"pacs watch"' "$W/$name.log" || fail "$name did not start"
	sleep 3 # past its first search (or its first read of the changes feed, which starts from now)
	for k in $(seq "$first" "$((first + wruns - 1))"); do
		n=$(segs)
		ts=$(now_ms)
		stow "$W/copy$k"
		t0=$(now_ms)
		deadline=$((t0 + 120000))
		while :; do
			c=$(segs)
			[ "$c" = "$n" ] || [ "$c" = err ] || break
			[ "$(now_ms)" -lt "$deadline" ] || { tail -5 "$W/$name.log" >&2; fail "$name: no SEG 120 s after copy $k was stored"; }
			sleep 0.1
		done
		t1=$(now_ms)
		[ "$c" = $((n + 1)) ] || fail "$name: after copy $k Orthanc holds $c SEG series, want $((n + 1))"
		echo "$name $((t1 - t0))" >>"$res"
		echo "stow_ms $((t0 - ts))" >>"$res"
		echo "$name: copy $k stored in $((t0 - ts)) ms, its SEG in Orthanc $((t1 - t0)) ms later"
		sleep 1
	done
	t0=$(now_ms)
	kill -TERM "$wpid"
	wait "$wpid" || rc=$?
	wpid=""
	[ "$rc" = 0 ] || { tail -5 "$W/$name.log" >&2; fail "$name exited $rc after SIGTERM"; }
	echo "$name: exit 0 $(($(now_ms) - t0)) ms after SIGTERM"
	echo "${name}_retrieve_ms $(field "$W/$name.log" "series retrieved" retrieve_ms)" >>"$res"
	echo "${name}_store_ms $(field "$W/$name.log" "series done: SEG stored" store_ms)" >>"$res"
}

echo "== pacs watch --interval $interval --settle $settle (QIDO-RS), $wruns arrivals"
watch_phase watch_qido 1 --interval "$interval" --settle "$settle"
echo "== pacs watch --orthanc --interval $interval (StableAge $stable_age s), $wruns arrivals"
watch_phase watch_orthanc $((wruns + 1)) --orthanc --interval "$interval"

echo "== check: one SEG per MR series in Orthanc"
timeout 120 "$py" - "$base" "$auth" "$((1 + 2 * wruns))" <<'PY' || fail "SEG series in Orthanc do not match its MR series one to one (above)"
import base64, collections, json, sys, urllib.request
base, auth, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
def get(path, data=None):
    r = urllib.request.Request(base + path, data=data)
    r.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    with urllib.request.urlopen(r, timeout=30) as f:
        return json.load(f)
def series(modality):
    return get("/tools/find", json.dumps({"Level": "Series", "Query": {"Modality": modality}, "Expand": True}).encode())
mr = {s["MainDicomTags"]["SeriesInstanceUID"] for s in series("MR")}
refs = collections.Counter()
for s in series("SEG"):
    for i in s["Instances"]:
        t = get("/instances/%s/tags?simplify" % i)
        refs.update(r["SeriesInstanceUID"] for r in t.get("ReferencedSeriesSequence", []))
problems = []
if len(mr) != want:
    problems.append("%d MR series, want %d" % (len(mr), want))
for uid in sorted(mr | set(refs)):
    if refs[uid] != 1 or uid not in mr:
        problems.append("%s: MR %s, referenced by %d SEG instances" % (uid, uid in mr, refs[uid]))
if problems:
    sys.exit("\n".join(problems))
print("ok: %d MR series, each referenced by exactly one SEG" % len(mr))
PY

echo "== results ($dims, $(nproc) cores; ms; median (min-max))"
timeout 60 "$py" - "$res" <<'PY'
import collections, statistics, sys
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    key, *nums = line.split()
    v[key] += [float(x) for x in nums]
def show(label, xs):
    if xs:
        print("%-44s %7.0f (%.0f-%.0f)  n=%d" % (label, statistics.median(xs), min(xs), max(xs), len(xs)))
show("voxpipe run (local, whole process)", v["run"])
show("voxpipe pacs sync (whole process)", v["sync"])
show("sync - run, paired", [s - r for s, r in zip(v["sync"], v["run"])])
show("sync retrieve_ms (WADO-RS of the series)", v["retrieve_ms"])
show("sync store_ms (STOW-RS of the SEG)", v["store_ms"])
show("STOW of an arriving series (curl)", v["stow_ms"])
show("watch, QIDO: STOW end to SEG in Orthanc", v["watch_qido"])
show("  its retrieve_ms", v["watch_qido_retrieve_ms"])
show("  its store_ms", v["watch_qido_store_ms"])
show("watch --orthanc: STOW end to SEG in Orthanc", v["watch_orthanc"])
show("  its retrieve_ms", v["watch_orthanc_retrieve_ms"])
show("  its store_ms", v["watch_orthanc_store_ms"])
PY
echo "pacs-perf: ok"
