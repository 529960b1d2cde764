#!/usr/bin/env bash
# The CPU engine against issue 37's targets, side by side in one run: the same 128x128x96
# phantom segmented by voxpipe's CPU engine and by Debian's PyTorch (baseline/segment.py, the
# twin with the same weights), each on 1 core and on every core (taskset, GOMAXPROCS / --threads),
# CPU_TARGETS_RUNS times each (default 3), alternating; segment times from the records both
# write (summary.csv segment_ms). Prints, with medians:
#   - the FMA peak a core: vector lanes (16 with AVX-512, else 8 with AVX2) x 2 FLOP (a fused
#     multiply-add) x 2 FMA units x the clock (lscpu's max MHz, else /proc/cpuinfo's), an
#     assumption about the core (most x86 cores since Haswell/Zen 2 have two FMA pipes);
#   - voxpipe's GFLOP/s a core (the network's 29,200 FLOP a voxel, docs/perf.md) and its share
#     of the peak; voxpipe against PyTorch on the same cores; voxpipe's scaling 1 -> N cores.
#   scripts/cpu-targets.sh [WORKDIR]     (CPU_TARGETS_DIMS, default 128x128x96)
# On a machine without Go (the GPU machine): CPU_TARGETS_BIN=bin/voxpipe-cuda (a built voxpipe),
# PYTHON=python3 (a python with torch), CPU_TARGETS_CORES="1 2 4 8 16" (default: 1 and all).
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-/usr/bin/python3} # Debian's, with python3-torch
runs=${CPU_TARGETS_RUNS:-3}
dims=${CPU_TARGETS_DIMS:-128x128x96}
work=${1:-$(mktemp -d)}
mkdir -p "$work"
model=fixtures/model/voxpipe-default.safetensors
flop_per_voxel=29200
cores=$(nproc)
counts=${CPU_TARGETS_CORES:-1 $cores}
last=${counts##* }
if [ -n "${CPU_TARGETS_BIN:-}" ]; then
	cp "$CPU_TARGETS_BIN" "$work/voxpipe"
else
	timeout 600 go build -o "$work/voxpipe" ./cmd/voxpipe
fi
[ -d "$work/g" ] || timeout 300 "$work/voxpipe" gen -o "$work/g" --dims "$dims" --count 1 --seed 37 -q
vols=$work/g/volumes
voxels=$(awk -Fx '{print $1 * $2 * $3}' <<<"$dims")

mhz=$(lscpu | awk -F: '/CPU max MHz/ {gsub(/ /, "", $2); print $2}')
[ -n "$mhz" ] || mhz=$(awk -F: '/cpu MHz/ {print $2; exit}' /proc/cpuinfo)
lanes=8
grep -qw avx512f /proc/cpuinfo && lanes=16
grep -qw fma /proc/cpuinfo || { echo "no FMA on this CPU"; exit 1; }
peak=$(awk -v l="$lanes" -v m="$mhz" 'BEGIN {printf "%.1f", l * 2 * 2 * m / 1000}')
avx2peak=$(awk -v m="$mhz" 'BEGIN {printf "%.1f", 8 * 2 * 2 * m / 1000}')
echo "cores $cores, clock ${mhz} MHz, vector lanes $lanes: FMA peak ${peak} GFLOP/s a core (AVX2 alone: ${avx2peak}); voxpipe's kernels: ${VOXPIPE_CPU_KERNELS:-default}"

# segment_ms of the one volume in a summary.csv (voxpipe's and the baseline's share the schema)
segment_ms() { awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "segment_ms") c = i; next} {print $c}' "$1"; }
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

for n in $counts; do
	cpus=0-$((n - 1))
	for r in $(seq "$runs"); do
		rm -rf "$work/vp" "$work/pt"
		GOMAXPROCS=$n timeout 600 taskset -c "$cpus" "$work/voxpipe" run --resample off --engine cpu -q --run-id r "$vols" -o "$work/vp"
		echo "voxpipe $n $(segment_ms "$work/vp/runs/r/summary.csv")" >>"$work/times"
		timeout 900 taskset -c "$cpus" "$py" baseline/segment.py "$vols" -o "$work/pt" --model "$model" --device cpu --threads "$n" >/dev/null 2>&1
		echo "torch $n $(segment_ms "$(ls "$work"/pt/runs/*/summary.csv "$work"/pt/summary.csv 2>/dev/null | head -1)")" >>"$work/times"
	done
done
for n in $counts; do
	v=$(awk -v n="$n" '$1 == "voxpipe" && $2 == n {print $3}' "$work/times" | median)
	t=$(awk -v n="$n" '$1 == "torch" && $2 == n {print $3}' "$work/times" | median)
	awk -v n="$n" -v v="$v" -v t="$t" -v vox="$voxels" -v f="$flop_per_voxel" -v p="$peak" -v p2="$avx2peak" 'BEGIN {
		g = vox * f / (v / 1000) / 1e9 / n
		printf "%d core(s): voxpipe %.0f ms (%.1f GFLOP/s a core: %.0f %% of the FMA peak, %.0f %% of AVX2'"'"'s), PyTorch %.0f ms: %.2fx\n", n, v, g, 100 * g / p, 100 * g / p2, t, t / v
	}'
done
v1=$(awk '$1 == "voxpipe" && $2 == 1 {print $3}' "$work/times" | median)
vn=$(awk -v n="$last" '$1 == "voxpipe" && $2 == n {print $3}' "$work/times" | median)
awk -v a="$v1" -v b="$vn" -v n="$last" 'BEGIN {printf "voxpipe scaling 1 -> %d cores: %.2fx\n", n, a / b}'
echo "(runs: $work/times)"
