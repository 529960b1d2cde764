package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/gocarina/gocsv"

	"voxpipe/store/records"
	"voxpipe/telemetry/timing"
)

// Runs with nothing to do: what they leave, and when they keep their records.

func TestRunEmptyInboxIsNothingToDo(t *testing.T) {
	t.Parallel()
	modelPath, _ := testModel(t)
	out := filepath.Join(t.TempDir(), "out")
	if code := run(runArgs(modelPath, t.TempDir(), "-o", out)); code != 0 {
		t.Errorf("empty inbox: exit %d, want 0", code)
	}
	if _, err := os.Stat(filepath.Join(out, records.RunsDir)); err == nil {
		t.Error("an idle tick left run records")
	}
}

// segmentedOnce segments two small volumes into a fresh output folder (run id "first") and
// returns the model, the input folder and the output folder.
func segmentedOnce(t *testing.T) (modelPath, in, out string) {
	t.Helper()
	modelPath, _ = testModel(t)
	in = smallVolumes(t, 2, "nii.gz")
	out = t.TempDir()
	if code := run(runArgs(modelPath, in, "-o", out, "--run-id", "first")); code != 0 {
		t.Fatalf("first run: exit %d", code)
	}
	return modelPath, in, out
}

// A rerun that finds every mask up to date exits 0 and leaves no records: a scheduled tick
// over a finished folder adds nothing.
func TestRunAllUpToDateLeavesNoRecords(t *testing.T) {
	t.Parallel()
	modelPath, in, out := segmentedOnce(t)
	vols, _ := os.ReadFile(filepath.Join(out, records.VolumesName))
	if code := run(runArgs(modelPath, in, "-o", out, "--run-id", "tick")); code != 0 {
		t.Fatalf("rerun: exit %d", code)
	}
	if _, err := os.Stat(records.RunDir(out, "tick")); err == nil {
		t.Error("an all-up-to-date rerun left its run folder")
	}
	if now, _ := os.ReadFile(filepath.Join(out, records.VolumesName)); !bytes.Equal(now, vols) {
		t.Error("an all-up-to-date rerun changed volumes.csv")
	}
	// Asked for explicitly, the records are kept.
	sum := filepath.Join(t.TempDir(), "s.csv")
	if code := run(runArgs(modelPath, in, "-o", out, "--summary", sum)); code != 0 {
		t.Fatalf("rerun with --summary: exit %d", code)
	}
	if rows, err := timing.ReadSummaries(sum); err != nil || countStatus(rows, timing.StatusSkipped) != 2 {
		t.Errorf("--summary of an all-skipped run: %d rows, %v", len(rows), err)
	}
}

// A tick that finds every mask up to date keeps its records when volumes.csv does not say so
// yet: there a process committed masks and was killed before writing its rows, while another
// recorded the volumes busy. Its skipped rows then correct the table (volumes.csv kept "busy"
// for done volumes before, and the chaos test met it).
func TestRunAllUpToDateCorrectsAStaleTable(t *testing.T) {
	t.Parallel()
	modelPath, in, out := segmentedOnce(t)
	// The committer's rows are lost; a concurrent process's busy rows are what is left.
	for _, p := range []string{filepath.Join(records.RunDir(out, "first"), records.SummaryName), filepath.Join(out, records.VolumesName)} {
		rows, err := timing.ReadSummaries(p)
		if err != nil || len(rows) != 2 {
			t.Fatalf("%s: %d rows, %v", p, len(rows), err)
		}
		for i := range rows {
			rows[i].Status, rows[i].Output = timing.StatusBusy, ""
		}
		b, err := gocsv.MarshalBytes(&rows)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code := run(runArgs(modelPath, in, "-o", out, "--run-id", "tick")); code != 0 {
		t.Fatalf("rerun: exit %d", code)
	}
	vols, err := timing.ReadSummaries(filepath.Join(out, records.VolumesName))
	if err != nil || countStatus(vols, timing.StatusSkipped) != 2 {
		t.Errorf("volumes.csv after the tick: %+v, %v; want both skipped", vols, err)
	}
	if _, err := os.Stat(records.RunDir(out, "tick")); err != nil {
		t.Errorf("the tick that corrected volumes.csv left no records: %v", err)
	}
	// Now the table agrees: the next tick leaves nothing.
	if code := run(runArgs(modelPath, in, "-o", out, "--run-id", "tick2")); code != 0 {
		t.Fatalf("second rerun: exit %d", code)
	}
	if _, err := os.Stat(records.RunDir(out, "tick2")); err == nil {
		t.Error("a tick over a settled folder left its run folder")
	}
}
