#!/usr/bin/env bash
# The figures of issue 36, on the GPU machine, in one call (build here first with
# scripts/gpu-build.sh, or just CGO_ENABLED=1 go build -tags cuda -o bin/voxpipe-cuda ./cmd/voxpipe,
# and carry bin). Sections, all by default, chosen with PERF_SECTIONS (comma-separated):
#   engine  one 512x512x1000 int16 phantom: voxpipe bench fp16 (kernels, pinned in to mask out);
#           on compute capability 9.0 also the lab's sm_90a cubin (its fused kernel's convs on
#           wgmma, lab/wgmma/voxpipe_sm90a.cubin), rounds alternated with the default kernels
#   torch   PyTorch on the same volume and weights: eager fp32, eager fp16 channels_last, and
#           torch.compile max-autotune-no-cudagraphs (PERF_COMPILE=0 skips it)
#   batch   PERF_BATCH (8) .nii.gz volumes: the readers alone (bench --read-only), `run
#           --resample off` and `run` (resampling to the model's grid, the default), PERF_ROUNDS
#           (3) rounds interleaved, run defaults (--readers 2 --writers 1); the masks of the
#           default path against a CPU-engine run of one volume (agreement)
#   watch   `voxpipe watch` (defaults but --resample off) on a warm engine: PERF_ARRIVALS (20) .nii volumes renamed into the
#           inbox one at a time; arrival to committed .nii.gz mask, and where the time goes
#           (median of each stage's span from timings.csv)
# VOXPIPE_CPU_PROFILE profiles of the batch runs go to $OUT when PERF_PROFILE=1. Prints and
# writes $OUT/perf-table.md (the table docs/perf.md quotes) and $OUT/perf.txt (everything).
#   Local smoke test: PERF_BIN=/tmp/vp PERF_DIMS=48x40x24 PERF_TORCH_DEVICE=cpu PERF_COMPILE=0 \
#   PERF_ENGINE=cpu OUT=/tmp/perf scripts/gpu-perf.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/gpu-perf}"
work=/tmp/voxpipe-perf
rm -rf "$work"
mkdir -p "$out" "$work"
V=${PERF_BIN:-bin/voxpipe-cuda}
DIMS=${PERF_DIMS:-512x512x1000}
PY=${PYTHON:-python3}
TD=${PERF_TORCH_DEVICE:-cuda}
ENG=${PERF_ENGINE:-auto}
SECTIONS=",${PERF_SECTIONS:-engine,torch,batch,watch},"
NB=${PERF_BATCH:-8}
ROUNDS=${PERF_ROUNDS:-3}
ARRIVALS=${PERF_ARRIVALS:-20}
model=fixtures/model/voxpipe-default.safetensors
log="$out/perf.txt"
table="$out/perf-table.md"
: >"$log"
note() { echo "$*" | tee -a "$log"; }
want() { [[ "$SECTIONS" == *",$1,"* ]]; }
row() { echo "| $1 | $2 |" >>"$work/rows"; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
# timed LABEL CMD...: runs CMD (output in $work/LABEL.log), notes its wall seconds, sets $took
timed() {
	local label=$1; shift
	local t0 t1 rc
	t0=$(date +%s.%N)
	timeout "${PERF_STEP_LIMIT:-300}" "$@" >"$work/$label.log" 2>&1
	rc=$?
	t1=$(date +%s.%N)
	took=$(secs "$t0" "$t1")
	note "$(printf '%-30s rc=%d  %s s' "$label" "$rc" "$took")"
	[[ $rc == 0 ]] || tail -n 5 "$work/$label.log" | sed 's/^/    /' | tee -a "$log"
}
med() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
: >"$work/rows"

note "== machine"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | tee -a "$log"
note "cores: $(nproc); $($V version | head -1)"

if want engine || want torch; then
	timed gen-nii $V gen -q -o "$work/big" --dims "$DIMS" --count 1 --format nii
fi
vol="$work/big/volumes/phantom_000.nii"

if want engine; then
	note "== engine: voxpipe bench fp16 (pinned in -> mask out, --resample off)"
	timed bench-fp16 $V bench -q -o "$work/bench16" --input "$vol" --precision fp16 --slab 64 --runs 10 --warmup 2 --file-runs 0
	grep -E "^bench " "$work/bench-fp16.log" | sed 's/^/    /' | tee -a "$log"
	k=$(grep -oE ", kernels [0-9.]+ ms" "$work/bench-fp16.log" | head -1 | grep -oE "[0-9.]+ ms")
	p=$(grep -oE "pinned-in to mask-out [0-9.]+ ms" "$work/bench-fp16.log" | head -1 | grep -oE "[0-9.]+ ms")
	row "voxpipe kernels, $DIMS fp16, median of 10" "${k:-none}"
	row "voxpipe pinned-in to mask-out, median of 10" "${p:-?}"
	cubin=$PWD/lab/wgmma/voxpipe_sm90a.cubin
	if [[ "$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)" == 9.0 && -f "$cubin" ]]; then
		for i in 1 2; do
			for img in fatbin "$cubin"; do
				VOXPIPE_KERNELS=$img timed "bench-$(basename "$img")-$i" $V bench -q -o "$work/bench16" --input "$vol" --precision fp16 --slab 64 --runs 10 --warmup 2 --file-runs 0
				grep -oE "kernels [0-9.]+ ms \[[0-9.-]+\]" "$work/bench-$(basename "$img")-$i.log" | head -1 | sed "s|^|    $(basename "$img"): |" | tee -a "$log"
			done
		done
		w=$(grep -ohE "kernels [0-9.]+ ms" "$work"/bench-voxpipe_sm90a.cubin-*.log | grep -oE "[0-9.]+" | med)
		row "voxpipe kernels, sm_90a cubin (convs on wgmma), median of 2 x 10" "$(if [[ -n $w ]]; then printf '%.2f' "$w"; else echo '?'; fi) ms"
	fi
fi

if want torch; then
	note "== PyTorch on the same volume and weights (volume already on the GPU)"
	variants=fp32,fp16-cl
	[[ "${PERF_COMPILE:-1}" != 0 ]] && variants+=,compiled
	timed torch "$PY" baseline/gpu_time.py --model "$model" --variants "$variants" --runs 3 --dims "$DIMS"
	sed 's/^/    /' "$work/torch.log" | tail -n 8 | tee -a "$log"
	while read -r name msv; do row "PyTorch $name, median" "$msv"; done < <(grep -E '^gpu_time [a-z0-9-]+: [0-9.]+ ms' "$work/torch.log" | awk '{ sub(":", "", $2); print $2, $3 " ms" }')
fi

if want batch; then
	note "== batch: $NB .nii.gz volumes, run defaults (--readers 2 --writers 1)"
	timed gen-batch $V gen -q -o "$work/batch" --dims "$DIMS" --count "$NB" --format nii.gz --start 100
	cat "$work"/batch/volumes/* >/dev/null
	declare -a tr to ta
	for i in $(seq 1 "$ROUNDS"); do
		timed "readers-$i" $V bench -q --read-only "$work/batch/volumes" --readers 2 -o "$work/ro-$i"
		tr+=("$took")
		rm -rf "$work/off-$i" "$work/auto-$i"
		prof=
		[[ "${PERF_PROFILE:-0}" == 1 && $i == 1 ]] && prof="$out/off.prof"
		VOXPIPE_CPU_PROFILE=$prof timed "run-resample-off-$i" $V run -q --engine "$ENG" --resample off "$work/batch/volumes" -o "$work/off-$i" --run-id r
		to+=("$took")
		[[ -n "$prof" ]] && prof="$out/auto.prof"
		VOXPIPE_CPU_PROFILE=$prof timed "run-default-$i" $V run -q --engine "$ENG" "$work/batch/volumes" -o "$work/auto-$i" --run-id r
		ta+=("$took")
	done
	r=$(echo "${tr[*]}" | med); o=$(echo "${to[*]}" | med); a=$(echo "${ta[*]}" | med)
	note "readers alone ${tr[*]} s (median $r); --resample off ${to[*]} (median $o); default ${ta[*]} (median $a)"
	row "batch of $NB .nii.gz: readers alone (median of $ROUNDS)" "$r s"
	row "batch: run --resample off / readers' pace" "$o s / $(awk -v r="$r" -v o="$o" 'BEGIN { printf "%.0f %%", 100 * r / o }')"
	row "batch: run (resampling) / --resample off" "$a s / $(awk -v a="$a" -v o="$o" 'BEGIN { printf "%.2fx", a / o }')"
	cp "$work/auto-1/runs/r/summary.csv" "$out/batch-default-summary.csv" 2>/dev/null
	cp "$work/off-1/runs/r/summary.csv" "$out/batch-off-summary.csv" 2>/dev/null
	"$PY" - "$work/auto-1/runs/r/timings.csv" "$work/off-1/runs/r/timings.csv" <<'PY' | tee -a "$log"
import csv, sys, collections
for path in sys.argv[1:]:
    tot = collections.defaultdict(float)
    for r in csv.DictReader(open(path)):
        tot[r["stage"]] += float(r["duration_ms"])
    print("   ", path.split("/")[-4], "stage totals ms:", ", ".join(f"{k} {v:.0f}" for k, v in sorted(tot.items())))
PY
	# The default path's masks against the CPU engine's, on one volume (the same resampling).
	one="$work/one"; mkdir -p "$one"; ln -sf "$work/batch/volumes/phantom_100.nii.gz" "$one/"
	timed cpu-one $V run -q --engine cpu "$one" -o "$work/cpu-one" --run-id r
	mkdir -p "$work/gpu-one"; cp "$work/auto-1/phantom_100_mask.nii.gz" "$work/gpu-one/" 2>/dev/null
	timed agree-default-cpu $V eval "$work/gpu-one" "$work/cpu-one"
	sed 's/^/    /' "$work/agree-default-cpu.log" | tail -n 8 | tee -a "$log"
fi

if want watch; then
	note "== watch: $ARRIVALS arrivals of a $DIMS .nii, one at a time, warm engine"
	W=$work/watch
	mkdir -p "$W/stage" "$W/inbox" "$W/masks"
	$V gen -q -o "$W/g" --dims "$DIMS" --count 1 --format nii
	for i in $(seq 1 "$ARRIVALS"); do cp "$W/g/volumes/phantom_000.nii" "$W/stage/v$i.nii"; done
	cat "$W"/stage/* >/dev/null
	$V watch "$W/inbox" -o "$W/masks" --resample off --engine "$ENG" --log-format json --run-id lat 2>"$W/watch.log" &
	pid=$!
	for _ in $(seq 1 600); do grep -q '"msg":"watch"' "$W/watch.log" && break; sleep 0.05; done
	"$PY" - "$W" "$ARRIVALS" <<'PY' | tee -a "$log" >"$work/watch.out"
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
print(f"median {statistics.median(lat):.1f} ms, min {min(lat):.0f}, max {max(lat):.0f}")
PY
	kill -TERM $pid
	wait $pid
	note "watch exit code $? after SIGTERM"
	m=$(grep -oE "^median [0-9.]+" "$work/watch.out" | grep -oE "[0-9.]+")
	row "watch: arrival to committed mask, median of $ARRIVALS" "${m:-?} ms"
	cp "$W/masks/runs/lat/timings.csv" "$out/watch-timings.csv" 2>/dev/null
	cp "$W/masks/runs/lat/summary.csv" "$out/watch-summary.csv" 2>/dev/null
	# Where the time goes: per arrival, each stage's first start and last end (ms from the
	# arrival's first span, its read; queue_ms before it), medians over the arrivals.
	"$PY" - "$W/masks/runs/lat/timings.csv" "$W/masks/runs/lat/summary.csv" <<'PY' | tee -a "$log"
import csv, sys, statistics, collections
rows = list(csv.DictReader(open(sys.argv[1])))
vols = collections.defaultdict(lambda: collections.defaultdict(list))
for r in rows:
    s = float(r["start_ms"]); d = float(r["duration_ms"])
    vols[r["volume"]][r["stage"]].append((s, s + d))
span = collections.defaultdict(list)
for v, st in vols.items():
    t0 = min(a for iv in st.values() for a, _ in iv)
    for k, iv in st.items():
        span[k].append((min(a for a, _ in iv) - t0, max(b for _, b in iv) - t0, sum(b - a for a, b in iv)))
print("    stage: median first start / last end / summed duration, ms from the read's start")
for k, l in sorted(span.items(), key=lambda kv: statistics.median(x[0] for x in kv[1])):
    print(f"    {k:8s} {statistics.median(x[0] for x in l):7.1f} {statistics.median(x[1] for x in l):7.1f} {statistics.median(x[2] for x in l):7.1f}")
sums = list(csv.DictReader(open(sys.argv[2])))
for key in ("wall_ms", "queue_ms", "read_ms", "segment_ms", "write_ms"):
    vals = [float(r[key] or 0) for r in sums]
    if vals:
        print(f"    summary {key}: median {statistics.median(vals):.1f} (min {min(vals):.1f}, max {max(vals):.1f})")
PY
fi

{
	echo "| what | figure |"
	echo "| --- | --: |"
	cat "$work/rows"
	echo
	echo "$(nproc) cores, $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $($V version | head -1), $(date -u +%Y-%m-%d)"
} >"$table"
note "== table"
cat "$table" | tee -a "$log"
