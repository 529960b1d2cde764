#!/usr/bin/env bash
# File arrival to committed mask under `voxpipe watch`, on the GPU machine, in one call: a
# 512x512x1000 int16 .nii (page cache warm) is renamed into the inbox N times under new names,
# one at a time; each time, the time from the rename to the mask's appearance under its final
# name (polled every 0.2 ms), then summary.csv's wall_ms (the watch's own arrival-to-rename) and
# queue_ms. Build bin/voxpipe-cuda here first (CGO_ENABLED=1 go build -tags cuda -o
# bin/voxpipe-cuda ./cmd/voxpipe).
# Local smoke test: LAT_BIN=/tmp/vp LAT_DIMS=48x40x24 LAT_ENGINE=cpu OUT=/tmp/lat scripts/watch-latency.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/watch-latency}"
W=/tmp/voxpipe-watch-latency
rm -rf "$W"
mkdir -p "$out" "$W/stage" "$W/inbox" "$W/masks"
V=${LAT_BIN:-bin/voxpipe-cuda}
DIMS=${LAT_DIMS:-512x512x1000}
N=${LAT_N:-10}
log="$out/watch-latency.txt"
: >"$log"
note() { echo "$*" | tee -a "$log"; }

note "== $(nproc) cores; $($V version | tr '\n' ' ')"
$V gen -q -o "$W/g" --dims "$DIMS" --count 1 --format nii
for i in $(seq 1 "$N"); do cp "$W/g/volumes/phantom_000.nii" "$W/stage/v$i.nii"; done
cat "$W"/stage/* >/dev/null
$V watch "$W/inbox" -o "$W/masks" --resample off --engine "${LAT_ENGINE:-auto}" --slab 64 --log-format json --run-id lat 2>"$W/watch.log" &
pid=$!
for _ in $(seq 1 600); do grep -q '"msg":"watch"' "$W/watch.log" && break; sleep 0.05; done
python3 - "$W" "$N" <<'PY' | tee -a "$log"
import os, sys, time, statistics
w, n = sys.argv[1], int(sys.argv[2])
lat = []
for i in range(1, n + 1):
    mask = f"{w}/masks/v{i}_mask.nii.gz"
    t0 = time.perf_counter()
    os.rename(f"{w}/stage/v{i}.nii", f"{w}/inbox/v{i}.nii")
    while not os.path.exists(mask):
        time.sleep(0.0002)
    lat.append((time.perf_counter() - t0) * 1000)
    time.sleep(0.3)
print("arrival to committed mask, ms:", " ".join(f"{x:.0f}" for x in lat))
print(f"median {statistics.median(lat):.0f} ms, min {min(lat):.0f}, max {max(lat):.0f} (first volume included; median of the rest {statistics.median(lat[1:]):.0f})")
PY
kill -TERM $pid
wait $pid
note "watch exit code $? after SIGTERM"
python3 - "$W/masks/runs/lat/summary.csv" <<'PY' | tee -a "$log"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for r in rows:
    print(r["volume"], r["status"], "wall_ms", round(float(r["wall_ms"]), 1), "queue_ms", round(float(r["queue_ms"] or 0), 1),
          "read", round(float(r["read_ms"]), 1), "segment", round(float(r["segment_ms"]), 1), "write", round(float(r["write_ms"]), 1))
PY
tail -2 "$W/watch.log" | tee -a "$log"
