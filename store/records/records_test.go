package records

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"voxpipe/internal/testexec"
	"voxpipe/telemetry/timing"
)

func TestCreateIsExclusive(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	r, err := Create(out, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := Create(out, "run-1"); !errors.Is(err, ErrRunExists) {
		t.Fatalf("second run with the same id: %v", err)
	}
	for _, bad := range []string{"", "..", "a/b"} {
		if _, err := Create(out, bad); err == nil {
			t.Errorf("run id %q accepted", bad)
		}
	}
	// Explicit paths are never truncated either.
	existing := filepath.Join(out, "mine.csv")
	os.WriteFile(existing, []byte("precious\n"), 0o644)
	if _, err := CreateAt("x", existing, filepath.Join(out, "s.csv")); !errors.Is(err, os.ErrExist) {
		t.Fatalf("CreateAt over an existing file: %v", err)
	}
	if b, _ := os.ReadFile(existing); string(b) != "precious\n" {
		t.Fatalf("existing file changed to %q", b)
	}
}

func row(volume string, status timing.Status, run string, at time.Time) timing.Summary {
	return timing.Summary{RunID: run, Volume: volume, Status: status, FinishedAt: Stamp(at)}
}

func TestLatest(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	rows := []timing.Summary{
		row("a", timing.StatusOK, "r1", at(1)),
		row("a", timing.StatusSkipped, "r2", at(5)), // up to date: a stays ok from r1
		row("b", timing.StatusFailed, "r1", at(1)),
		row("b", timing.StatusBusy, "r2", at(2)),
		row("b", timing.StatusOK, "r3", at(3)),
		row("c", timing.StatusOK, "r1", at(1)),
		row("c", timing.StatusFailed, "r2", at(9)), // redone (input changed) and failed
		row("d", timing.StatusBusy, "r1", at(1)),
		row("d", timing.StatusBusy, "r2", at(2)),
		{RunID: "old", Volume: "e", Status: timing.StatusOK}, // older schema: no finished_at
		row("e", timing.StatusOK, "r2", at(1)),
		// Times fixed-width: .5 s after at(1) sorts after it as text too.
		row("f", timing.StatusOK, "r9", at(1)),
		row("f", timing.StatusOK, "r1", at(1).Add(500*time.Millisecond)),
	}
	want := map[string]string{"a": "r1 ok", "b": "r3 ok", "c": "r2 failed", "d": "r2 busy", "e": "r2 ok", "f": "r1 ok"}
	got := Latest(rows)
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(got), len(want), got)
	}
	for i, r := range got {
		if i > 0 && got[i-1].Volume >= r.Volume {
			t.Errorf("not sorted by volume: %q before %q", got[i-1].Volume, r.Volume)
		}
		if s := r.RunID + " " + string(r.Status); s != want[r.Volume] {
			t.Errorf("volume %s: %s, want %s", r.Volume, s, want[r.Volume])
		}
	}
}

func TestUpdateVolumes(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	t0 := time.Now()
	for i, id := range []string{"r1", "r2"} {
		r, err := Create(out, id)
		if err != nil {
			t.Fatal(err)
		}
		r.Summary.Append(row("v1", timing.StatusOK, id, t0.Add(time.Duration(i)*time.Second)))
		r.Summary.Append(row("v2", []timing.Status{timing.StatusFailed, timing.StatusSkipped}[i], id, t0))
		r.Close()
	}
	// A run killed before it wrote its files, a stale temporary, and a damaged run file.
	os.MkdirAll(RunDir(out, "killed"), 0o755)
	os.WriteFile(filepath.Join(out, "."+VolumesName+".tmp-123"), []byte("x"), 0o644)
	os.MkdirAll(RunDir(out, "bad"), 0o755)
	os.WriteFile(filepath.Join(RunDir(out, "bad"), SummaryName), []byte("run_id,volume,status\n\"unterminated\n"), 0o644)

	err := UpdateVolumes(out)
	if err == nil {
		t.Error("the damaged run's file was not reported")
	}
	rows, rerr := timing.ReadSummaries(filepath.Join(out, VolumesName))
	if rerr != nil {
		t.Fatal(rerr)
	}
	if len(rows) != 2 || rows[0].Volume != "v1" || rows[0].RunID != "r2" || rows[1].Status != timing.StatusFailed {
		t.Fatalf("volumes.csv rows %+v", rows)
	}
	if left, _ := filepath.Glob(filepath.Join(out, ".*tmp*")); len(left) != 0 {
		t.Errorf("temporaries left: %v", left)
	}
}

// A run folder appears whole (both CSVs with their headers); staging folders that killed
// processes left are removed by the next run, those of live processes kept, and neither is
// listed as a run.
func TestCreateIsAtomicAndCleansStaging(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	runs := filepath.Join(out, RunsDir)
	os.MkdirAll(runs, 0o755)
	host, _ := os.Hostname()
	dead := testexec.Cmd(t, "true")
	dead.Run()
	deadDir := filepath.Join(runs, fmt.Sprintf("%s%s-%d-123", stagingPrefix, host, dead.Process.Pid))
	liveDir := filepath.Join(runs, fmt.Sprintf("%s%s-%d-456", stagingPrefix, host, os.Getpid()))
	for _, d := range []string{deadDir, liveDir} {
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, TimingsName), nil, 0o644) // killed before its header
	}
	r, err := Create(out, "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, name := range []string{TimingsName, SummaryName} {
		b, err := os.ReadFile(filepath.Join(RunDir(out, "r1"), name))
		if err != nil || !strings.HasPrefix(string(b), "run_id,volume,") {
			t.Errorf("%s: %q %v", name, b, err)
		}
	}
	if err := r.Summary.Append(timing.Summary{RunID: "r1", Volume: "v", Status: timing.StatusOK}); err != nil {
		t.Errorf("append after the folder's rename: %v", err)
	}
	if _, err := os.Stat(deadDir); err == nil {
		t.Error("a dead process's staging folder was left")
	}
	if _, err := os.Stat(liveDir); err != nil {
		t.Error("a live process's staging folder was removed")
	}
	dirs, _ := RunDirs(out)
	if len(dirs) != 1 || filepath.Base(dirs[0]) != "r1" {
		t.Errorf("RunDirs: %v", dirs)
	}
	left, _ := filepath.Glob(filepath.Join(runs, stagingPrefix+"*"))
	if len(left) != 1 {
		t.Errorf("staging folders: %v", left)
	}
}
