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
	"voxpipe/engine"

	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/model"
	"voxpipe/stage"
	"voxpipe/telemetry/timing"
)

// signEngine is a fast stand-in for the network: label 1 where the normalised value is
// positive, 2 where it is above one sigma, else 0. It reports one event per slab and, unless
// silent, each finished slab (OnSlabDone); it can be slowed down, made to fail, and counts host
// allocations when used as a HostAllocator.
type signEngine struct {
	delay  time.Duration
	silent bool // no OnSlabDone calls: the writer then gets the whole mask when Segment returns
	// failNZ, failAt: on volumes of failNZ slices, fail with errEngine when slab failAt starts
	// (after the last slab is reported, when failAt is the number of slabs).
	failNZ, failAt int
	// afterSlab, when set, is called after each slab is reported.
	afterSlab func(vol *model.Volume, slab int)
	// beforeFail, when set, is called before the engine fails (failNZ, failAt).
	beforeFail func()

	allocs atomic.Int64
	live   atomic.Int64
	peak   atomic.Int64
}

var errEngine = errors.New("test engine: device lost")

func (e *signEngine) Name() string { return "sign" }
func (e *signEngine) Close() error { return nil }

func (e *signEngine) Segment(ctx context.Context, vol *model.Volume, out []uint8, opt engine.Options) error {
	plane := vol.NX * vol.NY
	start := time.Now()
	for z0, slab := 0, 0; z0 < vol.NZ; z0, slab = z0+opt.Slab, slab+1 {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.failNZ == vol.NZ && e.failAt == slab {
			if e.beforeFail != nil {
				e.beforeFail()
			}
			return errEngine
		}
		t := time.Now()
		if e.delay > 0 {
			select {
			case <-time.After(e.delay):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		z1 := min(z0+opt.Slab, vol.NZ)
		for i := z0 * plane; i < z1*plane; i++ {
			out[i] = signLabel(vol, i)
		}
		if opt.OnEvent != nil {
			opt.OnEvent(engine.Event{Stage: "segment", Slab: slab, Start: t.Sub(start), Duration: time.Since(t), Voxels: int64((z1 - z0) * plane)})
		}
		if opt.OnSlabDone != nil && !e.silent {
			opt.OnSlabDone(z0, z1)
		}
		if e.afterSlab != nil {
			e.afterSlab(vol, slab)
		}
	}
	if e.failNZ == vol.NZ && e.failAt == (vol.NZ+opt.Slab-1)/opt.Slab {
		time.Sleep(e.delay) // the writer has had time to write everything
		if e.beforeFail != nil {
			e.beforeFail()
		}
		return errEngine
	}
	return nil
}

func signLabel(vol *model.Volume, i int) uint8 {
	var v float32
	if vol.I16 != nil {
		v = float32(vol.I16[i])
	} else {
		v = vol.F32[i]
	}
	x := v*vol.Norm.Scale + vol.Norm.Shift
	switch {
	case x > 1:
		return 2
	case x > 0:
		return 1
	}
	return 0
}

type countedBuffer struct {
	b []byte
	e *signEngine
}

func (c *countedBuffer) Bytes() []byte { return c.b }
func (c *countedBuffer) Free() error {
	c.e.live.Add(-1)
	return nil
}

// allocatingEngine is a signEngine that also hands out host memory, like the CUDA engine.
type allocatingEngine struct{ *signEngine }

func (e allocatingEngine) AllocHost(n int) (engine.HostBuffer, error) {
	e.allocs.Add(1)
	live := e.live.Add(1)
	for {
		p := e.peak.Load()
		if live <= p || e.peak.CompareAndSwap(p, live) {
			break
		}
	}
	return &countedBuffer{b: make([]byte, n), e: e.signEngine}, nil
}

// writeVolume writes a smooth int16 test volume and returns its stored values.
func writeVolume(t *testing.T, path string, nx, ny, nz int, seed int) []int16 {
	t.Helper()
	vals := make([]int16, nx*ny*nz)
	for z := 0; z < nz; z++ {
		for y := 0; y < ny; y++ {
			for x := 0; x < nx; x++ {
				f := math.Sin(float64(x+seed)/3) + math.Cos(float64(y*2+z)/5)
				vals[(z*ny+y)*nx+x] = int16(1000 * f)
			}
		}
	}
	h := &nifti.Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: nifti.Int16, BitPix: 16,
		Dim: [8]int64{3, int64(nx), int64(ny), int64(nz), 1, 1, 1, 1}, PixDim: [8]float64{1, 1, 1, 1.5},
		SclSlope: 1, QformCode: 1, SformCode: 1, SrowX: [4]float64{1, 0, 0, -10}, SrowY: [4]float64{0, 1, 0, 5},
		SrowZ: [4]float64{0, 0, 1.5, 2}, XYZTUnits: 10, Magic: "n+1"}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vals))), 2*len(vals))
	if err := nifti.Write(path, h, raw, nifti.WriteOptions{Level: 1}); err != nil {
		t.Fatal(err)
	}
	return vals
}

func expectedMask(t *testing.T, vals []int16) []uint8 {
	t.Helper()
	var st model.Stats
	st.AddInt16(vals)
	vol := &model.Volume{I16: vals, Norm: st.Norm(1, 0)}
	want := make([]uint8, len(vals))
	for i := range vals {
		want[i] = signLabel(vol, i)
	}
	return want
}

type batch struct {
	in, out string
	good    map[string][]int16 // name -> stored values
}

// newBatch makes a folder with good volumes and the three kinds of bad input.
func newBatch(t *testing.T, good int) *batch {
	t.Helper()
	dir := t.TempDir()
	b := &batch{in: filepath.Join(dir, "in"), out: filepath.Join(dir, "out"), good: map[string][]int16{}}
	os.MkdirAll(b.in, 0o755)
	for i := 0; i < good; i++ {
		name := "vol" + string(rune('a'+i))
		ext := ".nii.gz"
		if i%2 == 1 {
			ext = ".nii"
		}
		b.good[name] = writeVolume(t, filepath.Join(b.in, name+ext), 9+i, 7, 11+i, i)
	}
	// truncated: a good file cut short
	writeVolume(t, filepath.Join(dir, "full.nii"), 9, 7, 11, 0)
	data, _ := os.ReadFile(filepath.Join(dir, "full.nii"))
	os.WriteFile(filepath.Join(b.in, "truncated.nii"), data[:len(data)-200], 0o644)
	// corrupt gzip: a good .nii.gz with bytes in the middle overwritten
	writeVolume(t, filepath.Join(dir, "full.nii.gz"), 9, 7, 11, 0)
	data, _ = os.ReadFile(filepath.Join(dir, "full.nii.gz"))
	for i := len(data) / 3; i < len(data)/3+40 && i < len(data); i++ {
		data[i] ^= 0x5a
	}
	os.WriteFile(filepath.Join(b.in, "corrupt.nii.gz"), data, 0o644)
	// not NIfTI at all, with a NIfTI name
	os.WriteFile(filepath.Join(b.in, "notes.nii"), []byte("this is not a NIfTI file\n"), 0o644)
	// ignored: not a NIfTI name
	os.WriteFile(filepath.Join(b.in, "README.txt"), []byte("ignored"), 0o644)
	return b
}

type runOutput struct {
	res     Result
	err     error
	rows    []timing.Row
	summary []timing.Summary
}

func runBatch(t *testing.T, ctx context.Context, b *batch, eng engine.Engine, mutate func(*Config)) runOutput {
	t.Helper()
	found, err := jobs.Discover([]string{b.in}, false, b.out, "{name}_mask.nii.gz")
	if err != nil {
		t.Fatal(err)
	}
	batch := found.Jobs
	os.MkdirAll(b.out, 0o755)
	tpath, spath := filepath.Join(b.out, "timings.csv"), filepath.Join(b.out, "summary.csv")
	timings, err := timing.CreateCSV[timing.Row](tpath)
	if err != nil {
		t.Fatal(err)
	}
	summary, err := timing.CreateCSV[timing.Summary](spath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Engines: []engine.Engine{eng},
		Input: Input{
			Jobs: batch,
		},
		Workers: Workers{
			Slab:    4,
			Readers: 2,
			Writers: 1,
		},
		Output: Output{
			Classes: 3,
			Descrip: "voxpipe test",
		},
		Telemetry: Telemetry{
			RunID:   "test",
			Timings: timings,
			Summary: summary,
		},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	res, runErr := Run(ctx, cfg)
	timings.Close()
	summary.Close()
	var out runOutput
	out.res, out.err = res, runErr
	if out.rows, err = timing.ReadRows(tpath); err != nil {
		t.Fatalf("timings.csv does not parse: %v", err)
	}
	if out.summary, err = timing.ReadSummaries(spath); err != nil {
		t.Fatalf("summary.csv does not parse: %v", err)
	}
	return out
}

func statusByVolume(s []timing.Summary) map[string]timing.Summary {
	m := map[string]timing.Summary{}
	for _, r := range s {
		m[r.Volume] = r
	}
	return m
}

func assertNoTemporaries(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp-") {
			t.Errorf("stray temporary %s", path)
		}
		return nil
	})
}

func TestRunBatchWithBadVolumes(t *testing.T) {
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

// progressFunc calls f when the first volume starts.
type progressFunc func()

func (f progressFunc) Start(int)                          {}
func (f progressFunc) VolumeStarted(jobs.Job, int)        { f() }
func (f progressFunc) PlanesDone(jobs.Job, int)           {}
func (f progressFunc) VolumeDone(jobs.Job, timing.Status) {}
func (f progressFunc) Close()                             {}

func TestRunBuffersAreBounded(t *testing.T) {
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

// namedEngine is a signEngine with its own name, for runs with several engines.
type namedEngine struct {
	*signEngine
	name string
}

func (e namedEngine) Name() string { return e.name }

// Several engines (one per GPU in a real run) pull volumes from one queue: every volume is
// done exactly once, both engines work, and the CSVs say which engine did which volume.
func TestRunSeveralEnginesShareTheQueue(t *testing.T) {
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
