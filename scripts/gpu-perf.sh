#!/usr/bin/env bash
# End-to-end performance on the GPU machine, all in one call (build bin/voxpipe-cuda here first
# with scripts/gpu-build.sh and carry bin): generates a 512x512x1000 int16 phantom, times the
# engine (fp16 and fp32: kernels, copies, pinned-in to mask-out, hidden copy fraction), reading
# and writing alone and `voxpipe run` file to file (with a trace), the PyTorch baseline on the
# same file (fp32 eager, fp16 channels_last eager, fp16 compiled), a report of voxpipe against
# PyTorch, and a batch of .nii.gz volumes against the readers alone. Prints a table at the end;
# results in $OUT (perf.txt, report.md, trace.json, timings).
#   Local smoke test: PERF_BIN=/tmp/vp PERF_DIMS=48x40x24 PYTHON=/usr/bin/python3 PERF_TORCH_DEVICE=cpu
#   PERF_COMPILE=0 OUT=/tmp/perf scripts/gpu-perf.sh
#   PERF_BATCH=N volumes in the batch part (default 16, 0 skips); PERF_COMPILE=0 skips torch.compile.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/gpu-perf}"
work=/tmp/voxpipe-perf
mkdir -p "$out" "$work"
V=${PERF_BIN:-bin/voxpipe-cuda}
DIMS=${PERF_DIMS:-512x512x1000}
PY=${PYTHON:-python3}
TD=${PERF_TORCH_DEVICE:-cuda}
model=fixtures/model/voxpipe-default.safetensors
log="$out/perf.txt"
: >"$log"
note() { echo "$*" | tee -a "$log"; }
timed() { # timed LABEL CMD...: wall seconds of CMD into the log
	local label=$1; shift
	local t0=$(date +%s.%N)
	timeout "${PERF_STEP_LIMIT:-240}" "$@" >"$work/$label.log" 2>&1
	local rc=$?
	local t1=$(date +%s.%N)
	note "$(printf '%-28s rc=%d  %.2f s' "$label" "$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')")"
	tail -n 3 "$work/$label.log" | sed 's/^/    /' | tee -a "$log"
}
hidden() { # fraction of h2d+d2h time overlapping kernels, from a timings.csv
	"$PY" - "$1" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
k = [(float(r["start_ms"]), float(r["start_ms"]) + float(r["duration_ms"])) for r in rows if r["stage"] == "kernels"]
c = [(float(r["start_ms"]), float(r["start_ms"]) + float(r["duration_ms"])) for r in rows if r["stage"] in ("h2d", "d2h")]
tot = sum(b - a for a, b in c)
hid = sum(max(0.0, min(b, kb) - max(a, ka)) for a, b in c for ka, kb in k)
print(f"copy time {tot:.2f} ms, hidden behind kernels {hid:.2f} ms = {100 * hid / tot if tot else 0:.1f}%")
PY
}

note "== machine"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$log"
nproc | sed 's/^/cores: /' | tee -a "$log"
$V version | tee -a "$log"

note "== phantom $DIMS"
timed gen-nii $V gen -o "$work/big" --dims "$DIMS" --count 1 --format nii -q
vol="$work/big/volumes/phantom_000.nii"

note "== engine: voxpipe bench (pinned in -> mask out), fp16 then fp32"
timed bench-fp16 $V bench -q -o "$work/bench16" --input "$vol" --precision fp16 --slab 64 --runs 10 --warmup 2 --file-runs 3
timed bench-fp32 $V bench -q -o "$work/bench32" --input "$vol" --precision fp32 --slab 64 --runs 5 --warmup 1 --file-runs 0

note "== voxpipe run file to file (.nii in page cache -> .nii.gz mask), fp16, with trace"
timed run-fp16 $V run -q --resample off "$work/big/volumes" -o "$work/run16" --slab 64 --trace "$out/trace.json" --run-id first
timed run-fp16-again $V run -q --resample off "$work/big/volumes" -o "$work/run16" --slab 64 --overwrite --run-id again
note "    $(hidden "$work/run16/runs/again/timings.csv")"
cp "$work/run16/runs/again/timings.csv" "$out/run16-timings.csv"; cp "$work/run16/runs/again/summary.csv" "$out/run16-summary.csv"
timed run-fp32 $V run -q --resample off "$work/big/volumes" -o "$work/run32" --slab 64 --precision fp32
timed agree-fp16-fp32 $V eval "$work/run16" "$work/run32"

note "== PyTorch baseline on the same file (same weights)"
timed torch-fp32 "$PY" baseline/segment.py "$vol" -o "$work/torch32" --model "$model" --device "$TD" --slab 64
# the variants write plain .nii masks: Python's single-threaded gzip of a 262 MB mask would
# cost device time and is already measured by the fp32 run above
timed torch-fp16-cl "$PY" baseline/segment.py "$vol" -o "$work/torch16" --model "$model" --device "$TD" --slab 64 --dtype float16 --channels-last --mask-name "{name}_mask.nii"
if [[ "${PERF_COMPILE:-1}" != 0 ]]; then
	timed torch-fp16-compiled "$PY" baseline/segment.py "$vol" -o "$work/torchc" --model "$model" --device "$TD" --slab 256 --dtype float16 --channels-last --compile max-autotune-no-cudagraphs
fi
for d in torch32 torch16 torchc; do
	[[ -f "$work/$d/summary.csv" ]] && note "    $d: $("$PY" -c "import csv,sys; r=next(csv.DictReader(open(sys.argv[1]))); print('segment', r['segment_ms'], 'ms, wall', r['wall_ms'], 'ms')" "$work/$d/summary.csv")"
done
timed agree-torch32-fp32 $V eval "$work/torch32" "$work/run32"
timed report $V report --run "$work/run16" --baseline "$work/torch32" -o "$work/report"
cp "$work/report/report.md" "$out/report.md" 2>/dev/null

n=${PERF_BATCH:-16}
if [[ "$n" != 0 ]]; then
	note "== batch of $n .nii.gz volumes"
	timed gen-batch $V gen -o "$work/batch" --dims "$DIMS" --count "$n" --format nii.gz -q
	timed readers-alone $V bench -q --read-only "$work/batch/volumes" --readers 8 -o "$work/readonly"
	timed batch-run $V run -q --resample off "$work/batch/volumes" -o "$work/batchrun" --slab 64 --readers 8 --writers 4 --run-id batch
	cp "$work/batchrun/runs/batch/summary.csv" "$out/batch-summary.csv"
fi
note "== done"
