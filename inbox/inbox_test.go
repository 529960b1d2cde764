package inbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"voxpipe/jobs"
)

// harness runs an inbox with its file watcher, in real time.
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

// waitWatched waits until the inbox watches dir: its watcher has seen the folder's Create
// event, so files that arrive in it from now on are announced.
func (h *harness) waitWatched(t *testing.T, dir string) {
	t.Helper()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	limit := time.After(5 * time.Second)
	for !h.box.watched(dir) {
		select {
		case <-poll.C:
		case <-limit:
			t.Fatalf("%s not watched 5 s after it was made", dir)
		}
	}
}

// Files there at the start are handed out; a changed file is handed out again; masks and the
// output folder are left out.
func TestStartChangesAndOwnMasks(t *testing.T) {
	t.Parallel()
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
	h.waitWatched(t, filepath.Join(h.in, "new"))
	tmp := filepath.Join(t.TempDir(), "d.nii")
	os.WriteFile(tmp, data, 0o644)
	os.Rename(tmp, filepath.Join(h.in, "new", "d.nii"))
	if j, ok := h.next(t, 5*time.Second); !ok || j.Name != "new/d" {
		t.Fatalf("file in a new folder: %+v %v", j, ok)
	}
}

// Stopping closes Jobs.
func TestStopClosesJobs(t *testing.T) {
	t.Parallel()
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
