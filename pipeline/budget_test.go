package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"voxpipe/engine/engine"
	"voxpipe/internal/dicomtest"
	"voxpipe/internal/hostmem"

	"voxpipe/io/dicom"
	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/telemetry/timing"
)

// bytesEngine is a signEngine whose host buffers count live bytes, like the CUDA engine's
// page-locked allocator.
type bytesEngine struct {
	*signEngine
	live, peak atomic.Int64
}

type bytesBuffer struct {
	b []byte
	e *bytesEngine
}

func (c *bytesBuffer) Bytes() []byte { return c.b }
func (c *bytesBuffer) Free() error {
	c.e.live.Add(-int64(len(c.b)))
	c.b = nil
	return nil
}

func (e *bytesEngine) AllocHost(n int) (engine.HostBuffer, error) {
	live := e.live.Add(int64(n))
	for p := e.peak.Load(); live > p && !e.peak.CompareAndSwap(p, live); p = e.peak.Load() {
	}
	return &bytesBuffer{b: make([]byte, n), e: e}, nil
}

func TestMemoryBudget(t *testing.T) {
	t.Parallel()
	// One of newBatch's volumes needs ~64 KiB of input headroom, ~2 KiB of int16 voxels and ~1
	// KiB of mask.
	one := int64(inputHeadroom + 3<<10)
	for _, tc := range []struct {
		name   string
		budget int64
		ok     int
	}{
		{"room for one volume at a time", one + one/2, 4},
		{"room for two", 2*one + one/2, 4},
		{"room for none", inputHeadroom / 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBatch(t, 4)
			eng := &bytesEngine{signEngine: &signEngine{delay: time.Millisecond}}
			done := make(chan runOutput, 1)
			go func() {
				done <- runBatch(t, context.Background(), b, eng, func(c *Config) {
					c.Workers.MaxMemory, c.Workers.Readers, c.Workers.Writers, c.Workers.Slab = tc.budget, 3, 2, 2
				})
			}()
			var out runOutput
			select {
			case out = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("run did not finish: deadlocked on the budget?")
			}
			if out.err != nil || out.res.OK != tc.ok {
				t.Fatalf("%+v %v", out.res, out.err)
			}
			if p := eng.peak.Load(); p > tc.budget {
				t.Errorf("peak host buffers %d bytes, over the %d-byte budget", p, tc.budget)
			}
			for _, s := range out.summary {
				if _, good := b.good[s.Volume]; good && s.Status != timing.StatusOK &&
					!strings.Contains(s.Error, "--max-memory") {
					t.Errorf("%s: %s %q, want it failed by the budget", s.Volume, s.Status, s.Error)
				}
			}
		})
	}
}

// A volume too large for the budget fails alone, before anything is allocated for it; the
// others are done.
func TestMemoryBudgetFailsTheLargeVolumeAlone(t *testing.T) {
	t.Parallel()
	b := newBatch(t, 3)
	writeVolume(t, filepath.Join(b.in, "huge.nii"), 200, 100, 40, 1) // 1.6 MB of int16
	eng := &bytesEngine{signEngine: &signEngine{}}
	budget := int64(1 << 20)
	out := runBatch(t, context.Background(), b, eng, func(c *Config) { c.Workers.MaxMemory = budget })
	if out.err != nil || out.res.OK != 3 {
		t.Fatalf("%+v %v", out.res, out.err)
	}
	s := statusByVolume(out.summary)["huge"]
	if s.Status != timing.StatusFailed || !strings.Contains(s.Error, "budget") {
		t.Fatalf("huge: %s %q", s.Status, s.Error)
	}
	if p := eng.peak.Load(); p > budget {
		t.Errorf("peak %d bytes over the budget %d", p, budget)
	}
	r := &memory{budget: hostmem.NewBudget(budget), log: discardLogger}
	w := &work{job: jobs.Job{Input: filepath.Join(b.in, "huge.nii")}, mem: held{in: hostmem.NewBuffer(nil, inputHeadroom)}}
	w.src.hdr = mustHeader(t, w.job.Input)
	if err := r.admit(context.Background(), w); !errors.Is(err, ErrMemoryBudget) {
		t.Errorf("admit: %v, want ErrMemoryBudget", err)
	}
}

func mustHeader(t *testing.T, path string) *nifti.Header {
	t.Helper()
	h, err := nifti.ReadHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Volumes that wait for the one engine have that wait in queue_ms, not in their service time.
func TestQueueTime(t *testing.T) {
	b := newBatch(t, 4)
	const delay = 20 * time.Millisecond // per slab: each volume takes >= 60 ms in the engine
	out := runBatch(t, context.Background(), b, &signEngine{delay: delay}, func(c *Config) { c.Workers.Readers = 4 })
	if out.res.OK != 4 {
		t.Fatalf("%+v", out.res)
	}
	var queued int
	for _, s := range out.summary {
		if s.Status != timing.StatusOK {
			continue
		}
		if s.QueueMS < 0 || s.QueueMS > s.WallMS {
			t.Errorf("%s: queue %.1f ms of wall %.1f ms", s.Volume, s.QueueMS, s.WallMS)
		}
		// Service (wall - queue) is about the volume's own stages, not its neighbours'.
		if service := s.WallMS - s.QueueMS; service > s.ReadMS+s.StatsMS+s.SegmentMS+s.WriteMS+50 {
			t.Errorf("%s: service %.1f ms, but its stages take %.1f", s.Volume, service, s.ReadMS+s.StatsMS+s.SegmentMS+s.WriteMS)
		}
		if s.QueueMS > float64(2*delay/time.Millisecond) {
			queued++
		}
	}
	if queued < 2 {
		t.Errorf("%d volumes queued behind the engine, want at least 2 of 4", queued)
	}
}

// A compressed DICOM series reserves, besides its buffers, the compressed frames its read
// threads hold (dicom.Series.DecodeScratch): a budget one byte short of that fails it.
func TestAdmitCountsDecodeScratch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var paths []string
	for k := range 4 {
		frame := make([]byte, 2*24*16)
		img := dicomtest.Image{
			Syntax:   "1.2.840.10008.1.2.1.98", // encapsulated uncompressed: frames in fragments
			IDs:      dicomtest.IDs{StudyUID: "1.2", SeriesUID: "1.2.3", SOPUID: fmt.Sprintf("1.2.3.%d", k), Number: 1, Instance: k + 1},
			Geometry: dicomtest.Geometry{Rows: 16, Columns: 24, Position: [3]float64{0, 0, float64(k)}, Orientation: dicomtest.Axial, Spacing: [2]float64{1, 1}},
			Pixels:   dicomtest.Pixels{Encapsulated: dicomtest.Encapsulate([][]byte{frame}, 2, false, false)},
		}
		p := filepath.Join(dir, dicomtest.FileName(k))
		if err := os.WriteFile(p, img.File(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	s := dicom.ScanFiles(paths, 1).Series[0]
	scratch := s.DecodeScratch(2)
	if scratch != 2*(2*24*16) {
		t.Fatalf("DecodeScratch(2) = %d, want two frames' fragments, %d", scratch, 2*2*24*16)
	}
	h := s.Header(s.StoredType())
	for _, short := range []int64{1, 0} {
		m := &memory{readThreads: 2, log: discardLogger}
		in, mask, _, prep := m.volumeNeeds(h, nil, nil)
		m.budget = hostmem.NewBudget(in + mask + prep + scratch - short)
		w := &work{job: jobs.Job{Input: dir, Series: s}, mem: held{in: hostmem.NewBuffer(nil, inputHeadroom)}}
		w.src.hdr = h
		err := m.admit(context.Background(), w)
		if short == 1 && !errors.Is(err, ErrMemoryBudget) || short == 0 && (err != nil || w.mem.scratch != scratch) {
			t.Errorf("budget %d short: admit %v, scratch %d of %d", short, err, w.mem.scratch, scratch)
		}
	}
}
