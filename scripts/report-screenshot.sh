#!/usr/bin/env bash
# Checks `voxpipe report` end to end on the sample CSVs in report/testdata and in a real browser:
#   1. the exit codes: 0 when the gate passes or is not evaluated (fewer than --min-volumes
#      volumes on a side; the samples have 3 to 5), 3 when it fails, 2 for bad input or usage;
#   2. report.html opened in headless Chromium (Debian's package, installed with apt-get when
#      missing) and saved as a screenshot, which must exist and not be blank.
# Usage: scripts/report-screenshot.sh [SCREENSHOT.png]
#   default: $TMPDIR/voxpipe-report-screenshot.png; pass docs/report-screenshot.png to refresh the
#   committed one. VOXPIPE=/path/to/voxpipe uses that binary instead of building ./cmd/voxpipe.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
shot=${1:-${TMPDIR:-/tmp}/voxpipe-report-screenshot.png}
case "$shot" in /*) ;; *) shot="$root/$shot" ;; esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

bin=${VOXPIPE:-}
if [[ -z "$bin" ]]; then
	echo "== build voxpipe"
	go build -o "$work/voxpipe" ./cmd/voxpipe
	bin="$work/voxpipe"
fi

fail() {
	echo "report-screenshot: $*" >&2
	exit 1
}

# expect CODE ARGS...: runs `voxpipe report ARGS...` in report/testdata and checks its exit code.
expect() {
	local want=$1 got=0
	shift
	(cd report/testdata && "$bin" report "$@") >"$work/stdout" 2>"$work/stderr" || got=$?
	if [[ "$got" != "$want" ]]; then
		cat "$work/stdout" "$work/stderr" >&2
		fail "voxpipe report $*: exit code $got, want $want"
	fi
	echo "ok: exit $got: voxpipe report $*"
}

echo "== exit codes"
expect 0 --run A --baseline B -o "$work/pass" --fail-if-slower 10 --min-volumes 4
grep -q '^\*\*Gate passed\*\*: end_to_end p50' "$work/stdout" || fail "Markdown does not say the gate passed"
expect 3 --run B --baseline A -o "$work/fail" --fail-if-slower 10 --min-volumes 4
grep -q '^\*\*Gate FAILED\*\*: end_to_end p50' "$work/stdout" || fail "Markdown does not say which gate failed"
grep -q 'gate FAILED' "$work/stderr" || fail "stderr does not say the gate failed"
expect 3 --run C --baseline A/shard-1 --baseline A/shard-0 -o "$work/stage" --fail-if-slower 100 --gate-stage read --min-volumes 3
grep -q "^\*\*Gate FAILED\*\*: read p50" "$work/stdout" || fail "Markdown does not name the failed stage gate"
expect 0 --run B --baseline A -o "$work/few" --fail-if-slower 10
grep -q '^\*\*Gate not evaluated\*\*: too few volumes (n=4 < 10)' "$work/stdout" || fail "Markdown does not say the gate was not evaluated"
grep -q 'gate not evaluated: too few volumes (n=4 < 10)' "$work/stderr" || fail "stderr does not say the gate was not evaluated"
expect 3 --run Q --baseline P -o "$work/turnaround" --fail-if-slower 10 --min-volumes 4
expect 0 --run Q --baseline P -o "$work/service" --fail-if-slower 10 --min-volumes 4 --gate-stage service
grep -q '^\*\*Gate passed\*\*: service p50' "$work/stdout" || fail "Markdown does not say the service gate passed"
expect 2 --run bad/bad_float_timings.csv --baseline B -o "$work/bad"
grep -q 'bad_float_timings.csv: line 4, column 7 (duration_ms)' "$work/stderr" || fail "bad CSV error lacks file, line and column"
expect 2 --run A -o "$work/usage"
expect 2 --run A --baseline B -o "$work/usage" --fail-if-slower ten
expect 2 --run A --baseline B -o "$work/usage" --fail-if-slower 10 --gate-stage h2d
expect 2 --run A --baseline B -o "$work/usage" --min-volumes 0
for f in report.md report.csv report.html; do
	[[ -s "$work/pass/$f" ]] || fail "$f missing or empty"
done

echo "== chromium"
# shellcheck source=lib/debian.sh
. scripts/lib/debian.sh
find_chromium || fail "no chromium"
"$chromium" --version 2>/dev/null || true

echo "== screenshot"
mkdir -p "$(dirname "$shot")"
rm -f "$shot"
# Chromium may exit non-zero over D-Bus noise in containers; the file decides.
timeout 180 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync \
	--user-data-dir="$work/profile" --screenshot="$shot" --window-size=1400,2400 \
	"file://$work/pass/report.html" >"$work/chromium.log" 2>&1 || true
if [[ ! -s "$shot" ]]; then
	tail -20 "$work/chromium.log" >&2
	fail "no screenshot at $shot"
fi
go run ./scripts/pngcheck "$shot"
echo "screenshot: $shot"
