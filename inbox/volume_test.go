package inbox

import (
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fsnotify/fsnotify"
)

// A volume renamed into the inbox is handed out at once, even with a long settle time, and
// once: nothing more comes for the same version.
func TestRenamedInAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		d := newTestBox(t, time.Hour)
		tmp := filepath.Join(t.TempDir(), "scan.nii")
		if err := os.WriteFile(tmp, volumeBytes(t), 0o644); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(d.in, "scan.nii")
		moved := time.Now()
		if err := os.Rename(tmp, p); err != nil {
			t.Skip("rename across folders:", err)
		}
		d.event(fsnotify.Event{Name: p, Op: fsnotify.Create})
		j, ok := d.taken()
		if !ok {
			t.Fatal("no job for a volume renamed in")
		}
		if j.Name != "scan" || j.Output != filepath.Join(d.out, "scan_mask.nii.gz") || !j.Arrived.Equal(moved) {
			t.Errorf("job %+v, want scan arrived at the rename (%v)", j, moved)
		}
		if took := time.Since(moved); took != 0 {
			t.Errorf("handed out %v after the rename", took)
		}
		d.quiet(t, 100*time.Millisecond, 2*time.Second, "the same version again")
	})
}

// A file written in place, slowly, is handed out only once complete and settled: a settle
// time after its last write.
func TestSlowWriterWaitsForSettle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const settle, step = 400 * time.Millisecond, 100 * time.Millisecond // Run ticks every settle/4
		d := newTestBox(t, settle)
		data := volumeBytes(t)
		p := filepath.Join(d.in, "slow.nii")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		op := fsnotify.Create
		for off := 0; off < len(data); off += 1024 {
			if _, err := f.Write(data[off:min(off+1024, len(data))]); err != nil {
				t.Fatal(err)
			}
			d.event(fsnotify.Event{Name: p, Op: op})
			op = fsnotify.Write
			d.tick(60 * time.Millisecond)
			if j, ok := d.taken(); ok {
				t.Fatalf("handed out while being written (%d of %d bytes): %+v", off, len(data), j)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		last := time.Now()
		j := d.next(t, step, 10*settle)
		if since := time.Since(last); since < settle || since > settle+step {
			t.Errorf("handed out %v after the last write, want the %v settle (ticks of %v)", since, settle, step)
		}
		if j.Name != "slow" {
			t.Errorf("job %+v", j)
		}
	})
}

// A .ready marker hands a volume out without waiting for it to settle.
func TestReadyMarker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const step = 100 * time.Millisecond
		d := newTestBox(t, time.Hour)
		data := volumeBytes(t)
		d.write(t, "marked.nii", data[:100]) // seen incomplete first
		d.quiet(t, step, 300*time.Millisecond, "an incomplete file")
		d.write(t, "marked.nii", data)
		d.quiet(t, step, 300*time.Millisecond, "a file written in place, before settling or its marker")
		marked := time.Now()
		d.write(t, "marked.nii.ready", nil)
		j, ok := d.taken()
		if !ok || j.Name != "marked" {
			t.Fatalf("marker: %+v %v", j, ok)
		}
		if !j.Arrived.Equal(marked) {
			t.Errorf("arrived %v, want at the marker (%v)", j.Arrived, marked)
		}
	})
}

// A deferred volume (claimed elsewhere) is handed out again after the delay, not before; a
// Create event for a version already handed out hands nothing.
func TestDeferAndRepeatedEvents(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const delay, step = 300 * time.Millisecond, 50 * time.Millisecond
		d := newTestBox(t, time.Hour)
		tmp := filepath.Join(t.TempDir(), "v.nii")
		if err := os.WriteFile(tmp, volumeBytes(t), 0o644); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(d.in, "v.nii")
		if err := os.Rename(tmp, p); err != nil {
			t.Skip("rename across folders:", err)
		}
		d.event(fsnotify.Event{Name: p, Op: fsnotify.Create})
		j, ok := d.taken()
		if !ok {
			t.Fatal("not handed out")
		}
		d.observeNew(p, d.in) // the same version announced again (an event after the start's scan)
		d.quiet(t, step, 200*time.Millisecond, "the same version announced again")
		deferred := time.Now()
		d.Defer(j, delay)
		j = d.next(t, step, 5*time.Second)
		if j.Name != "v" {
			t.Fatalf("deferred volume: %+v", j)
		}
		if since := time.Since(deferred); since < delay || since > delay+step {
			t.Errorf("handed out again %v after Defer, want after its %v (ticks of %v)", since, delay, step)
		}
	})
}
