package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"voxpipe/pipeline/timing"
	"voxpipe/segment"
)

func TestBenchCPU(t *testing.T) {
	out := t.TempDir()
	modelPath, _ := testModel(t)
	app := newApp()
	var stdout bytes.Buffer
	app.Writer = &stdout
	args := []string{"voxpipe", "bench", "-q", "--engine", "cpu", "--model", modelPath, "--dims", "24x20x12",
		"--runs", "3", "--warmup", "1", "--file-runs", "1", "--slab", "5", "-o", out}
	if err := app.Run(flagsFirst(app, args)); err != nil {
		t.Fatal(err)
	}
	line := stdout.String()
	for _, want := range []string{"bench 24x20x12 cpu slab 5 n=3", "pinned-in to mask-out", "run file-to-file"} {
		if !strings.Contains(line, want) {
			t.Errorf("summary line lacks %q: %s", want, line)
		}
	}
	summary, err := timing.ReadCSV[timing.Summary](filepath.Join(out, "summary.csv"))
	if err != nil || len(summary) != 3 {
		t.Fatalf("summary.csv: %d rows, %v", len(summary), err)
	}
	rows, err := timing.ReadCSV[timing.Row](filepath.Join(out, "timings.csv"))
	if err != nil {
		t.Fatal(err)
	}
	segments := 0
	for _, r := range rows {
		if r.Stage == "segment" && r.Slab >= 0 {
			segments++
		}
	}
	if segments != 3*3 { // 12 slices in slabs of 5: 3 slabs, 3 runs
		t.Errorf("%d per-slab segment rows, want 9", segments)
	}
}

func TestHiddenCopyFraction(t *testing.T) {
	ms := time.Millisecond
	events := []segment.Event{
		{Stage: "h2d", Start: 0, Duration: 10 * ms},          // hidden 0..5 behind nothing, 5..10 behind kernels 0
		{Stage: "kernels", Start: 5 * ms, Duration: 20 * ms}, //
		{Stage: "d2h", Start: 20 * ms, Duration: 10 * ms},    // 20..25 hidden
	}
	if got, want := hiddenCopyFraction(events), 10.0/20.0; got != want {
		t.Errorf("hidden fraction %v, want %v", got, want)
	}
	if hiddenCopyFraction(nil) != 0 {
		t.Error("no copies: want 0")
	}
}

func TestBenchReadOnly(t *testing.T) {
	app := newApp()
	var stdout bytes.Buffer
	app.Writer = &stdout
	args := []string{"voxpipe", "bench", "--read-only", "../../fixtures/volumes", "--readers", "3", "-o", t.TempDir()}
	if err := app.Run(flagsFirst(app, args)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "4 volumes, 3 readers") {
		t.Errorf("read-only summary: %s", stdout.String())
	}
	args = []string{"voxpipe", "bench", "--read-only", "../../fixtures", "-o", t.TempDir()}
	if err := app.Run(flagsFirst(app, args)); err == nil {
		t.Error("a folder without volumes gave no error")
	}
}
