package inbox

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"voxpipe/io/nifti"
	"voxpipe/jobs"
)

// volumeBytes is a small complete .nii file's bytes.
func volumeBytes(t *testing.T) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "v.nii")
	h := &nifti.Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: nifti.Int16, BitPix: 16,
		Dim: [8]int64{3, 16, 16, 8, 1, 1, 1, 1}, PixDim: [8]float64{1, 1, 1, 1}, SclSlope: 1, Magic: "n+1"}
	data := make([]byte, 2*16*16*8)
	for i := range data {
		data[i] = byte(i)
	}
	if err := nifti.Write(p, h, data, nifti.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	return b
}

type harness struct {
	in, out string
	box     *Inbox
	cancel  context.CancelFunc
	done    chan error
}

func start(t *testing.T, settle time.Duration, recursive bool) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{in: filepath.Join(dir, "inbox"), out: filepath.Join(dir, "inbox", "masks")}
	os.MkdirAll(h.out, 0o755)
	return h.run(t, settle, recursive)
}

func (h *harness) run(t *testing.T, settle time.Duration, recursive bool) *harness {
	t.Helper()
	box, err := New(Options{Folders: []string{h.in}, Recursive: recursive, OutDir: h.out, MaskName: "{name}_mask.nii.gz",
		Settle: settle, Rescan: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.box, h.cancel, h.done = box, cancel, make(chan error, 1)
	go func() { h.done <- box.Run(ctx, nil) }()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	h.cancel()
	<-h.done
}

// next waits up to limit for a job.
func (h *harness) next(t *testing.T, limit time.Duration) (jobs.Job, bool) {
	t.Helper()
	select {
	case j, ok := <-h.box.Jobs():
		return j, ok
	case <-time.After(limit):
		return jobs.Job{}, false
	}
}

// A volume renamed into the inbox is handed out at once, even with a long settle time.
func TestRenamedInAtOnce(t *testing.T) {
	h := start(t, time.Hour, false)
	tmp := filepath.Join(t.TempDir(), "scan.nii")
	os.WriteFile(tmp, volumeBytes(t), 0o644)
	moved := time.Now()
	if err := os.Rename(tmp, filepath.Join(h.in, "scan.nii")); err != nil {
		t.Skip("rename across folders:", err)
	}
	j, ok := h.next(t, 5*time.Second)
	if !ok {
		t.Fatal("no job for a volume renamed in")
	}
	if j.Name != "scan" || j.Output != filepath.Join(h.out, "scan_mask.nii.gz") || j.Arrived.Before(moved) {
		t.Errorf("job %+v", j)
	}
	if took := time.Since(moved); took > time.Second {
		t.Errorf("handed out %v after the rename", took)
	}
	// Handed once: nothing more comes for the same version.
	if j, ok := h.next(t, 300*time.Millisecond); ok {
		t.Errorf("handed again: %+v", j)
	}
}

// A file written in place, slowly, is handed out only once complete and settled.
func TestSlowWriterWaitsForSettle(t *testing.T) {
	const settle = 400 * time.Millisecond
	h := start(t, settle, false)
	data := volumeBytes(t)
	f, err := os.Create(filepath.Join(h.in, "slow.nii"))
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += 1024 {
		f.Write(data[off:min(off+1024, len(data))])
		f.Sync()
		if j, ok := h.next(t, 60*time.Millisecond); ok {
			t.Fatalf("handed out while being written (%d of %d bytes): %+v", off, len(data), j)
		}
	}
	f.Close()
	last := time.Now()
	j, ok := h.next(t, 10*settle)
	if !ok {
		t.Fatal("never handed out")
	}
	if since := time.Since(last); since < settle*3/4 {
		t.Errorf("handed out %v after the last write, before the %v settle", since, settle)
	}
	if j.Name != "slow" {
		t.Errorf("job %+v", j)
	}
}

// A .ready marker hands a volume out without waiting for it to settle.
func TestReadyMarker(t *testing.T) {
	h := start(t, time.Hour, false)
	data := volumeBytes(t)
	p := filepath.Join(h.in, "marked.nii")
	os.WriteFile(p, data[:100], 0o644) // seen incomplete first
	if _, ok := h.next(t, 300*time.Millisecond); ok {
		t.Fatal("an incomplete file was handed out")
	}
	os.WriteFile(p, data, 0o644)
	if _, ok := h.next(t, 300*time.Millisecond); ok {
		t.Fatal("a file written in place was handed out before settling or its marker")
	}
	os.WriteFile(p+".ready", nil, 0o644)
	if j, ok := h.next(t, 5*time.Second); !ok || j.Name != "marked" {
		t.Fatalf("marker: %+v %v", j, ok)
	}
}

// Files there at the start are handed out; a changed file is handed out again; masks and the
// output folder are left out.
func TestStartChangesAndOwnMasks(t *testing.T) {
	dir := t.TempDir()
	h := &harness{in: filepath.Join(dir, "inbox"), out: filepath.Join(dir, "inbox", "masks")}
	os.MkdirAll(filepath.Join(h.in, "sub"), 0o755)
	os.MkdirAll(h.out, 0o755)
	data := volumeBytes(t)
	os.WriteFile(filepath.Join(h.in, "a.nii"), data, 0o644)
	os.WriteFile(filepath.Join(h.in, "sub", "b.nii"), data, 0o644)
	os.WriteFile(filepath.Join(h.out, "c.nii"), data, 0o644) // in the output folder: not an input
	h.run(t, 200*time.Millisecond, true)
	got := map[string]bool{}
	for range 2 {
		j, ok := h.next(t, 5*time.Second)
		if !ok {
			t.Fatalf("only %v handed out", got)
		}
		got[j.Name] = true
	}
	if !got["a"] || !got["sub/b"] {
		t.Fatalf("handed out %v", got)
	}
	if j, ok := h.next(t, 500*time.Millisecond); ok {
		t.Fatalf("also handed out %+v", j)
	}
	// A new version of a: handed out again, after settling.
	later := time.Now().Add(time.Minute)
	os.Chtimes(filepath.Join(h.in, "a.nii"), later, later)
	h.box.rescan() // no inotify event for a changed mtime on every system
	if j, ok := h.next(t, 5*time.Second); !ok || j.Name != "a" {
		t.Fatalf("changed file: %+v %v", j, ok)
	}
	// A new folder under a recursive inbox is watched.
	os.MkdirAll(filepath.Join(h.in, "new"), 0o755)
	time.Sleep(100 * time.Millisecond)
	tmp := filepath.Join(t.TempDir(), "d.nii")
	os.WriteFile(tmp, data, 0o644)
	os.Rename(tmp, filepath.Join(h.in, "new", "d.nii"))
	if j, ok := h.next(t, 5*time.Second); !ok || j.Name != "new/d" {
		t.Fatalf("file in a new folder: %+v %v", j, ok)
	}
}

// Stopping closes Jobs.
func TestStopClosesJobs(t *testing.T) {
	h := start(t, time.Second, false)
	h.stop()
	select {
	case _, ok := <-h.box.Jobs():
		if ok {
			t.Fatal("a job after stopping")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Jobs not closed")
	}
	h.cancel = func() {}
	h.done <- nil
}

// A deferred volume (claimed elsewhere) is handed out again after the delay, not before; a
// Create event for a version already handed out hands nothing.
func TestDeferAndRepeatedEvents(t *testing.T) {
	h := start(t, time.Hour, false)
	tmp := filepath.Join(t.TempDir(), "v.nii")
	os.WriteFile(tmp, volumeBytes(t), 0o644)
	p := filepath.Join(h.in, "v.nii")
	os.Rename(tmp, p)
	j, ok := h.next(t, 5*time.Second)
	if !ok {
		t.Fatal("not handed out")
	}
	h.box.observeNew(p, h.in) // the same version announced again (an event after the start's scan)
	if j, ok := h.next(t, 200*time.Millisecond); ok {
		t.Fatalf("handed out twice: %+v", j)
	}
	deferred := time.Now()
	h.box.Defer(j, 300*time.Millisecond)
	j, ok = h.next(t, 5*time.Second)
	if !ok || j.Name != "v" {
		t.Fatalf("deferred volume: %+v %v", j, ok)
	}
	if since := time.Since(deferred); since < 250*time.Millisecond {
		t.Errorf("handed out again after %v, before the delay", since)
	}
}
