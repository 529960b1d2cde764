#!/usr/bin/env bash
# Checks the systemd units in deploy/systemd/ (voxpipe-watch.service, voxpipe-pacs.service,
# voxpipe-batch.service, voxpipe-batch.timer):
#   1. `systemd-analyze verify` reports nothing about them: no error and no warning (unknown
#      keys, bad values, a timer without its service, ...). verify exits 0 on most warnings, so
#      its output is read: any line not about some other unit's file fails the check.
#   2. `systemd-analyze security --offline=yes` rates each service's exposure at most
#      $MAX_EXPOSURE (tenths: 40 = 4.0, "OK"), so hardening options dropped by mistake fail.
#   3. voxpipe-batch.timer starts voxpipe-batch.service (verify does not check Unit=).
#   4. The check itself can fail: a copy of the watch unit with a misspelt key must be flagged.
# verify refuses an ExecStart whose binary does not exist, so voxpipe is built into a
# temporary folder and copies of the units run it instead of /usr/local/bin/voxpipe.
# Needs no running systemd (works as root in a container); installs Debian's systemd package
# if systemd-analyze is missing.
#
# Run from anywhere: bash scripts/check-units.sh
# (VOXPIPE=/path/to/voxpipe uses that binary instead of building one.)
set -euo pipefail
cd "$(dirname "$0")/.."

MAX_EXPOSURE=${MAX_EXPOSURE:-40}
units=(voxpipe-watch.service voxpipe-pacs.service voxpipe-batch.service voxpipe-batch.timer)

if ! command -v systemd-analyze >/dev/null 2>&1; then
	echo "check-units: installing Debian's systemd package (systemd-analyze)"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${VOXPIPE:-}" ]; then
	cp "$VOXPIPE" "$tmp/voxpipe"
else
	go build -o "$tmp/voxpipe" ./cmd/voxpipe
fi
mkdir "$tmp/units"
for u in "${units[@]}"; do
	[ -f "deploy/systemd/$u" ] || { echo "check-units: deploy/systemd/$u is missing"; exit 1; }
	grep -q '^ExecStart=/usr/local/bin/voxpipe ' "deploy/systemd/$u" ||
		[[ $u == *.timer ]] || { echo "check-units: $u: no ExecStart=/usr/local/bin/voxpipe ..."; exit 1; }
	sed "s#^ExecStart=/usr/local/bin/voxpipe #ExecStart=$tmp/voxpipe #" "deploy/systemd/$u" >"$tmp/units/$u"
done

# verify_quiet FILE...: runs systemd-analyze verify on FILEs; prints the lines that concern
# them (everything except lines naming another unit file under /lib, /usr/lib or /etc) and
# fails if there is any, or if verify itself fails.
verify_quiet() {
	local out rc=0
	out=$(SYSTEMD_LOG_COLOR=0 systemd-analyze verify --man=no "$@" 2>&1) || rc=$?
	local ours
	ours=$(printf '%s\n' "$out" | grep -v -E '^(/usr)?/lib/systemd/|^/etc/systemd/' | grep -v '^$' || true)
	if [ -n "$out" ] && [ "$out" != "$ours" ]; then
		printf '%s\n' "$out" | grep -E '^(/usr)?/lib/systemd/|^/etc/systemd/' | sed 's/^/  (other unit, ignored) /'
	fi
	if [ "$rc" -ne 0 ] || [ -n "$ours" ]; then
		printf '%s\n' "$ours"
		return 1
	fi
}

echo "check-units: systemd-analyze verify ${units[*]}"
(cd "$tmp/units" && verify_quiet "${units[@]}") || { echo "check-units: FAIL: systemd-analyze verify complained (above)"; exit 1; }

for u in voxpipe-watch.service voxpipe-pacs.service voxpipe-batch.service; do
	score=$(cd "$tmp/units" && systemd-analyze security --offline=yes "$u" 2>&1 | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
	echo "check-units: $u exposure $score (at most $MAX_EXPOSURE/10)"
	(cd "$tmp/units" && systemd-analyze security --offline=yes --threshold="$MAX_EXPOSURE" "$u" >"$tmp/security.txt" 2>&1) || {
		grep '✗' "$tmp/security.txt" || cat "$tmp/security.txt"
		echo "check-units: FAIL: $u is more exposed than $MAX_EXPOSURE/10 (hardening options missing?)"
		exit 1
	}
done

# verify accepts a timer whose Unit= names no unit: it must start the batch service.
timer_unit=$(sed -n 's/^Unit=//p' deploy/systemd/voxpipe-batch.timer)
[ "${timer_unit:-voxpipe-batch.service}" = voxpipe-batch.service ] ||
	{ echo "check-units: FAIL: voxpipe-batch.timer starts '$timer_unit', not voxpipe-batch.service"; exit 1; }

# The check must be able to fail: a misspelt key (verify's exit status stays 0 for it).
mkdir "$tmp/bad"
sed 's/^NoNewPrivileges=/NoNewPrivilege=/' "$tmp/units/voxpipe-watch.service" >"$tmp/bad/voxpipe-watch.service"
if (cd "$tmp/bad" && verify_quiet voxpipe-watch.service >/dev/null); then
	echo "check-units: FAIL: a misspelt key in a copy of voxpipe-watch.service went unnoticed"
	exit 1
fi

echo "check-units: ok: ${units[*]}"
