#!/usr/bin/env bash
# Runs deploy/slurm/voxpipe-array.sbatch on a real single-node Slurm cluster (Debian's
# slurm-wlm and munge, as in shared/ops.md) and checks what the array leaves:
#   - the 4-task array (sbatch --wait) exits 0, and each task is COMPLETED with ExitCode 0:0
#     (scontrol) and its log ends with "voxpipe exited 0";
#   - 16 generated volumes: each has exactly one row across OUT/runs/*/summary.csv, with
#     status ok, and its mask exists; there are 4 runs, slurm-<job>-<task>, and run
#     slurm-<job>-i's rows carry shard i/4 (every shard of 0/4..3/4 has rows) and this host;
#   - OUT/volumes.csv lists the 16 volumes, all ok;
#   - voxpipe report --run OUT --baseline OUT exits 0 and counts 16 ok volumes over 4 runs.
# It installs slurm-wlm and munge if missing, writes /etc/slurm/slurm.conf if there is none
# (or only its own), starts munged, slurmctld and slurmd where they are not running, and on
# exit stops only the daemons it started (by pid) and removes its temporary folder. Rerunnable.
# Needs root. Takes well under a minute on 2 cores once the packages are installed.
#
# Run from anywhere: bash scripts/slurm-test.sh
# (VOXPIPE=/path/to/voxpipe uses that binary instead of building one; SLURM_TEST_TIMEOUT, in
# seconds, bounds the wait for the array: default 240.)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

fail() { echo "slurm-test: FAIL: $*" >&2; exit 1; }
say() { echo "slurm-test: $*"; }

[ "$(id -u)" -eq 0 ] || fail "needs root (it starts munged, slurmctld and slurmd)"

timeout_s=${SLURM_TEST_TIMEOUT:-240}
tmp=$(mktemp -d /tmp/voxpipe-slurm-test.XXXXXX)
chmod 755 "$tmp"
started=() # "name pid" of the daemons this script started
jobid=""

cleanup() {
	local rc=$?
	set +e
	if [ -n "$jobid" ] && [ "$rc" -ne 0 ]; then
		scancel "$jobid" 2>/dev/null
	fi
	# Stop what this script started, last started first, by pid.
	local i name pid
	for ((i = ${#started[@]} - 1; i >= 0; i--)); do
		read -r name pid <<<"${started[$i]}"
		kill -TERM "$pid" 2>/dev/null || continue
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
		if kill -0 "$pid" 2>/dev/null; then
			echo "slurm-test: $name (pid $pid) ignored SIGTERM: SIGKILL" >&2
			kill -KILL "$pid" 2>/dev/null
		fi
		wait "$pid" 2>/dev/null
	done
	if [ "$rc" -ne 0 ] && [ -d "$tmp/logs" ]; then
		for f in "$tmp"/logs/*; do
			[ -f "$f" ] || continue
			echo "--- $f (last lines)" >&2
			tail -n 15 "$f" >&2
		done
	fi
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir "$tmp/logs"

# --- packages -----------------------------------------------------------------------------
need=()
for c in slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client munged:munge; do
	command -v "${c%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${c%%:*}" ] || need+=("${c##*:}")
done
if [ ${#need[@]} -gt 0 ]; then
	say "installing slurm-wlm munge (missing: ${need[*]})"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi

# --- configuration ------------------------------------------------------------------------
host=$(hostname -s)
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
chown munge:munge /run/munge
chmod 755 /run/munge
marker="# written by voxpipe scripts/slurm-test.sh"
conf=/etc/slurm/slurm.conf
cpus=$(nproc)
mem=$(free -m | awk '/^Mem:/{print int($2*0.8)}')
want=$(
	cat <<CONF
$marker (rewritten while no slurmctld runs)
ClusterName=local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=main Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
)
if [ ! -e "$conf" ] || { head -n1 "$conf" | grep -qF "$marker" && ! pgrep -x slurmctld >/dev/null; }; then
	if [ ! -e "$conf" ] || [ "$(cat "$conf")" != "$want" ]; then
		say "writing $conf (node $host, $cpus CPUs, ${mem} MB)"
		printf '%s\n' "$want" >"$conf"
	fi
else
	say "using the existing $conf"
fi
if [ ! -s /etc/munge/munge.key ]; then
	say "creating /etc/munge/munge.key"
	mungekey --create --keyfile=/etc/munge/munge.key
	chown munge:munge /etc/munge/munge.key
	chmod 400 /etc/munge/munge.key
fi

# start NAME CMD...: starts a daemon in the foreground of a background job, logging to
# $tmp/logs/NAME.log, and records its pid to stop it on exit.
start() {
	local name=$1
	shift
	"$@" </dev/null >"$tmp/logs/$name.log" 2>&1 &
	started+=("$name $!")
	say "started $name (pid $!)"
}
# wait_for WHAT SECONDS CMD...: polls CMD until it succeeds.
wait_for() {
	local what=$1 secs=$2
	shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || fail "$what: not after ${secs}s"
		sleep 0.5
	done
}

# --- daemons ------------------------------------------------------------------------------
if pgrep -x munged >/dev/null; then
	say "munged already running"
else
	start munged setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged --foreground
fi
wait_for "munge credentials" 20 bash -c 'munge -n | unmunge'

if pgrep -x slurmctld >/dev/null; then
	say "slurmctld already running"
else
	start slurmctld /usr/sbin/slurmctld -D
fi
wait_for "slurmctld answering (scontrol ping)" 30 bash -c 'scontrol ping | grep -q "is UP"'

if pgrep -x slurmd >/dev/null; then
	say "slurmd already running"
else
	start slurmd /usr/sbin/slurmd -D
fi

node_ready() { sinfo -h -n "$host" -o '%t' | grep -qE '^(idle|mix)$'; }
deadline=$((SECONDS + 60))
resumed=""
until node_ready; do
	state=$(sinfo -h -n "$host" -o '%t' 2>/dev/null || true)
	# A node left down or drained by an earlier session (its slurmd killed) is put back once.
	if [ -z "$resumed" ] && [[ $state =~ ^(down|drain|drng)\*?$ ]]; then
		say "node $host is $state: resuming it"
		scontrol update nodename="$host" state=resume || true
		resumed=1
	fi
	[ $SECONDS -lt $deadline ] || fail "node $host not idle after 60s (sinfo: ${state:-nothing}; see /var/log/slurm/)"
	sleep 0.5
done
say "cluster up: $(sinfo -h -o '%P %a %D %t %N' | head -n1)"

# --- the batch ----------------------------------------------------------------------------
if [ -n "${VOXPIPE:-}" ]; then
	cp "$VOXPIPE" "$tmp/voxpipe"
else
	go build -o "$tmp/voxpipe" ./cmd/voxpipe
fi
vp=$tmp/voxpipe
"$vp" gen -o "$tmp/gen" --dims 24x20x12 --count 16 --seed 1 >/dev/null
in=$tmp/gen/volumes
out=$tmp/out
[ "$(ls "$in" | wc -l)" -eq 16 ] || fail "voxpipe gen did not make 16 volumes"

say "sbatch --array=0-3 deploy/slurm/voxpipe-array.sbatch (waiting at most ${timeout_s}s)"
submit_rc=0
timeout "$timeout_s" sbatch --wait --parsable --array=0-3 --cpus-per-task=1 --mem=256M --time=00:10:00 \
	--job-name=voxpipe-slurm-test --output="$tmp/logs/task-%A_%a.out" --chdir="$tmp" \
	--export=ALL,INPUT="$in",OUTPUT="$out",VOXPIPE="$vp" \
	"$repo/deploy/slurm/voxpipe-array.sbatch" >"$tmp/sbatch.out" 2>"$tmp/logs/sbatch.err" || submit_rc=$?
jobid=$(head -n1 "$tmp/sbatch.out" | cut -d';' -f1)
[ -n "$jobid" ] || fail "sbatch did not submit (exit $submit_rc): $(cat "$tmp/logs/sbatch.err")"
[ "$submit_rc" -ne 124 ] || fail "array job $jobid not finished after ${timeout_s}s (squeue: $(squeue -h -j "$jobid" -o '%i %T %r' | tr '\n' ' '))"
[ "$submit_rc" -eq 0 ] || fail "sbatch --wait exited $submit_rc for array job $jobid (its highest task exit code)"
say "array job $jobid finished"

# --- checks -------------------------------------------------------------------------------
# Each task: COMPLETED, ExitCode=0:0 (slurmctld keeps finished jobs for MinJobAge, 300 s).
scontrol -o show job "$jobid" >"$tmp/jobs.txt" || fail "scontrol show job $jobid failed"
for i in 0 1 2 3; do
	line=$(grep -E "(^| )ArrayTaskId=$i( |$)" "$tmp/jobs.txt" || true)
	[ -n "$line" ] || fail "scontrol shows no task $i of job $jobid"
	grep -q ' JobState=COMPLETED ' <<<"$line" || fail "task $i: $(grep -o 'JobState=[^ ]*' <<<"$line")"
	grep -q ' ExitCode=0:0 ' <<<"$line" || fail "task $i: $(grep -o ' ExitCode=[^ ]*' <<<"$line")"
	log=$tmp/logs/task-${jobid}_$i.out
	[ -f "$log" ] || fail "task $i left no log $log"
	tail -n1 "$log" | grep -qx 'voxpipe-array: voxpipe exited 0' || fail "task $i: log does not end with 'voxpipe exited 0'"
done
say "4 tasks COMPLETED with exit code 0"

# runs: exactly slurm-<job>-0..3
runs=$(cd "$out/runs" && ls | sort | tr '\n' ' ')
[ "$runs" = "slurm-$jobid-0 slurm-$jobid-1 slurm-$jobid-2 slurm-$jobid-3 " ] ||
	fail "OUT/runs holds '$runs', want slurm-$jobid-0..3"

# All summary rows as "run volume status shard host output", columns found by their names.
rows=$tmp/rows.txt
for f in "$out"/runs/*/summary.csv; do
	awk -F, -v run="$(basename "$(dirname "$f")")" '
		NR == 1 {
			for (i = 1; i <= NF; i++) col[$i] = i
			n = split("run_id volume status shard host output", need, " ")
			for (k = 1; k <= n; k++) if (!(need[k] in col)) { print FILENAME ": no column " need[k] > "/dev/stderr"; exit 1 }
			next
		}
		$col["run_id"] != run { print FILENAME ": run_id " $col["run_id"] > "/dev/stderr"; exit 1 }
		{ print run, $col["volume"], $col["status"], $col["shard"], $col["host"], $col["output"] }
	' "$f" || fail "$f: unexpected content"
done >"$rows"

n_rows=$(wc -l <"$rows")
[ "$n_rows" -eq 16 ] || fail "$n_rows summary rows over all runs, want 16 (one per volume): $(cat "$rows")"
not_ok=$(awk '$3 != "ok"' "$rows")
[ -z "$not_ok" ] || fail "rows not ok: $not_ok"
for v in $(cd "$in" && ls | sed 's/\.nii\.gz$//'); do
	n=$(awk -v v="$v" '$2 == v && $3 == "ok"' "$rows" | wc -l)
	[ "$n" -eq 1 ] || fail "volume $v has $n ok rows, want 1"
	mask=$(awk -v v="$v" '$2 == v { print $6 }' "$rows")
	[ "$mask" = "$out/${v}_mask.nii.gz" ] || fail "volume $v: output column '$mask', want $out/${v}_mask.nii.gz"
	[ -s "$mask" ] || fail "volume $v: no mask at $mask"
done
for i in 0 1 2 3; do
	bad=$(awk -v r="slurm-$jobid-$i" -v s="$i/4" '$1 == r && $4 != s' "$rows")
	[ -z "$bad" ] || fail "run slurm-$jobid-$i has rows of another shard than $i/4: $bad"
	n=$(awk -v s="$i/4" '$4 == s' "$rows" | wc -l)
	[ "$n" -gt 0 ] || fail "no volume was done by shard $i/4"
done
bad=$(awk -v h="$(hostname)" '$5 != h' "$rows")
[ -z "$bad" ] || fail "rows whose host is not $(hostname): $bad"
say "16 volumes, one ok row and one mask each; shards 0/4..3/4 ($(awk '{print $4}' "$rows" | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}')), host $(hostname)"

# volumes.csv: the 16 volumes, all ok.
n_ok=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "status") s = i; next } $s == "ok"' "$out/volumes.csv" | wc -l)
n_all=$(($(wc -l <"$out/volumes.csv") - 1))
{ [ "$n_ok" -eq 16 ] && [ "$n_all" -eq 16 ]; } || fail "OUT/volumes.csv has $n_all rows, $n_ok ok; want 16 ok"

# The report over the whole output folder.
"$vp" report --run "$out" --baseline "$out" -o "$tmp/report" >"$tmp/logs/report.out" 2>&1 ||
	fail "voxpipe report exited $? (see $tmp/logs/report.out above)"
a_count=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "a_count") c = i; next } $1 == "end_to_end" { print $c }' "$tmp/report/report.csv")
[ "$a_count" = 16 ] || fail "report.csv: end_to_end a_count is '${a_count}', want 16"
grep -q '^- \*\*A\*\* (run): 4 run(s) ' "$tmp/report/report.md" || fail "report.md does not name 4 runs for A"
grep -qE '^\| A \| 16 \|' "$tmp/report/report.md" || fail "report.md's throughput table does not count 16 ok volumes for A"
say "voxpipe report: 16 ok volumes over 4 runs"

say "ok (job $jobid, ${SECONDS}s)"
