package pipeline

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
	"voxpipe/engine/engine"

	"voxpipe/jobs"
	"voxpipe/model"
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
		if e.beforeFail != nil { // e.g. wait until the writer has written everything
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

// progressFunc calls f when the first volume starts.
type progressFunc func()

func (f progressFunc) Start(int)                          {}
func (f progressFunc) VolumeStarted(jobs.Job, int)        { f() }
func (f progressFunc) PlanesDone(jobs.Job, int)           {}
func (f progressFunc) VolumeDone(jobs.Job, timing.Status) {}
func (f progressFunc) Close()                             {}

// namedEngine is a signEngine with its own name, for runs with several engines.
type namedEngine struct {
	*signEngine
	name string
}

func (e namedEngine) Name() string { return e.name }
