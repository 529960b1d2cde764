package pipeline

import (
	"context"
	"fmt"
	"time"
	"voxpipe/engine/engine"

	"golang.org/x/sync/errgroup"

	"voxpipe/geometry"
	"voxpipe/stage"
	"voxpipe/telemetry/timing"
)

// engines is the segment stage: one worker per engine, each taking read volumes, running its
// engine on one at a time into a mask buffer and handing the volume to the writers as the
// engine starts (see volume.go for how the two then share it).
type engines struct {
	*services
	in queue
}

// startEngines starts the engine workers on g; they close next's queue once all have returned.
func startEngines(ctx context.Context, g *errgroup.Group, r *services, next *writers) *engines {
	s := &engines{services: r, in: make(queue)}
	startWorkers(g, len(r.cfg.Engines), next.close, func(i int) error { return s.work(ctx, i, next) })
	return s
}

// put hands a read volume to the engines.
func (s *engines) put(ctx context.Context, w *work) error { return s.in.put(ctx, s.end, w) }

// close tells the engine workers that no more volumes are coming.
func (s *engines) close() { close(s.in) }

// work is engine worker i's loop.
func (s *engines) work(ctx context.Context, i int, next *writers) error {
	eng := s.cfg.Engines[i]
	// An engine still opening (the CUDA engine's context) finishes while the readers read;
	// one that cannot open stops the run with its error instead of failing every volume.
	if o, ok := eng.(engine.BackgroundOpener); ok {
		if err := o.Ready(); err != nil {
			return err
		}
	}
	for w := range s.in {
		s.segment(ctx, i, eng, w, next)
	}
	return ctx.Err()
}

// segment runs the engine on the volume into a pooled mask buffer, handing the volume to the
// writers (next) as it starts; then frees the input and lets go of the volume.
func (r *engines) segment(ctx context.Context, worker int, eng engine.Engine, w *work, next *writers) {
	buf, err := r.mem.masks.Get(ctx)
	if err != nil {
		r.end.fail(w, context.Cause(ctx))
		return
	}
	w.mem.mask = buf
	voxels := w.vol.NX * w.vol.NY * w.vol.NZ
	err = r.mem.grow(w, w.mem.mask, voxels)
	r.mem.releaseReservation(w) // every buffer the volume needs is now sized
	if err != nil {
		r.end.fail(w, err)
		return
	}
	segCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w.seg.progress = newSegProgress(w.vol.NZ)
	w.seg.cancel = cancel
	w.seg.holders.Store(2)
	if next.put(ctx, w) != nil {
		return // no writer has it: put has failed it
	}

	err = r.runEngine(segCtx, worker, eng, w)
	if err == nil && w.prep.model != nil {
		r.restore(w, worker)
	}
	if err == nil {
		// Before seg.finish: the writer commits only once the engine is finished without error.
		err = r.concludeDomain(w)
	}
	r.mem.dropModel(w)
	if !r.cfg.analysesInput() { // else the writer, which analyses the volume, gives it back
		r.mem.putBack(r.mem.inputs, w.mem.in)
		w.mem.in = nil
	}
	if err != nil && segCtx.Err() != nil {
		err = context.Cause(segCtx) // the run's cause, or the writer's failure
	}
	if err = w.seg.progress.finish(err); err != nil {
		w.setErr(fmt.Errorf("segment %s: %w", w.job.Input, err))
	}
	r.end.release(w)
}

// runEngine runs eng on the volume, recording its events, its time and its progress.
func (r *engines) runEngine(ctx context.Context, worker int, eng engine.Engine, w *work) error {
	device := eng.Name()
	start := time.Now()
	w.rec.mu.Lock()
	w.rec.sum.Engine = device
	w.rec.segStart = start
	w.rec.mu.Unlock()
	sawSegment := false
	// The engine reads the volume as stored and its labels go straight to the writer, or it
	// reads the model's view (prepare.go) and the restore step below brings them back.
	voxels := w.vol.NX * w.vol.NY * w.vol.NZ
	vol, out, onSlab := &w.vol, w.mem.mask.Bytes()[:voxels], w.seg.progress.slabDone
	if w.prep.model != nil {
		vol, out, onSlab = w.prep.model, w.prep.modelMask, nil
	}
	plane := int64(vol.NX) * int64(vol.NY)
	err := eng.Segment(ctx, vol, out, engine.Options{
		Slab:       r.cfg.Workers.Slab,
		OnSlabDone: onSlab,
		Confidence: &w.prep.dom.conf,
		OnEvent: func(ev engine.Event) {
			s := start.Add(ev.Start)
			switch ev.Stage {
			case stage.Segment:
				sawSegment = true
			}
			switch {
			case w.prep.model != nil: // progress counts the input's planes, all restored at once
			case ev.Stage == stage.Segment, ev.Stage == stage.D2H: // a GPU slab is done when its mask is back
				r.rec.progress().PlanesDone(w.job, int(ev.Voxels/plane))
			}
			r.rec.record(w, timing.Span{Process: device, Track: string(ev.Stage), Row: timing.Row{
				Stage: ev.Stage, Slab: ev.Slab, Device: device,
				StartMS: ms(s.Sub(r.rec.t0)), DurationMS: ms(ev.Duration), Bytes: ev.Bytes, Voxels: ev.Voxels,
			}})
		},
	})
	end := time.Now()
	// The engine's own events cover its work; a single whole-volume row stands in for engines
	// that report only finer stages (h2d, kernels, d2h), so "segment" is always there once.
	w.rec.mu.Lock()
	w.rec.sum.SegmentMS = ms(end.Sub(start))
	w.rec.mu.Unlock()
	if !sawSegment {
		r.rec.span(w, span{stage: stage.Segment, slab: -1, device: device, track: fmt.Sprintf("engine %d", worker),
			start: start, end: end, voxels: int64(voxels)})
	}
	return err
}

// restore maps the labels the engine made on the model's view back to the input's grid, each
// voxel taking the label of the model voxel that contains its centre, and hands them all to
// the writer at once.
func (r *engines) restore(w *work, worker int) {
	start := time.Now()
	voxels := w.vol.NX * w.vol.NY * w.vol.NZ
	geometry.LabelsBack(w.mem.mask.Bytes()[:voxels], w.prep.modelMask, w.prep.plan.ro, w.prep.plan.rs)
	r.rec.span(w, span{stage: stage.Restore, slab: -1, device: stage.Host, track: fmt.Sprintf("engine %d", worker),
		start: start, end: time.Now(), voxels: int64(voxels)})
	r.rec.progress().PlanesDone(w.job, w.vol.NZ)
	w.seg.progress.slabDone(0, w.vol.NZ)
}
