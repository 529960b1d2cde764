package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"voxpipe/internal/testexec"
	"voxpipe/store/records"
	"voxpipe/telemetry/timing"
)

// watcher is a `voxpipe watch` process.
type watcher struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan error
}

func startWatch(t *testing.T, inbox, out, id string, extra ...string) *watcher {
	t.Helper()
	bin := testBinary(t)
	model, _ := testModel(t)
	args := append([]string{"watch", "--engine", "cpu", "--model", model, "--log-format", "json", "--run-id", id, inbox, "-o", out}, extra...)
	w := &watcher{cmd: testexec.Cmd(t, bin, args...), done: make(chan error, 1)}
	w.cmd.Stderr = &w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.done <- w.cmd.Wait() }()
	t.Cleanup(func() {
		w.cmd.Process.Kill()
		<-w.done
	})
	// Ready once its run folder exists (made after the engine is open).
	waitFor(t, func() bool { _, err := os.Stat(records.RunDir(out, id)); return err == nil }, &w.stderr)
	return w
}

// stop sends SIGTERM and returns the exit code and how long the process took to exit.
func (w *watcher) stop(t *testing.T) (int, time.Duration) {
	t.Helper()
	sent := time.Now()
	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(time.Minute):
		t.Fatalf("watch did not exit after SIGTERM\n%s", w.stderr.String())
	}
	w.done <- nil // for the cleanup
	return w.cmd.ProcessState.ExitCode(), time.Since(sent)
}

func waitFor(t *testing.T, cond func() bool, log *bytes.Buffer) {
	t.Helper()
	if !poll(time.Now().Add(2*time.Minute), cond) {
		t.Fatalf("timed out\n%s", log.String())
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// Renamed in: taken at once; a .ready marker: taken without settling; a slow writer: taken once
// complete and settled. Each mask once, with its arrival in the records.
func TestWatchPickups(t *testing.T) {
	t.Parallel()
	src := smallVolumes(t, 3, "nii.gz")
	inbox, out := t.TempDir(), t.TempDir()
	w := startWatch(t, inbox, out, "w", "--settle", "1500ms")

	moved := time.Now()
	os.Rename(filepath.Join(src, "phantom_000.nii.gz"), filepath.Join(inbox, "a.nii.gz"))
	waitFor(t, func() bool { return exists(filepath.Join(out, "a_mask.nii.gz")) }, &w.stderr)
	if took := time.Since(moved); took > 1200*time.Millisecond {
		t.Errorf("renamed-in volume's mask after %v, not at once (settle is 1.5 s)", took)
	}

	data, _ := os.ReadFile(filepath.Join(src, "phantom_001.nii.gz"))
	f, _ := os.Create(filepath.Join(inbox, "slow.nii.gz"))
	for off := 0; off < len(data); off += len(data) / 5 {
		f.Write(data[off:min(off+len(data)/5, len(data))])
		pace(200 * time.Millisecond)
		if exists(filepath.Join(out, "slow_mask.nii.gz")) && off+len(data)/5 < len(data) {
			t.Fatal("a file still being written was taken")
		}
	}
	f.Close()
	last := time.Now()
	waitFor(t, func() bool { return exists(filepath.Join(out, "slow_mask.nii.gz")) }, &w.stderr)
	if took := time.Since(last); took < time.Second {
		t.Errorf("slow writer's file taken %v after its last write, before settling", took)
	}

	marked := filepath.Join(inbox, "marked.nii.gz")
	data, _ = os.ReadFile(filepath.Join(src, "phantom_002.nii.gz"))
	os.WriteFile(marked, data[:50], 0o644)
	pace(100 * time.Millisecond)
	os.WriteFile(marked, data, 0o644)
	os.WriteFile(marked+".ready", nil, 0o644)
	marker := time.Now()
	waitFor(t, func() bool { return exists(filepath.Join(out, "marked_mask.nii.gz")) }, &w.stderr)
	if took := time.Since(marker); took > 1200*time.Millisecond {
		t.Errorf("marked volume taken after %v, not at once", took)
	}

	if code, _ := w.stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM with nothing in flight, want 0\n%s", code, w.stderr.String())
	}
	rows := runSummary(t, out, "w")
	if len(rows) != 3 || countStatus(rows, timing.StatusOK) != 3 {
		t.Fatalf("summary: %+v", rows)
	}
	// JSON logs: every stderr line parses, the last one too.
	for _, line := range strings.Split(strings.TrimSpace(w.stderr.String()), "\n") {
		if !strings.HasPrefix(line, "{") || !strings.HasSuffix(line, "}") {
			t.Errorf("not a JSON line: %q", line)
		}
	}
	if vols, err := timing.ReadSummaries(filepath.Join(out, records.VolumesName)); err != nil || len(vols) != 3 {
		t.Errorf("volumes.csv: %d rows, %v", len(vols), err)
	}
}

// SIGTERM during a volume: it is finished within the grace and the watcher exits 0; with no
// grace left, it is abandoned cleanly and the exit code says so.
func TestWatchSIGTERMDuringAVolume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	genRun(t, "--out", dir, "--dims", "128x128x48", "--count", "2", "--seed", "4")
	for _, tc := range []struct {
		grace string
		code  int
		mask  bool
	}{{"2m", 0, true}, {"10ms", exitSIGTERM, false}} {
		inbox, out := t.TempDir(), t.TempDir()
		w := startWatch(t, inbox, out, "w", "--workers", "1", "--slab", "48", "--grace", tc.grace)
		src := filepath.Join(dir, "volumes", "phantom_000.nii.gz")
		data, _ := os.ReadFile(src)
		tmp := filepath.Join(t.TempDir(), "v.nii.gz")
		os.WriteFile(tmp, data, 0o644)
		os.Rename(tmp, filepath.Join(inbox, "v.nii.gz"))
		waitFor(t, func() bool { m, _ := filepath.Glob(filepath.Join(out, ".*.claim")); return len(m) > 0 }, &w.stderr)
		code, _ := w.stop(t)
		if code != tc.code {
			t.Errorf("grace %s: exit %d, want %d\n%s", tc.grace, code, tc.code, w.stderr.String())
		}
		if got := exists(filepath.Join(out, "v_mask.nii.gz")); got != tc.mask {
			t.Errorf("grace %s: mask written %v, want %v", tc.grace, got, tc.mask)
		}
		assertNoTemps(t, out)
		if c, _ := filepath.Glob(filepath.Join(out, ".*.claim*")); len(c) > 0 {
			t.Errorf("grace %s: claims left: %v", tc.grace, c)
		}
	}
}

// Two watchers on one inbox: every volume is done once.
func TestTwoWatchersShareAnInbox(t *testing.T) {
	t.Parallel()
	src := smallVolumes(t, 8, "nii.gz")
	inbox, out := t.TempDir(), t.TempDir()
	a := startWatch(t, inbox, out, "a", "--settle", "500ms")
	b := startWatch(t, inbox, out, "b", "--settle", "500ms")
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		os.Rename(filepath.Join(src, e.Name()), filepath.Join(inbox, e.Name()))
	}
	waitFor(t, func() bool {
		m, _ := filepath.Glob(filepath.Join(out, "*_mask.nii.gz"))
		return len(m) == 8
	}, &a.stderr)
	// Every volume's row is written (after its mask) before the watchers are stopped.
	waitFor(t, func() bool { return okRows(out, "a")+okRows(out, "b") == 8 }, &a.stderr)
	a.stop(t)
	b.stop(t)
	ok := map[string]int{}
	for _, id := range []string{"a", "b"} {
		for _, r := range runSummary(t, out, id) {
			if r.Status == timing.StatusOK {
				ok[r.Volume]++
			} else if r.Status != timing.StatusSkipped && r.Status != timing.StatusBusy {
				t.Errorf("%s in %s: %s %s", r.Volume, id, r.Status, r.Error)
			}
		}
	}
	if len(ok) != 8 {
		t.Errorf("%d volumes ok, want 8: %v", len(ok), ok)
	}
	for v, n := range ok {
		if n != 1 {
			t.Errorf("%s done %d times", v, n)
		}
	}
}

// --metrics-addr serves Prometheus metrics while the watch runs; a bad address is a usage
// error.
func TestWatchServesMetrics(t *testing.T) {
	t.Parallel()
	src := smallVolumes(t, 2, "nii.gz")
	inbox, out := t.TempDir(), t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	w := startWatch(t, inbox, out, "m", "--metrics-addr", addr)
	for _, n := range []string{"phantom_000", "phantom_001"} {
		os.Rename(filepath.Join(src, n+".nii.gz"), filepath.Join(inbox, n+".nii.gz"))
	}
	waitFor(t, func() bool { m, _ := filepath.Glob(filepath.Join(out, "*_mask.nii.gz")); return len(m) == 2 }, &w.stderr)
	var body string
	waitFor(t, func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return strings.Contains(body, `voxpipe_volumes_total{status="ok"} 2`)
	}, &w.stderr)
	for _, want := range []string{"voxpipe_stage_duration_seconds_bucket", "voxpipe_volumes_waiting 0", "voxpipe_engine_busy_seconds_total", "voxpipe_volumes_in_flight 0"} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	w.stop(t)
	model, _ := testModel(t)
	if code := run([]string{"voxpipe", "run", "-q", "--model", model, "--metrics-addr", "256.1.1.1:99999", smallVolumes(t, 1, "nii"), "-o", t.TempDir()}); code != exitUsage {
		t.Errorf("bad --metrics-addr: exit %d, want %d", code, exitUsage)
	}
}

// okRows is the number of ok rows in the summary of run id in out so far.
func okRows(out, id string) int {
	rows, _ := timing.ReadSummaries(filepath.Join(records.RunDir(out, id), records.SummaryName))
	n := 0
	for _, r := range rows {
		if r.Status == timing.StatusOK {
			n++
		}
	}
	return n
}
