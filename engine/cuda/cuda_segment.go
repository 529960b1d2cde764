//go:build cuda

package cuda

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"voxpipe/engine/cuda/kernels"
	"voxpipe/engine/engine"
	"voxpipe/internal/hostmem"
	"voxpipe/internal/spans"
	"voxpipe/model"
	"voxpipe/stage"
)

// segment runs on the thread: it plans the volume's slabs, enqueues them all (enqueue), then
// harvests each in order: waits for its download, reports its events and its planes done.
func (e *cudaEngine) segment(ctx context.Context, vol *model.Volume, out []uint8, opt engine.Options, start time.Time) error {
	if e.broken != nil {
		return fmt.Errorf("%s unusable after an earlier CUDA error: %w", e.name, e.broken)
	}
	sp := e.planSegment(vol, out, opt.Slab)
	if err := e.ensureBuffers(int64(sp.slab), sp.plane, sp.elem); err != nil {
		return err
	}
	// The caller's buffers may still be page-locking aside (registerAside), or queued for it.
	inBytes := vol.NX * vol.NY * vol.NZ * int(sp.elem)
	e.pins.PinFor(sp.host, inBytes)
	e.pins.PinFor(sp.outHost, len(out))
	stats := engine.GPUStats{Pinned: hostmem.IsPinned(sp.host, inBytes) && hostmem.IsPinned(sp.outHost, len(out))}

	refOffset := time.Since(start)
	if err := e.ref.Record(e.h2d); err != nil {
		return e.fail(fmt.Errorf("record event: %w", err))
	}
	// The confidence counters start at 0 before the first upload, which every slab's kernels
	// wait for (the last Segment call synchronized every stream before it returned).
	if err := cu.MemsetD8Async(e.bufs.conf.ptr(), 0, e.bufs.conf.size, e.h2d); err != nil {
		return e.fail(fmt.Errorf("clear confidence: %w", err))
	}
	if err := e.ensureEvents(sp.slabs()); err != nil {
		return e.fail(err)
	}
	if err := e.runSlabs(ctx, sp, opt, refOffset, &stats); err != nil {
		return err
	}
	return e.finishVolume(sp, opt, stats)
}

// segmentPlan is one Segment call's layout: slab k is output planes zs[k]..zs[k+1], slab the
// largest slab's planes; host and outHost are the caller's input and label memory.
type segmentPlan struct {
	vol           *model.Volume
	zs            []int
	slab          int
	plane, elem   int64
	host, outHost unsafe.Pointer
}

func (sp *segmentPlan) slabs() int { return len(sp.zs) - 1 }

// planSegment cuts vol into slabs (slabSizes) for a Segment call writing out.
func (e *cudaEngine) planSegment(vol *model.Volume, out []uint8, slabOpt int) *segmentPlan {
	sp := &segmentPlan{vol: vol, plane: int64(vol.NX) * int64(vol.NY), elem: int64(vol.ElemSize())}
	sizes := e.slabSizes(vol.NZ, slabOpt, sp.plane*sp.elem)
	sp.zs = make([]int, len(sizes)+1)
	for k, n := range sizes {
		sp.zs[k+1] = sp.zs[k] + n
	}
	sp.slab = slices.Max(sizes)
	if vol.I16 != nil {
		sp.host = unsafe.Pointer(&vol.I16[0])
	} else {
		sp.host = unsafe.Pointer(&vol.F32[0])
	}
	sp.outHost = unsafe.Pointer(&out[0])
	return sp
}

// runSlabs puts every slab onto the streams first, ordered there by events alone, so that no
// upload waits for the host (a host that enqueued slab k only after harvesting slab k-2 left the
// kernels of the first slabs waiting for their uploads: docs/perf.md); then it harvests the
// slabs in order as their downloads complete: their events into stats, their planes to
// opt.OnSlabDone. It returns once every stream is idle: nothing may touch the caller's memory
// after Segment returns.
func (e *cudaEngine) runSlabs(ctx context.Context, sp *segmentPlan, opt engine.Options, refOffset time.Duration, stats *engine.GPUStats) error {
	var kernelsEnd time.Duration // the latest kernel end reported so far (since the reference event)
	harvest := func(k int) error {
		ev := &e.ring[k]
		if err := ev.d2h1.Synchronize(); err != nil {
			return e.fail(fmt.Errorf("slab %d: %w", k, err))
		}
		if err := e.report(k, ev, refOffset, stats, &kernelsEnd, opt.OnEvent); err != nil {
			return err
		}
		if opt.OnSlabDone != nil { // slab k's download is complete: its labels are in out
			opt.OnSlabDone(sp.zs[k], sp.zs[k+1])
		}
		return nil
	}
	var runErr error
	enqueued := 0
	for k := 0; k < sp.slabs() && runErr == nil; k++ {
		if err := ctx.Err(); err != nil {
			runErr = fmt.Errorf("segment slab %d: %w", k, err)
			break
		}
		p := planSlab(k, sp.zs[k], sp.zs[k+1], sp.vol.NZ, sp.plane, sp.elem)
		if runErr = e.enqueue(sp.vol, p, int64(sp.slab), sp.plane, sp.elem, sp.host, sp.outHost); runErr == nil {
			enqueued = k + 1
		}
	}
	for harvested := 0; harvested < enqueued && runErr == nil; harvested++ {
		if err := ctx.Err(); err != nil {
			runErr = fmt.Errorf("segment slab %d: %w", harvested, err)
			break
		}
		runErr = harvest(harvested)
	}
	for _, s := range e.streams() {
		if err := s.Synchronize(); err != nil && runErr == nil {
			runErr = e.fail(fmt.Errorf("synchronize: %w", err))
		}
	}
	return runErr
}

// finishVolume reads the confidence (when asked for) and keeps the call's stats, with the time
// from the reference event to the last download (LastStats).
func (e *cudaEngine) finishVolume(sp *segmentPlan, opt engine.Options, stats engine.GPUStats) error {
	if opt.Confidence != nil {
		if err := e.readConfidence(opt.Confidence, sp.plane*int64(sp.vol.NZ)); err != nil {
			return err
		}
	}
	last := &e.ring[sp.slabs()-1]
	total, err := e.ref.Elapsed(last.d2h1)
	if err != nil {
		return e.fail(fmt.Errorf("elapsed time: %w", err))
	}
	stats.Total = msDuration(total)
	stats.Slabs = sp.slabs()
	e.lastLock.Lock()
	e.last = stats
	e.lastLock.Unlock()
	return nil
}

// readConfidence copies the confidence counters of the volume just segmented (voxels of them)
// into c, once every stream is idle.
func (e *cudaEngine) readConfidence(c *model.Confidence, voxels int64) error {
	var raw [kernels.ConfLen]uint64
	if err := cu.MemcpyDtoH(unsafe.Pointer(&raw[0]), e.bufs.conf.ptr(), int64(unsafe.Sizeof(raw))); err != nil {
		return e.fail(fmt.Errorf("read confidence: %w", err))
	}
	*c = model.Confidence{Voxels: voxels, Labels: make([]int64, e.weights.Classes),
		MarginVoxels: int64(raw[kernels.ConfForeground]), MarginSum: int64(raw[kernels.ConfMargin]), LowMargin: int64(raw[kernels.ConfLow])}
	for l := range c.Labels {
		c.Labels[l] = int64(raw[kernels.ConfLabels+l])
	}
	return nil
}

// stickyErrors are the CUDA errors that leave the context unusable (a kernel fault): every
// later call of the process on it fails.
var stickyErrors = []error{cu.IllegalAddress, cu.LaunchFailed, cu.IllegalInstruction, cu.MisalignedAddress,
	cu.HardwareStackError, cu.InvalidPc, cu.Assert, cu.EccUncorrectable}

// fail records err as sticky when it is one of stickyErrors, and returns it with the engine's
// name.
func (e *cudaEngine) fail(err error) error {
	for _, sticky := range stickyErrors {
		if errors.Is(err, sticky) {
			e.broken = err
		}
	}
	return fmt.Errorf("%s: %w", e.name, err)
}

// report reads slab k's event times, adds them to st and sends its Events. kernelsEnd is the
// latest kernel end of the slabs reported before.
func (e *cudaEngine) report(k int, ev *slabEvents, refOffset time.Duration, st *engine.GPUStats, kernelsEnd *time.Duration, onEvent func(engine.Event)) error {
	at := func(x cu.Event) (time.Duration, error) {
		ms, err := e.ref.Elapsed(x)
		return msDuration(ms), err
	}
	var t [9]time.Duration
	for i, x := range ev.list() {
		d, err := at(*x)
		if err != nil {
			return e.fail(fmt.Errorf("slab %d: elapsed time: %w", k, err))
		}
		t[i] = d
	}
	h2d0, h2d1, k0, c1, c2, cg, k1, d2h0, d2h1 := t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8]
	st.H2D += h2d1 - h2d0
	// Kernel time is time with a kernel running: slab k's may overlap slab k-1's (two compute
	// streams), and slabs are reported in order.
	busy := spans.BusyAdded(kernelsEnd, k0, k1-k0)
	st.Kernels += busy
	st.D2H += d2h1 - d2h0
	if e.fused {
		st.Fused += busy
	} else {
		st.Conv1 += c1 - k0
		st.Conv2 += c2 - c1
		st.ConvG += cg - c2
		st.GateHead += k1 - cg
	}
	st.H2DBytes += ev.inputBytes
	st.D2HBytes += ev.labelBytes
	st.Voxels += ev.voxels
	if onEvent != nil {
		onEvent(engine.Event{Stage: stage.H2D, Slab: k, Start: refOffset + h2d0, Duration: h2d1 - h2d0, Bytes: ev.inputBytes, Voxels: ev.voxels})
		onEvent(engine.Event{Stage: stage.Kernels, Slab: k, Start: refOffset + k0, Duration: k1 - k0, Voxels: ev.voxels})
		onEvent(engine.Event{Stage: stage.D2H, Slab: k, Start: refOffset + d2h0, Duration: d2h1 - d2h0, Bytes: ev.labelBytes, Voxels: ev.voxels})
	}
	return nil
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
