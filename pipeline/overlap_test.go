package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"voxpipe/engine/engine"

	"voxpipe/geometry"
	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/model"
	"voxpipe/stage"
	"voxpipe/store/provenance"
	"voxpipe/telemetry/timing"
)

// serialMask writes the mask the way the write stage did before it overlapped segmentation:
// the whole finished mask through nifti.Write, with the run's header and options.
func serialMask(t *testing.T, path, input string, mask []uint8, cfg Config) []byte {
	t.Helper()
	hdr, err := nifti.ReadHeader(input)
	if err != nil {
		t.Fatal(err)
	}
	// The provenance the pipeline records: the run's, with the input's fingerprint.
	rec := cfg.Output.Provenance
	rec.Generator = provenance.Generator
	var files []string
	if rec.Input, files, err = provenance.Stat(input); err != nil {
		t.Fatal(err)
	}
	if rec.Input.XXH3, err = provenance.Hash(context.Background(), files); err != nil {
		t.Fatal(err)
	}
	if rec.Grid, err = geometry.Axcodes(hdr.Affine()); err != nil || rec.Grid != geometry.Canonical {
		t.Fatalf("test volume in orientation %q (%v): the serial reference segments it as stored", rec.Grid, err)
	}
	mh := nifti.MaskHeader(hdr, uint8(cfg.Output.Classes-1), cfg.Output.Descrip)
	mh.Extensions = []nifti.Extension{rec.Extension()}
	if err := nifti.Write(path, mh, mask, cfg.Output.Write); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func inputsByName(t *testing.T, b *batch) map[string]string {
	t.Helper()
	found, err := jobs.Discover([]string{b.in}, false, b.out, "{name}.nii")
	if err != nil {
		t.Fatal(err)
	}
	batch := found.Jobs
	m := map[string]string{}
	for _, j := range batch {
		m[j.Name] = j.Input
	}
	return m
}

// The masks the overlapped write stage streams are byte for byte the files the serial path
// wrote, compressed or not, whatever the slab, the number of writers and engines, and whether
// the engine reports its slabs or only returns.
func TestOverlappedMasksMatchSerialReference(t *testing.T) {
	t.Parallel()
	b := newBatch(t, 4)
	inputs := inputsByName(t, b)
	for _, tc := range []struct {
		slab, writers, engines int
		silent                 bool
		maskName               string
		write                  nifti.WriteOptions
	}{
		{4, 1, 1, false, "{name}_mask.nii.gz", nifti.DefaultWriteOptions()},
		{1, 2, 1, false, "{name}_mask.nii.gz", nifti.WriteOptions{Level: 6, Workers: 3}},
		{3, 1, 2, false, "{name}_mask.nii", nifti.WriteOptions{}},
		{100, 1, 1, false, "{name}_mask.nii.gz", nifti.DefaultWriteOptions()},
		{2, 1, 1, true, "{name}_mask.nii.gz", nifti.DefaultWriteOptions()},
	} {
		t.Run(fmt.Sprintf("slab%d_w%d_e%d_silent%v_%s", tc.slab, tc.writers, tc.engines, tc.silent, filepath.Ext(tc.maskName)), func(t *testing.T) {
			b.out = t.TempDir()
			var engines []engine.Engine
			for i := 0; i < tc.engines; i++ {
				engines = append(engines, namedEngine{&signEngine{silent: tc.silent, delay: time.Millisecond}, fmt.Sprintf("dev:%d", i)})
			}
			var cfg Config
			out := runBatch(t, context.Background(), b, engines[0], func(c *Config) {
				found, err := jobs.Discover([]string{b.in}, false, b.out, tc.maskName)
				if err != nil {
					t.Fatal(err)
				}
				batch := found.Jobs
				c.Input.Jobs, c.Engines, c.Workers.Slab, c.Workers.Writers, c.Output.Write = batch, engines, tc.slab, tc.writers, tc.write
				cfg = *c
			})
			if out.err != nil || out.res != (Result{OK: 4, Failed: 3}) {
				t.Fatalf("%+v %v", out.res, out.err)
			}
			for _, s := range out.summary {
				if s.Status != timing.StatusOK {
					continue
				}
				got, err := os.ReadFile(s.Output)
				if err != nil {
					t.Fatal(err)
				}
				ref := filepath.Join(t.TempDir(), filepath.Base(s.Output))
				want := serialMask(t, ref, inputs[s.Volume], expectedMask(t, b.good[s.Volume]), cfg)
				if !bytes.Equal(got, want) {
					t.Errorf("%s: mask file (%d bytes) differs from the serial reference (%d bytes)", s.Volume, len(got), len(want))
				}
			}
			assertNoTemporaries(t, b.out)
		})
	}
}

// rowsOf returns the timing rows of one volume and stage.
func rowsOf(rows []timing.Row, volume string, stage stage.Stage) []timing.Row {
	var out []timing.Row
	for _, r := range rows {
		if r.Volume == volume && r.Stage == stage {
			out = append(out, r)
		}
	}
	return out
}

// The writer writes slab k while the engine computes later slabs, and its rows count the time
// spent writing, not waiting: one row per slab written, one (slab -1) for the commit, their
// sum the summary's write_ms, the wall time from the read's start to the commit's end.
func TestWriteOverlapsSegmentation(t *testing.T) {
	b := newBatch(t, 1)
	const slab, slabs, delay = 2, 6, 15 * time.Millisecond // vola is 9x7x11: 6 slabs of 2
	out := runBatch(t, context.Background(), b, &signEngine{delay: delay}, func(c *Config) { c.Workers.Slab = slab })
	if out.err != nil || out.res.OK != 1 {
		t.Fatalf("%+v %v", out.res, out.err)
	}
	sum := statusByVolume(out.summary)["vola"]
	segRows := rowsOf(out.rows, "vola", stage.Segment)
	writeRows := rowsOf(out.rows, "vola", stage.Write)
	if len(segRows) != slabs || len(writeRows) != slabs+1 {
		t.Fatalf("%d segment rows and %d write rows, want %d and %d", len(segRows), len(writeRows), slabs, slabs+1)
	}
	var writeMS float64
	seen := map[int]bool{}
	for _, r := range writeRows {
		writeMS += r.DurationMS
		seen[r.Slab] = true
	}
	for k := -1; k < slabs; k++ {
		if !seen[k] {
			t.Errorf("no write row for slab %d: %+v", k, writeRows)
		}
	}
	if math.Abs(writeMS-sum.WriteMS) > 1e-6 {
		t.Errorf("write_ms %v, the rows sum to %v", sum.WriteMS, writeMS)
	}
	lastSeg := segRows[len(segRows)-1]
	segEnd := lastSeg.StartMS + lastSeg.DurationMS
	var first, commit timing.Row
	for _, r := range writeRows {
		if r.Slab == 0 {
			first = r
		}
		if r.Slab == -1 {
			commit = r
		}
	}
	if first.StartMS >= segEnd {
		t.Errorf("slab 0 written at %.1f ms, after segmentation ended at %.1f ms: no overlap", first.StartMS, segEnd)
	}
	if commit.StartMS < segEnd {
		t.Errorf("commit at %.1f ms, before segmentation ended at %.1f ms", commit.StartMS, segEnd)
	}
	// The writer waited ~(slabs-1)*delay for slabs; none of it is in write_ms.
	if span := commit.StartMS + commit.DurationMS - first.StartMS; sum.WriteMS > span/2 {
		t.Errorf("write_ms %.2f of a %.2f ms span from first write to commit: waiting counted", sum.WriteMS, span)
	}
	readRows := rowsOf(out.rows, "vola", stage.Read)
	if len(readRows) == 0 {
		t.Fatal("no read rows")
	}
	wallEnd := commit.StartMS + commit.DurationMS
	if got, want := sum.WallMS, wallEnd-readRows[0].StartMS; got < want-0.01 || got > want+1 {
		t.Errorf("wall_ms %.2f, want read start to commit end %.2f", got, want)
	}
}

// An engine failing in the middle of a volume, after the writer has streamed its first slabs
// into a temporary file, or after it reported every slab (the writer has written them all but
// must not commit): the temporary is removed, no mask carries the final name, the volume is
// failed once with the engine's error, the others go on, and every buffer is back in its pool
// (the allocator sees them all freed).
func TestEngineFailsMidVolume(t *testing.T) {
	t.Parallel()
	for _, failAt := range []int{2, 3} {
		t.Run(fmt.Sprintf("at_slab_%d_of_3", failAt), func(t *testing.T) {
			t.Parallel()
			testEngineFails(t, failAt)
		})
	}
}

// writeSeen closes seen at the write row of volume's slab.
type writeSeen struct {
	volume string
	slab   int
	seen   chan struct{}
	once   sync.Once
}

func (w *writeSeen) Row(r timing.Row) {
	if r.Volume == w.volume && r.Stage == stage.Write && r.Slab == w.slab {
		w.once.Do(func() { close(w.seen) })
	}
}

func (w *writeSeen) Summary(timing.Summary) {}

func testEngineFails(t *testing.T, failAt int) {
	b := newBatch(t, 3) // volb has 12 slices: slabs 0..2 of 4
	// The engine fails only once the writer has streamed every slab reported before the
	// failure (a loaded machine may otherwise schedule the writer after the failure, and the
	// test would test nothing); failing at slab 3 of 3, that is the whole mask.
	written := &writeSeen{volume: "volb", slab: failAt - 1, seen: make(chan struct{})}
	eng := allocatingEngine{&signEngine{failNZ: 12, failAt: failAt, delay: 10 * time.Millisecond, beforeFail: func() {
		select {
		case <-written.seen:
		case <-time.After(10 * time.Second):
		}
	}}}
	out := runBatch(t, context.Background(), b, eng, func(c *Config) { c.Telemetry.Observer = written })
	if out.err != nil || out.res != (Result{OK: 2, Failed: 4}) {
		t.Fatalf("%+v %v, want 2 ok and 4 failed (3 bad inputs, volb)", out.res, out.err)
	}
	n := 0
	for _, s := range out.summary {
		if s.Volume != "volb" {
			continue
		}
		n++
		if s.Status != timing.StatusFailed || !strings.Contains(s.Error, errEngine.Error()) || !strings.Contains(s.Error, "volb.nii") {
			t.Errorf("volb: %q %q, want failed with the engine's error", s.Status, s.Error)
		}
	}
	if n != 1 {
		t.Errorf("volb has %d summary rows, want 1", n)
	}
	if len(rowsOf(out.rows, "volb", stage.Write)) == 0 {
		t.Error("volb: no write rows: the writer did not stream before the failure, the test tests nothing")
	}
	for _, r := range rowsOf(out.rows, "volb", stage.Write) {
		if r.Slab == -1 {
			t.Error("volb was committed")
		}
	}
	if _, err := os.Stat(filepath.Join(b.out, "volb_mask.nii.gz")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("volb mask: %v, want none", err)
	}
	assertNoTemporaries(t, b.out)
	if live := eng.live.Load(); live != 0 {
		t.Errorf("%d host buffers not back in the pools", live)
	}
}

// A writer that cannot write stops the engine's work on that volume: failed once, with the
// write error, well before the engine would have finished it.
func TestWriteFailureStopsEngine(t *testing.T) {
	b := newBatch(t, 1)
	blocker := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocker, nil, 0o644)
	const slabs, delay = 11, 40 * time.Millisecond // vola: 11 slices in slabs of 1
	eng := allocatingEngine{&signEngine{delay: delay}}
	start := time.Now()
	out := runBatch(t, context.Background(), b, eng, func(c *Config) {
		c.Workers.Slab = 1
		for i := range c.Input.Jobs {
			if c.Input.Jobs[i].Name == "vola" {
				c.Input.Jobs[i].Output = filepath.Join(blocker, "vola_mask.nii.gz") // its folder is a file
			}
		}
	})
	if took := time.Since(start); took > slabs*delay*3/4 {
		t.Errorf("run took %v: the engine was not stopped (it needs %v)", took, slabs*delay)
	}
	if out.err != nil || out.res != (Result{Failed: 4}) {
		t.Fatalf("%+v %v", out.res, out.err)
	}
	s := statusByVolume(out.summary)["vola"]
	if s.Status != timing.StatusFailed || !strings.Contains(s.Error, "vola_mask.nii.gz") {
		t.Errorf("vola: %q %q, want failed with the write error", s.Status, s.Error)
	}
	if segs := len(rowsOf(out.rows, "vola", stage.Segment)); segs >= slabs {
		t.Errorf("engine ran all %d slabs after the writer failed", segs)
	}
	if live := eng.live.Load(); live != 0 {
		t.Errorf("%d host buffers not back in the pools", live)
	}
}

// SIGINT in the middle of a volume being streamed: the run stops with the context's error,
// the volume is failed once as interrupted, no temporary or partial mask remains, and every
// buffer is back in its pool.
func TestCancelWhileStreaming(t *testing.T) {
	t.Parallel()
	b := newBatch(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	eng := allocatingEngine{&signEngine{delay: 5 * time.Millisecond}}
	eng.afterSlab = func(vol *model.Volume, slab int) {
		if slab == 1 {
			cancel()
		}
	}
	out := runBatch(t, ctx, b, eng, func(c *Config) { c.Workers.Slab = 2; c.Workers.Readers = 1 })
	if !errors.Is(out.err, context.Canceled) {
		t.Fatalf("run error %v, want context.Canceled", out.err)
	}
	rows := map[string]int{}
	interrupted := 0
	for _, s := range out.summary {
		rows[s.Volume]++
		if s.Status == timing.StatusOK {
			t.Errorf("%s ok after the cancel of the first segmented volume", s.Volume)
		}
		if strings.Contains(s.Error, "interrupted") {
			interrupted++
		}
	}
	for v, n := range rows {
		if n != 1 {
			t.Errorf("%s: %d summary rows", v, n)
		}
	}
	if interrupted == 0 {
		t.Errorf("no volume failed as interrupted: %+v", out.summary)
	}
	entries, _ := os.ReadDir(b.out)
	for _, e := range entries {
		if strings.Contains(e.Name(), "_mask") {
			t.Errorf("mask %s left after the cancel", e.Name())
		}
	}
	assertNoTemporaries(t, b.out)
	if live := eng.live.Load(); live != 0 {
		t.Errorf("%d host buffers not back in the pools", live)
	}
}

// Several engines and one writer slower than they are (level 9, larger volumes): volumes queue
// for the writer while the engines go on, nothing deadlocks, every mask is right, and buffers
// stay within the pools.
func TestBusyWriterSeveralEngines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := &batch{in: filepath.Join(dir, "in"), out: filepath.Join(dir, "out"), good: map[string][]int16{}}
	os.MkdirAll(b.in, 0o755)
	for i := 0; i < 8; i++ {
		name := fmt.Sprintf("v%d", i)
		b.good[name] = writeVolume(t, filepath.Join(b.in, name+".nii"), 64, 48+i, 24, i)
	}
	base := &signEngine{}
	alloc := allocatingEngine{base}
	engines := []engine.Engine{alloc, namedEngine{&signEngine{}, "dev:1"}, namedEngine{&signEngine{}, "dev:2"}}
	done := make(chan runOutput, 1)
	go func() {
		done <- runBatch(t, context.Background(), b, engines[0], func(c *Config) {
			c.Engines = engines
			c.Workers.Readers, c.Workers.Writers, c.Workers.Slab = 3, 1, 5
			c.Output.Write = nifti.WriteOptions{Level: 9, Workers: 1}
		})
	}()
	var out runOutput
	select {
	case out = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("deadlock: the run did not finish in 60 s")
	}
	if out.err != nil || out.res.OK != 8 {
		t.Fatalf("%+v %v", out.res, out.err)
	}
	for _, s := range out.summary {
		_, mask, err := nifti.ReadUint8(s.Output)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mask, expectedMask(t, b.good[s.Volume])) {
			t.Errorf("%s (%s): wrong mask", s.Volume, s.Engine)
		}
	}
	// Only the first engine allocates (it is the HostAllocator): 3 readers + 3 engines inputs,
	// 3 engines + 1 writer masks.
	if peak := base.peak.Load(); peak > 10 {
		t.Errorf("peak live host buffers %d, want at most 10", peak)
	}
	if live := base.live.Load(); live != 0 {
		t.Errorf("%d host buffers not freed", live)
	}
}

// skippingEngine reports every slab but the first as done: planes the writer would take for
// final without their engine saying so.
type skippingEngine struct{ *signEngine }

func (e skippingEngine) Segment(ctx context.Context, vol *model.Volume, out []uint8, opt engine.Options) error {
	report := opt.OnSlabDone
	opt.OnSlabDone = func(z0, z1 int) {
		if z0 > 0 {
			report(z0, z1)
		}
	}
	return e.signEngine.Segment(ctx, vol, out, opt)
}

// An engine that breaks the OnSlabDone contract fails its volume rather than have planes
// written out of order or before they are final.
func TestSlabDoneOutOfOrderFailsVolume(t *testing.T) {
	t.Parallel()
	b := newBatch(t, 1)
	out := runBatch(t, context.Background(), b, skippingEngine{&signEngine{}}, nil)
	s := statusByVolume(out.summary)["vola"]
	if s.Status != timing.StatusFailed || !strings.Contains(s.Error, "reported slab z 4..8 done after z 0") {
		t.Errorf("vola: %q %q, want failed for the slab reported out of order", s.Status, s.Error)
	}
	assertNoTemporaries(t, b.out)
}
