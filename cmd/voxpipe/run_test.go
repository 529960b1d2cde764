package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"voxpipe/engine/cpu"
	"voxpipe/engine/cuda"
	"voxpipe/engine/engine"

	"voxpipe/internal/testexec"
	"voxpipe/io/nifti"
	"voxpipe/model"
	"voxpipe/store/records"
	"voxpipe/telemetry/timing"
)

// testBinary builds voxpipe once for the tests that need a separate process (signals, RSS);
// parallel tests wait for the one build.
var testBinary = func() func(t *testing.T) string {
	var mu sync.Mutex
	var path string
	var err error
	var out []byte
	built := false
	return func(t *testing.T) string {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if !built {
			built = true
			dir, _ := os.MkdirTemp("", "voxpipe-bin")
			path = filepath.Join(dir, "voxpipe")
			out, err = testexec.Cmd(t, "go", "build", "-o", path, ".").CombinedOutput()
		}
		if err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		return path
	}
}()

// testModel writes a random model (4 classes, 8 channels: fast) and returns its path.
func testModel(t *testing.T) (string, *model.Model) {
	t.Helper()
	m := model.RandomModel(8, 4, 7)
	data, err := m.MarshalSafetensors()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, m
}

// badBatch generates good phantoms and adds a truncated volume, a corrupt gzip and a file
// with a NIfTI name that is not NIfTI.
func badBatch(t *testing.T, good int, dims string) string {
	t.Helper()
	dir := t.TempDir()
	genRun(t, "--out", dir, "--dims", dims, "--count", strconv.Itoa(good), "--seed", "5")
	in := filepath.Join(dir, "volumes")
	data, err := os.ReadFile(filepath.Join(in, "phantom_000.nii.gz"))
	if err != nil {
		t.Fatal(err)
	}
	corrupt := append([]byte(nil), data...)
	for i := len(corrupt) / 2; i < len(corrupt)/2+64; i++ {
		corrupt[i] ^= 0xa5
	}
	os.WriteFile(filepath.Join(in, "corrupt.nii.gz"), corrupt, 0o644)
	_, raw := readRaw(t, filepath.Join(in, "phantom_000.nii.gz"))
	os.WriteFile(filepath.Join(in, "truncated.nii"), raw[:len(raw)*2/3], 0o644)
	os.WriteFile(filepath.Join(in, "notnifti.nii"), bytes.Repeat([]byte("not a volume "), 100), 0o644)
	return in
}

// readRaw returns the uncompressed bytes of a .nii.gz written as a plain .nii.
func readRaw(t *testing.T, path string) (*nifti.Header, []byte) {
	t.Helper()
	r, err := nifti.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := r.Header()
	plain := filepath.Join(t.TempDir(), "plain.nii")
	w, err := nifti.Create(plain, h, nifti.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, r.SliceVoxels()*h.Datatype.Size())
	for {
		if _, err := r.ReadSlicesRaw(buf, 1); err != nil {
			break
		}
		if err := w.WriteSlices(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	return h, raw
}

// directMask runs the engine straight on a volume file, the way the pipeline should.
func directMask(t *testing.T, m *model.Model, path string) []uint8 {
	t.Helper()
	r, err := nifti.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := r.Header()
	vol := &model.Volume{NX: h.NX(), NY: h.NY(), NZ: h.NZ(), I16: make([]int16, h.NX()*h.NY()*h.NZ())}
	if _, err := r.ReadSlicesInt16(vol.I16, h.NZ()); err != nil {
		t.Fatal(err)
	}
	slope, inter := r.Scaling()
	normalise(vol, slope, inter)
	out := make([]uint8, len(vol.I16))
	if err := cpu.New(m, 0).Segment(context.Background(), vol, out, engine.Options{Slab: vol.NZ}); err != nil {
		t.Fatal(err)
	}
	return out
}

// runSummary reads the summary.csv of run id under out.
func runSummary(t *testing.T, out, id string) []timing.Summary {
	t.Helper()
	s, err := timing.ReadSummaries(filepath.Join(records.RunDir(out, id), records.SummaryName))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRunEndToEnd(t *testing.T) {
	t.Parallel()
	in := badBatch(t, 3, "40x36x20")
	out := filepath.Join(t.TempDir(), "out")
	modelPath, mdl := testModel(t)
	args := func(id string, extra ...string) []string {
		return append([]string{"voxpipe", "run", "--quiet", "--model", modelPath, "--engine", "cpu", "--slab", "7", "--run-id", id, in, "-o", out}, extra...)
	}
	if code := run(args("first")); code != exitFailed {
		t.Fatalf("exit code %d, want %d (some volumes failed)", code, exitFailed)
	}
	checkFirstRun(t, in, out, mdl)
	checkReruns(t, out, args)
	// Only good volumes: exit 0.
	good := filepath.Join(t.TempDir(), "good")
	os.MkdirAll(good, 0o755)
	for _, name := range []string{"phantom_000.nii.gz", "phantom_001.nii.gz"} {
		data, _ := os.ReadFile(filepath.Join(in, name))
		os.WriteFile(filepath.Join(good, name), data, 0o644)
	}
	if code := run([]string{"voxpipe", "run", "-q", "--model", modelPath, good, "-o", filepath.Join(t.TempDir(), "o2")}); code != 0 {
		t.Errorf("all-good batch: exit code %d, want 0", code)
	}
}

// badBatchErrors are the broken volumes of badBatch, and the file their errors name.
var badBatchErrors = map[string]string{"corrupt": "corrupt.nii.gz", "truncated": "truncated.nii", "notnifti": "notnifti.nii"}

// checkFirstRun checks the records and masks of TestRunEndToEnd's first run over badBatch:
// the good volumes' masks are the engine's direct output, the bad ones failed naming their file.
func checkFirstRun(t *testing.T, in, out string, mdl *model.Model) {
	t.Helper()
	summary := runSummary(t, out, "first")
	rows, err := timing.ReadRows(filepath.Join(records.RunDir(out, "first"), records.TimingsName))
	if err != nil || len(rows) == 0 {
		t.Fatalf("timings.csv: %d rows, %v", len(rows), err)
	}
	if len(summary) != 6 {
		t.Fatalf("%d summary rows, want 6", len(summary))
	}
	for _, s := range summary {
		if s.FinishedAt == "" || s.Host == "" {
			t.Errorf("%s: finished_at %q host %q", s.Volume, s.FinishedAt, s.Host)
		}
		if frag, bad := badBatchErrors[s.Volume]; bad {
			if s.Status != timing.StatusFailed || !strings.Contains(s.Error, frag) {
				t.Errorf("%s: status %s error %q, want failed naming %s", s.Volume, s.Status, s.Error, frag)
			}
			continue
		}
		if s.Status != timing.StatusOK || s.Reason != "new" {
			t.Fatalf("%s: %s %s (reason %q)", s.Volume, s.Status, s.Error, s.Reason)
		}
		_, mask, err := nifti.ReadUint8(s.Output)
		if err != nil {
			t.Fatal(err)
		}
		want := directMask(t, mdl, filepath.Join(in, s.Volume+".nii.gz"))
		if !bytes.Equal(mask, want) {
			t.Errorf("%s: mask differs from the engine's direct output", s.Volume)
		}
	}
	assertNoTemps(t, out)

}

// checkReruns checks TestRunEndToEnd's reruns: done volumes are skipped and earlier records
// untouched, a reused run id is refused, --overwrite redoes them, and volumes.csv has the
// latest outcome.
func checkReruns(t *testing.T, out string, args func(id string, extra ...string) []string) {
	t.Helper()
	// Again: the done volumes are skipped, the bad ones fail again; the first run's records
	// are untouched.
	before, _ := os.ReadFile(filepath.Join(records.RunDir(out, "first"), records.SummaryName))
	beforeTimings, _ := os.ReadFile(filepath.Join(records.RunDir(out, "first"), records.TimingsName))
	if code := run(args("second")); code != exitFailed {
		t.Fatalf("rerun exit code %d", code)
	}
	if n := countStatus(runSummary(t, out, "second"), timing.StatusSkipped); n != 3 {
		t.Errorf("rerun skipped %d volumes, want 3", n)
	}
	if after, _ := os.ReadFile(filepath.Join(records.RunDir(out, "first"), records.SummaryName)); !bytes.Equal(before, after) {
		t.Error("the rerun changed the first run's summary.csv")
	}
	if after, _ := os.ReadFile(filepath.Join(records.RunDir(out, "first"), records.TimingsName)); !bytes.Equal(beforeTimings, after) {
		t.Error("the rerun changed the first run's timings.csv")
	}
	// A run id already used is refused before any work.
	if code := run(args("second")); code != exitUsage {
		t.Errorf("reused run id: exit code %d, want %d", code, exitUsage)
	}
	// --overwrite redoes them.
	if code := run(args("third", "--overwrite")); code != exitFailed {
		t.Fatalf("overwrite exit code %d", code)
	}
	if n := countStatus(runSummary(t, out, "third"), timing.StatusOK); n != 3 {
		t.Errorf("overwrite redid %d volumes, want 3", n)
	}
	// volumes.csv: one row per volume, the latest decisive outcome.
	vols, err := timing.ReadSummaries(filepath.Join(out, records.VolumesName))
	if err != nil || len(vols) != 6 {
		t.Fatalf("volumes.csv: %d rows, %v", len(vols), err)
	}
	for _, v := range vols {
		if _, bad := badBatchErrors[v.Volume]; !bad && (v.Status != timing.StatusOK || v.RunID != "third") {
			t.Errorf("volumes.csv %s: %s from run %s, want ok from run third", v.Volume, v.Status, v.RunID)
		}
	}
}

func TestRunUsageErrors(t *testing.T) {
	t.Parallel()
	modelPath, _ := testModel(t)
	dir := t.TempDir()
	for name, args := range map[string][]string{
		"no inputs":       {"run", "-o", dir},
		"no output":       {"run", dir},
		"missing input":   {"run", "-o", dir, filepath.Join(dir, "nope")},
		"bad engine":      {"run", "--engine", "tpu", "-o", dir, "../../fixtures/volumes"},
		"bad log format":  {"run", "--log-format", "xml", "-o", dir, "../../fixtures/volumes"},
		"bad compression": {"run", "--compression", "12", "-o", dir, "../../fixtures/volumes"},
		"bad model":       {"run", "--model", filepath.Join(dir, "nope.safetensors"), "-o", dir, "../../fixtures/volumes"},
		"unknown flag":    {"run", "--frobnicate", "-o", dir, "../../fixtures/volumes"},
		"bad mask name":   {"run", "--model", modelPath, "--mask-name", "mask.nii.gz", "-o", dir, "../../fixtures/volumes"},
	} {
		if code := run(append([]string{"voxpipe"}, args...)); code != exitUsage {
			t.Errorf("%s: exit code %d, want %d", name, code, exitUsage)
		}
	}
	if !cuda.Compiled {
		if code := run([]string{"voxpipe", "run", "--engine", "cuda", "-o", dir, "../../fixtures/volumes"}); code != exitUsage {
			t.Errorf("--engine cuda without CUDA: exit code %d, want %d", code, exitUsage)
		}
	}
}

func countStatus(s []timing.Summary, status timing.Status) int {
	n := 0
	for _, r := range s {
		if r.Status == status {
			n++
		}
	}
	return n
}

func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp-") {
			t.Errorf("stray temporary %s", path)
		}
		return nil
	})
}

func TestRunSIGTERMMidBatch(t *testing.T) {
	t.Parallel()
	bin := testBinary(t)
	dir := t.TempDir()
	genRun(t, "--out", dir, "--dims", "64x64x48", "--count", "8", "--seed", "9")
	out := filepath.Join(dir, "out")
	cmd := testexec.Cmd(t, bin, "run", "--workers", "1", "--readers", "1", "--slab", "4", "--log-format", "json",
		"--run-id", "stopped", filepath.Join(dir, "volumes"), "-o", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the first mask is done, then stop the run while the next is in flight.
	waitForFile(t, cmd, &stderr, filepath.Join(out, "*_mask.nii.gz"))
	waitForFile(t, cmd, &stderr, filepath.Join(out, ".*.claim"))
	stopped := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if took := time.Since(stopped); took > 10*time.Second {
		t.Errorf("took %v to stop after SIGTERM", took)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitSIGTERM {
		t.Fatalf("exit %v, want code %d\n%s", err, exitSIGTERM, stderr.String())
	}
	assertNoTemps(t, out)
	summary, err := timing.ReadSummaries(filepath.Join(records.RunDir(out, "stopped"), records.SummaryName))
	if err != nil {
		t.Fatalf("summary.csv after SIGTERM: %v", err)
	}
	if _, err := timing.ReadRows(filepath.Join(records.RunDir(out, "stopped"), records.TimingsName)); err != nil {
		t.Fatalf("timings.csv after SIGTERM: %v", err)
	}
	masks, _ := filepath.Glob(filepath.Join(out, "*_mask.nii.gz"))
	if len(masks) == 8 {
		t.Fatal("the run finished before the signal; nothing was tested")
	}
	for _, m := range masks {
		if _, _, err := nifti.ReadUint8(m); err != nil {
			t.Errorf("mask left by an interrupted run is broken: %v", err)
		}
	}
	if ok := countStatus(summary, timing.StatusOK); ok != len(masks) {
		t.Errorf("%d ok rows but %d masks", ok, len(masks))
	}
}

// TestRunPeakRSSIndependentOfBatchSize runs 2 and 20 fixture volumes in separate processes and
// compares their own peak resident memory (measuredCmd: getrusage maxrss of the child alone;
// read directly, it was this test binary's peak, and the test compared two equal numbers).
// No volume's buffers may stay behind: the 18 volumes more may add at most 512 KiB each, less
// than a fixture's mask (576 KiB). Measured 2026-12-05 (-count 3): 54.6-55.2 MiB for 2, 60.9-62.2
// for 20, and 67.9 for 60 volumes: ~180 KiB a volume of peak, which the run does not keep (the
// live heap after a GC is flat: TestRunLiveHeapIndependentOfBatchSize), and two volumes do not
// yet fill every pool (three input buffers).
func TestRunPeakRSSIndependentOfBatchSize(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("maxrss is read from Linux rusage")
	}
	bin := testBinary(t)
	fixtures, _ := filepath.Glob("../../fixtures/volumes/*.nii.gz")
	if len(fixtures) == 0 {
		t.Fatal("no fixtures")
	}
	// The README's configuration: the embedded model, default flags. With -short, a small
	// model (seconds, not minutes): the run's own buffers, which must not grow with the
	// batch, are then a larger part of the peak.
	args := []string{"run", "-q"}
	if testing.Short() {
		modelPath, _ := testModel(t)
		args = append(args, "--model", modelPath)
	}
	peak := func(n int) int64 {
		in := t.TempDir()
		for i := 0; i < n; i++ {
			src, _ := filepath.Abs(fixtures[i%len(fixtures)])
			os.Symlink(src, filepath.Join(in, fmt.Sprintf("v%02d.nii.gz", i)))
		}
		cmd := measuredCmd(t, bin, append(slices.Clone(args), in, "-o", t.TempDir())...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("run %d volumes: %v\n%s", n, err, out)
		}
		return cmd.peakRSS(t) // KiB
	}
	small, large := peak(2), peak(20)
	t.Logf("peak RSS: 2 volumes %d KiB, 20 volumes %d KiB (%.1f%%)", small, large, 100*float64(large-small)/float64(small))
	if large-small > 18*512 {
		t.Errorf("peak RSS grows with the batch: %d KiB for 2 volumes, %d KiB for 20 (more than 512 KiB a volume)", small, large)
	}
}
