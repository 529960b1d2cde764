package inbox

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fsnotify/fsnotify"

	"voxpipe/io/nifti"
	"voxpipe/jobs"
)

// The DICOM tests and most volume tests run in a synctest bubble: the clock is fake and moves
// only while every goroutine of the test waits, so settle times are exact and cost no real
// time. The inbox has no file watcher there (its events would not let the clock move): the
// tests call event, rescan and settle as its Run loop does. inbox_test.go runs the inbox with
// its watcher, in real time.

// logBuffer collects log lines from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// testBox is an inbox without a watcher on a new folder, feeding its Jobs until the test
// ends.
type testBox struct {
	*Inbox
	in, out string
	logs    *logBuffer
}

func newTestBox(t *testing.T, settle time.Duration) *testBox {
	t.Helper()
	dir := t.TempDir()
	d := &testBox{in: filepath.Join(dir, "inbox"), out: filepath.Join(dir, "out"), logs: &logBuffer{}}
	os.MkdirAll(d.in, 0o755)
	b, err := newInbox(Options{Folders: []string{d.in}, OutDir: d.out, MaskName: "{name}_mask.nii.gz", DICOMName: "s%s",
		Settle: settle, Log: slog.New(slog.NewTextHandler(d.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	b.dirs[d.in] = d.in
	d.Inbox = b
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.feed(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return d
}

// taken is the job the inbox hands out now, if any.
func (d *testBox) taken() (jobs.Job, bool) {
	synctest.Wait()
	select {
	case j := <-d.jobs:
		synctest.Wait() // what the feeder does once a job is taken (its log lines)
		return j, true
	default:
		return jobs.Job{}, false
	}
}

// write writes the file and announces it as inotify would.
func (d *testBox) write(t *testing.T, name string, data []byte) {
	t.Helper()
	p := filepath.Join(d.in, name)
	_, err := os.Stat(p)
	op := fsnotify.Write
	if err != nil {
		op = fsnotify.Create
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	d.event(fsnotify.Event{Name: p, Op: op})
}

// tick lets step pass on the bubble's fake clock and runs a settle tick, as Run does.
func (d *testBox) tick(step time.Duration) {
	<-time.After(step)
	d.settle()
}

// next ticks every step until a job is handed out, at most for limit.
func (d *testBox) next(t *testing.T, step, limit time.Duration) jobs.Job {
	t.Helper()
	for end := time.Now().Add(limit); time.Now().Before(end); {
		d.tick(step)
		if j, ok := d.taken(); ok {
			return j
		}
	}
	t.Fatalf("no job within %v\n%s", limit, d.logs.String())
	return jobs.Job{}
}

// quiet ticks every step for span and fails on any job handed out.
func (d *testBox) quiet(t *testing.T, step, span time.Duration, when string) {
	t.Helper()
	for end := time.Now().Add(span); time.Now().Before(end); {
		d.tick(step)
		if j, ok := d.taken(); ok {
			t.Fatalf("%s: handed out %s (%d files)", when, j.Name, len(j.Series.Files))
		}
	}
}

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
