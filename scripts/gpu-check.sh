#!/usr/bin/env bash
# The one command to run ON the GPU machine, from the repository root, after scripts/gpu-build.sh
# built bin/ here (carry bin). Runs the cuda-tagged tests (per-kernel tests, engine vs the CPU
# engine and the fp16 engine against fp32, the confidence against the CPU engine's, events, pinned memory, the 512x512x1000 benchmark of
# both precisions, the fused kernel's variants and ncu), compute-sanitizer's memcheck, racecheck
# and synccheck on small fused cases when it is installed (GPU_CHECK_SANITIZER_FP32=1 adds the
# float32 kernels), and prints a table at the end. Results go to
# $OUT (the device tool's result folder, at most 8 files come back) or /tmp/gpu-check:
# machine.txt, summary.txt, logs.txt (every step's log, appended as the steps finish), tables.txt
# (likewise, the TABLE lines) and ncu.txt.
#   VOXPIPE_GPU_BENCH=0 skips the benchmark; GPU_CHECK_PINNED_COST=1 adds BenchmarkPinnedCost
#   (ways of page-locking 512 MiB); GPU_CHECK_SANITIZER=0 skips compute-sanitizer,
#   GPU_CHECK_RACECHECK=0 its racecheck and synccheck; GPU_CHECK_NCU=0 skips ncu,
#   GPU_CHECK_NCU_SECTIONS chooses its sections.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/gpu-check}"
mkdir -p "$out"
logs=$(mktemp -d)
export PATH="$PATH:/usr/local/cuda/bin"
steps=()
failed=0

step() { # step NAME TIMEOUT_S CMD...: runs CMD, its output in $logs/NAME.log
	local name=$1 limit=$2
	shift 2
	local t0=$SECONDS
	echo "=== $name: $*"
	timeout "$limit" "$@" >"$logs/$name.log" 2>&1
	local rc=$?
	local status=PASS
	[[ $rc -ne 0 ]] && status="FAIL(rc=$rc)" && failed=1
	steps+=("$name|$status|$((SECONDS - t0)) s")
	grep -E -- "^(--- |=== RUN|ok|FAIL|PASS|panic)|TABLE\|" "$logs/$name.log" | grep -v "=== RUN" | tail -n 60
	[[ $rc -ne 0 ]] && tail -n 15 "$logs/$name.log"
	# Saved as it goes, so a run cut short still brings its finished steps back.
	{ echo "######## $name ($status, $((SECONDS - t0)) s)"; cat "$logs/$name.log"; } >>"$out/logs.txt"
	grep -h "TABLE|" "$logs/$name.log" | sed 's/.*TABLE|//' >>"$out/tables.txt"
	return 0
}

rm -f "$out/logs.txt" "$out/tables.txt"
{
	date -u +"%Y-%m-%dT%H:%M:%SZ"
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
} | tee "$out/machine.txt"

[[ -x bin/voxpipe-cuda ]] && step version 60 bin/voxpipe-cuda version
# Most wanted first: a run cut short keeps them.
if [[ "${VOXPIPE_GPU_BENCH:-1}" != 0 ]]; then
	step bench 180 bin/cuda.test -test.v -test.count=1 -test.run 'TestCUDABenchmark512$'
fi
if [[ -f bin/experiments.fatbin ]]; then
	export VOXPIPE_EXPERIMENT_FATBIN=$PWD/bin/experiments.fatbin
	step variants 120 bin/bench.test -test.v -test.count=1 -test.run 'TestConvVariants$'
fi
if [[ -f bin/fused-variants.txt ]]; then
	export VOXPIPE_FUSED_VARIANTS=$(cat bin/fused-variants.txt)
	step fused-variants 120 bin/bench.test -test.v -test.count=1 -test.run 'TestFusedVariants$'
fi
if [[ -f bin/mma-peak.fatbin ]]; then
	VOXPIPE_MMA_FATBIN=$PWD/bin/mma-peak.fatbin step mma-peak 60 bin/bench.test -test.run '^$' -test.bench 'MMAPeak$' -test.benchtime 1x
fi
if [[ "${GPU_CHECK_PINNED_COST:-0}" != 0 && -x bin/pinned.test ]]; then
	step pinned-cost 120 bin/pinned.test -test.run '^$' -test.bench 'PinnedCost$' -test.benchtime 1x
fi
step engine 300 bin/cuda.test -test.v -test.count=1 -test.run 'TestCUDA(MatchesCPU|PinnedAndGrowth|Events|CancelAndBadInput|FP16MatchesFP32|FP16Phantoms|KernelImages|ConfidenceMatchesCPU)$'
# The kernel image the device picks (the fatbin), then the fatbin forced.
# From its package's folder, as go test runs it: some of its tests read the package's sources.
step kernels 120 bash -c 'cd engine/cuda/kernels && exec ../../../bin/kernels.test -test.v -test.count=1'
VOXPIPE_KERNELS=fatbin step kernels-fatbin 120 bin/kernels.test -test.v -test.count=1 -test.run 'TestConv1|TestConv2AndConvG|TestGateHead|TestWrapperArgumentChecks'
# On Hopper, the same tests on the lab's sm_90a cubin (lab/wgmma, not embedded: loaded from its file).
if [[ "$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1)" == 9.0 ]]; then
	VOXPIPE_KERNELS=$PWD/lab/wgmma/voxpipe_sm90a.cubin step kernels-sm90a 120 bin/kernels.test -test.v -test.count=1 -test.run 'TestConv1|TestConv2AndConvG|TestGateHead|TestWrapperArgumentChecks'
fi
if [[ -f bin/fused-variants.txt ]]; then
	# ncu on the committed fused kernel (its first launch in TestFusedVariants).
	if [[ "${GPU_CHECK_NCU:-1}" != 0 ]] && command -v ncu >/dev/null; then
		sections="${GPU_CHECK_NCU_SECTIONS:-SpeedOfLight WarpStateStats ComputeWorkloadAnalysis Occupancy LaunchStats MemoryWorkloadAnalysis InstructionStats}"
		VOXPIPE_VARIANT_RUNS=1 step ncu 200 ncu --clock-control none -k "regex:${GPU_CHECK_NCU_KERNELS:-^fused_i16\$}" --launch-count 1 \
			$(printf -- '--section %s ' $sections) bin/bench.test -test.count=1 -test.run 'TestFusedVariants$'
	fi
fi
if [[ "${GPU_CHECK_SANITIZER:-1}" != 0 ]] && command -v compute-sanitizer >/dev/null; then
	fused='TestCUDAFP16MatchesFP32/C6K3_33x9x6|TestCUDAFP16MatchesFP32/C16K4_97x41x1|TestCUDAEvents/fp16'
	if [[ "${GPU_CHECK_SANITIZER_FP32:-0}" != 0 ]]; then
		step memcheck-kernels 90 compute-sanitizer --tool memcheck --error-exitcode 9 bin/kernels.test -test.count=1 -test.run 'TestConv1|TestConv2AndConvG|TestGateHead'
		step memcheck-engine 90 compute-sanitizer --tool memcheck --error-exitcode 9 bin/cuda.test -test.count=1 -test.run 'TestCUDAMatchesCPU/C6K3|TestCUDAEvents/fp32'
		step racecheck 90 compute-sanitizer --tool racecheck --error-exitcode 9 bin/kernels.test -test.count=1 -test.run 'TestConv1|TestConv2AndConvG'
	fi
	step memcheck-fused 90 compute-sanitizer --tool memcheck --error-exitcode 9 bin/cuda.test -test.count=1 -test.run "$fused"
	if [[ "${GPU_CHECK_RACECHECK:-1}" != 0 ]]; then
		step racecheck-fused 120 compute-sanitizer --tool racecheck --error-exitcode 9 bin/cuda.test -test.count=1 -test.run "$fused"
		step synccheck-fused 90 compute-sanitizer --tool synccheck --error-exitcode 9 bin/cuda.test -test.count=1 -test.run "$fused"
	fi
fi

[[ -f "$logs/ncu.log" ]] && cp "$logs/ncu.log" "$out/ncu.txt"
{
	echo "==================== gpu-check summary ===================="
	cat "$out/machine.txt"
	printf '%s\n' "${steps[@]}" | awk -F'|' '{printf "%-18s %-14s %s\n", $1, $2, $3}'
	echo
	grep -h "TABLE|" "$logs"/*.log | sed 's/.*TABLE|//' | awk -F'|' '{printf "%-48s %s\n", $1, $2}'
} | tee "$out/summary.txt"
rm -rf "$logs"
exit $failed
