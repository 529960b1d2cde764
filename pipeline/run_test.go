package pipeline

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
	"voxpipe/engine/engine"

	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/stage"
	"voxpipe/telemetry/timing"
)

func TestRunBatchWithBadVolumes(t *testing.T) {
	t.Parallel()
	b := newBatch(t, 3)
	out := runBatch(t, context.Background(), b, &signEngine{}, nil)
	if out.err != nil {
		t.Fatal(out.err)
	}
	if out.res != (Result{OK: 3, Failed: 3}) {
		t.Fatalf("result %+v, want 3 ok and 3 failed", out.res)
	}
	byName := statusByVolume(out.summary)
	for name, vals := range b.good {
		s := byName[name]
		if s.Status != timing.StatusOK {
			t.Fatalf("%s: status %q error %q", name, s.Status, s.Error)
		}
		h, mask, err := nifti.ReadUint8(s.Output)
		if err != nil {
			t.Fatal(err)
		}
		want := expectedMask(t, vals)
		if string(mask) != string(want) {
			t.Errorf("%s: mask differs from the engine's direct output", name)
		}
		if h.IntentCode != nifti.IntentLabel || h.SrowX[3] != -10 || h.PixDim[3] != 1.5 {
			t.Errorf("%s: mask header lost geometry or intent: %+v", name, h)
		}
		if s.Voxels != int64(len(vals)) || s.WallMS <= 0 || s.Engine != "sign" {
			t.Errorf("%s: summary row %+v", name, s)
		}
	}
	for name, wantInErr := range map[string]string{"truncated": "truncated.nii", "corrupt": "corrupt.nii.gz", "notes": "notes.nii"} {
		s := byName[name]
		if s.Status != timing.StatusFailed || !strings.Contains(s.Error, wantInErr) {
			t.Errorf("%s: want failed with an error naming %s, got %q %q", name, wantInErr, s.Status, s.Error)
		}
		if _, err := os.Stat(filepath.Join(b.out, name+"_mask.nii.gz")); err == nil {
			t.Errorf("%s: a mask exists for a failed volume", name)
		}
	}
	stages := map[stage.Stage]int{}
	for _, r := range out.rows {
		stages[r.Stage]++
		if r.RunID != "test" || r.DurationMS < 0 || r.StartMS < 0 {
			t.Errorf("bad timing row %+v", r)
		}
	}
	for _, st := range []stage.Stage{stage.Read, stage.Stats, stage.Segment, stage.Write} {
		if stages[st] == 0 {
			t.Errorf("no %s rows in timings.csv", st)
		}
	}
	assertNoTemporaries(t, b.out)
}

func TestRunSkipsDoneVolumesUnlessOverwrite(t *testing.T) {
	t.Parallel()
	b := newBatch(t, 2)
	first := runBatch(t, context.Background(), b, &signEngine{}, nil)
	if first.res.OK != 2 {
		t.Fatalf("first run %+v", first.res)
	}
	again := runBatch(t, context.Background(), b, &signEngine{}, nil)
	if again.res != (Result{Skipped: 2, Failed: 3}) {
		t.Fatalf("second run %+v, want the 2 done volumes skipped", again.res)
	}
	over := runBatch(t, context.Background(), b, &signEngine{}, func(c *Config) { c.Output.Overwrite = true })
	if over.res.OK != 2 || over.res.Skipped != 0 {
		t.Fatalf("overwrite run %+v", over.res)
	}
}

func TestRunFailFastStops(t *testing.T) {
	t.Parallel()
	b := newBatch(t, 6)
	out := runBatch(t, context.Background(), b, &signEngine{delay: 5 * time.Millisecond}, func(c *Config) {
		c.FailFast = true
		c.Workers.Readers = 1
	})
	if out.err != nil {
		t.Fatalf("fail-fast is not a run error: %v", out.err)
	}
	if out.res.Failed == 0 || out.res.OK+out.res.Failed+out.res.Skipped >= 9 {
		t.Fatalf("fail-fast ran everything: %+v", out.res)
	}
	assertNoTemporaries(t, b.out)
}

func TestRunCancelLeavesNoPartialOutputs(t *testing.T) {
	t.Parallel()
	b := newBatch(t, 6)
	ctx, cancel := context.WithCancel(context.Background())
	eng := &signEngine{delay: 20 * time.Millisecond}
	var once sync.Once
	out := runBatch(t, ctx, b, eng, func(c *Config) {
		c.Telemetry.Log = nil
		c.Telemetry.Progress = progressFunc(func() { once.Do(func() { time.AfterFunc(30*time.Millisecond, cancel) }) })
	})
	if out.err == nil {
		t.Fatal("a cancelled run returned no error")
	}
	if out.res.OK == 6 {
		t.Fatal("cancel came too late to test anything")
	}
	assertNoTemporaries(t, b.out)
	for _, s := range out.summary {
		if s.Status == timing.StatusOK {
			if _, _, err := nifti.ReadUint8(s.Output); err != nil {
				t.Errorf("ok mask unreadable: %v", err)
			}
		}
	}
}

func TestRunBuffersAreBounded(t *testing.T) {
	t.Parallel()
	b := newBatch(t, 8)
	eng := allocatingEngine{&signEngine{}}
	out := runBatch(t, context.Background(), b, eng, func(c *Config) { c.Workers.Readers = 2; c.Workers.Writers = 1 })
	if out.res.OK != 8 {
		t.Fatalf("%+v", out.res)
	}
	// 2 readers + 1 engine input buffers, 1 engine + 1 writer mask buffers; each may be
	// reallocated when a larger volume arrives (the test volumes grow), but never more than
	// that many live at once, and all are freed at the end.
	if peak := eng.peak.Load(); peak > 5 {
		t.Errorf("peak live host buffers %d, want at most 5", peak)
	}
	if live := eng.live.Load(); live != 0 {
		t.Errorf("%d host buffers not freed", live)
	}
	// LeaveBuffers: Run returns with its buffers still allocated (the process's exit frees them).
	left := allocatingEngine{&signEngine{}}
	out = runBatch(t, context.Background(), newBatch(t, 3), left, func(c *Config) { c.Workers.LeaveBuffers = true })
	if out.res.OK != 3 {
		t.Fatalf("%+v", out.res)
	}
	// (Buffers replaced when a larger volume came were freed then: not all allocations are live.)
	if live := left.live.Load(); live == 0 {
		t.Errorf("LeaveBuffers: none of %d host buffers still allocated", left.allocs.Load())
	}
}

func TestDiscover(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, p := range []string{"a.nii", "b.nii.gz", "c.hdr", "c.img", ".d.nii.tmp-1", "e.txt", "sub/f.nii.gz", "sub/deeper/g.nii"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), nil, 0o644)
	}
	names := func(batch []jobs.Job) string {
		var s []string
		for _, j := range batch {
			s = append(s, j.Name+"="+filepath.Base(j.Output))
		}
		return strings.Join(s, " ")
	}
	found, err := jobs.Discover([]string{dir}, false, "/out", "{name}_mask.nii.gz")
	if err != nil {
		t.Fatal(err)
	}
	batch := found.Jobs
	if got, want := names(batch), "a=a_mask.nii.gz b=b_mask.nii.gz c=c_mask.nii.gz"; got != want {
		t.Errorf("flat: %s, want %s", got, want)
	}
	found, err = jobs.Discover([]string{dir}, true, "/out", "{name}.seg.nii")
	if err != nil {
		t.Fatal(err)
	}
	batch = found.Jobs
	if got, want := names(batch), "a=a.seg.nii b=b.seg.nii c=c.seg.nii sub/deeper/g=g.seg.nii sub/f=f.seg.nii"; got != want {
		t.Errorf("recursive: %s, want %s", got, want)
	}
	if batch[3].Output != filepath.Join("/out", "sub", "deeper", "g.seg.nii") {
		t.Errorf("recursive output %s", batch[3].Output)
	}
	if _, err := jobs.Discover([]string{dir, filepath.Join(dir, "a.nii")}, false, "/out", "{name}.nii"); err == nil {
		t.Error("colliding outputs not reported")
	}
	if _, err := jobs.Discover([]string{filepath.Join(dir, "sub", "deeper", "none")}, false, "/out", "{name}.nii"); err == nil {
		t.Error("missing input not reported")
	}
	if _, err := jobs.Discover([]string{dir}, false, "/out", "mask.nii"); err == nil {
		t.Error("mask name without {name} accepted")
	}
	empty := t.TempDir()
	if _, err := jobs.Discover([]string{empty}, false, "/out", "{name}.nii"); err != jobs.ErrNoInputs {
		t.Errorf("empty folder: %v", err)
	}
}

func TestRunRejectsNaNVolumes(t *testing.T) {
	t.Parallel()
	b := newBatch(t, 1)
	vals := []float32{1, 2, float32(math.NaN()), 4, 5, 6, 7, 8}
	h := &nifti.Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: nifti.Float32, BitPix: 32,
		Dim: [8]int64{3, 2, 2, 2, 1, 1, 1, 1}, PixDim: [8]float64{1, 1, 1, 1}, SclSlope: 1, Magic: "n+1"}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vals))), 4*len(vals))
	if err := nifti.Write(filepath.Join(b.in, "nan.nii"), h, raw, nifti.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	out := runBatch(t, context.Background(), b, &signEngine{}, nil)
	s := statusByVolume(out.summary)["nan"]
	if s.Status != timing.StatusFailed || !strings.Contains(s.Error, "NaN") || !strings.Contains(s.Error, "nan.nii") {
		t.Errorf("NaN volume: %q %q", s.Status, s.Error)
	}
}

// Several engines (one per GPU in a real run) pull volumes from one queue: every volume is
// done exactly once, both engines work, and the CSVs say which engine did which volume.
func TestRunSeveralEnginesShareTheQueue(t *testing.T) {
	t.Parallel()
	b := newBatch(t, 8)
	engines := []engine.Engine{
		namedEngine{&signEngine{delay: 3 * time.Millisecond}, "dev:0"},
		namedEngine{&signEngine{delay: 3 * time.Millisecond}, "dev:1"},
	}
	out := runBatch(t, context.Background(), b, engines[0], func(c *Config) {
		c.Engines = engines
		c.Workers.Readers = 3
		c.Workers.Slab = 2
	})
	if out.err != nil || out.res.OK != 8 {
		t.Fatalf("%+v %v", out.res, out.err)
	}
	perEngine := map[string]int{}
	for _, s := range out.summary {
		if s.Status != timing.StatusOK {
			continue
		}
		perEngine[s.Engine]++
		_, mask, err := nifti.ReadUint8(s.Output)
		if err != nil {
			t.Fatal(err)
		}
		if string(mask) != string(expectedMask(t, b.good[s.Volume])) {
			t.Errorf("%s (engine %s): wrong mask", s.Volume, s.Engine)
		}
	}
	if perEngine["dev:0"] == 0 || perEngine["dev:1"] == 0 || perEngine["dev:0"]+perEngine["dev:1"] != 8 {
		t.Errorf("volumes per engine %v: want both engines used, 8 in all", perEngine)
	}
	for _, r := range out.rows {
		if r.Stage == stage.Segment && r.Device != "dev:0" && r.Device != "dev:1" {
			t.Errorf("segment row without its engine: %+v", r)
		}
	}
}

// gatedAllocEngine hands out host memory but holds back the input buffer's allocation until a
// mask-sized one has been asked for, or a deadline passes: the first volume's mask buffer must
// be allocated while that volume is read, not after.
type gatedAllocEngine struct {
	*signEngine
	maskBytes  int
	maskAsked  chan struct{}
	once       sync.Once
	inputWaits atomic.Bool // the input allocation gave up waiting
}

func (e *gatedAllocEngine) AllocHost(n int) (engine.HostBuffer, error) {
	if n == e.maskBytes {
		e.once.Do(func() { close(e.maskAsked) })
	} else {
		select {
		case <-e.maskAsked:
		case <-time.After(5 * time.Second):
			e.inputWaits.Store(true)
		}
	}
	e.live.Add(1)
	e.allocs.Add(1)
	return &countedBuffer{b: make([]byte, n), e: e.signEngine}, nil
}

func TestRunAllocatesTheFirstMaskWhileReading(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := &batch{in: filepath.Join(dir, "in"), out: filepath.Join(dir, "out"), good: map[string][]int16{}}
	os.MkdirAll(b.in, 0o755)
	const nx, ny, nz = 20, 16, 12
	b.good["only"] = writeVolume(t, filepath.Join(b.in, "only.nii"), nx, ny, nz, 3)
	eng := &gatedAllocEngine{signEngine: &signEngine{}, maskBytes: nx * ny * nz, maskAsked: make(chan struct{})}
	out := runBatch(t, context.Background(), b, eng, func(c *Config) { c.Workers.Readers = 4; c.Workers.Writers = 2 })
	if out.res.OK != 1 {
		t.Fatalf("%+v %v", out.res, out.err)
	}
	if eng.inputWaits.Load() {
		t.Error("the mask buffer was not allocated while the volume was read")
	}
	// One volume: one input and one mask buffer, however many readers and writers.
	if n := eng.allocs.Load(); n != 2 {
		t.Errorf("%d host allocations for one volume, want 2", n)
	}
	if live := eng.live.Load(); live != 0 {
		t.Errorf("%d host buffers not freed", live)
	}
	_, got, err := nifti.ReadUint8(filepath.Join(b.out, "only_mask.nii.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if want := expectedMask(t, b.good["only"]); string(got) != string(want) {
		t.Error("mask differs from the expected labels")
	}
}

// openingEngine is a signEngine that finishes opening in the background (engine.BackgroundOpener,
// like the CUDA engine): Ready blocks until opened is closed, then returns openErr.
type openingEngine struct {
	*signEngine
	opened  chan struct{}
	openErr error
	readyAt atomic.Int64 // when Ready returned, in ns since the run's start
	t0      time.Time
}

func (e *openingEngine) Ready() error {
	<-e.opened
	e.readyAt.Store(int64(time.Since(e.t0)))
	return e.openErr
}

// The readers start on the volumes while the engine is still opening (here for 400 ms): a read
// ends before the engine is ready, and the volumes are done once it is.
func TestRunReadsWhileTheEngineOpens(t *testing.T) {
	b := newBatch(t, 2)
	eng := &openingEngine{signEngine: &signEngine{}, opened: make(chan struct{}), t0: time.Now()}
	time.AfterFunc(400*time.Millisecond, func() { close(eng.opened) })
	out := runBatch(t, context.Background(), b, eng, nil)
	if out.err != nil || out.res.OK != 2 {
		t.Fatalf("%+v %v", out.res, out.err)
	}
	ready := float64(eng.readyAt.Load()) / 1e6 // ms; the run started a little after t0
	firstRead := math.Inf(1)
	for _, r := range out.rows {
		if r.Stage == stage.Read {
			firstRead = min(firstRead, r.StartMS+r.DurationMS)
		}
	}
	if !(firstRead < ready-50) {
		t.Errorf("first read ended at %.0f ms, the engine was ready at %.0f ms: the readers waited for it", firstRead, ready)
	}
}

// An engine that cannot open ends the run with its error (no volume is segmented).
func TestRunStopsWhenTheEngineCannotOpen(t *testing.T) {
	t.Parallel()
	b := newBatch(t, 2)
	fault := errors.New("test engine: no context")
	eng := &openingEngine{signEngine: &signEngine{}, opened: make(chan struct{}), openErr: fault, t0: time.Now()}
	close(eng.opened)
	out := runBatch(t, context.Background(), b, eng, nil)
	if !errors.Is(out.err, fault) {
		t.Fatalf("Run: %v, want the open error", out.err)
	}
	if out.res.OK != 0 {
		t.Errorf("%d volumes segmented by an engine that did not open", out.res.OK)
	}
	assertNoTemporaries(t, b.out)
}
