package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"voxpipe/geometry"
	"voxpipe/io/nifti"
	"voxpipe/stage"
	"voxpipe/store/claim"
	"voxpipe/store/records"
)

// writers is the write stage: Config.Writers workers, each taking the volumes the engines
// hand over as their segmentation starts, streaming each mask's planes into a temporary file
// as the engine finishes them, and committing it.
type writers struct {
	*services
	in queue
}

// startWriters starts the writers on g.
func startWriters(ctx context.Context, g *errgroup.Group, r *services) *writers {
	// Engine workers queue a volume here as its segmentation starts and never wait on it:
	// every queued volume holds a mask buffer, so the queue never holds more than the mask
	// pool, its capacity (see volume.go).
	s := &writers{services: r, in: make(queue, r.mem.masks.Cap())}
	startWorkers(g, r.cfg.Workers.Writers, nil, func(i int) error { return s.work(ctx, i) })
	return s
}

// put hands a volume whose segmentation starts to the writers; it never blocks (see
// volume.go) unless ctx is done.
func (s *writers) put(ctx context.Context, w *work) error { return s.in.put(ctx, s.end, w) }

// close tells the writers that no more volumes are coming.
func (s *writers) close() { close(s.in) }

// work is writer i's loop.
func (s *writers) work(ctx context.Context, i int) error {
	for w := range s.in {
		s.write(ctx, i, w)
	}
	return ctx.Err()
}

// errSegmentFailed ends a writer whose volume's engine failed; the volume's error is the
// engine's, recorded by its worker.
var errSegmentFailed = errors.New("pipeline: segmentation failed")

// write streams the mask into a temporary file as its planes become final, commits it, and
// lets go of the volume.
func (r *writers) write(ctx context.Context, writer int, w *work) {
	err := r.writeMask(ctx, writer, w)
	if err != nil && !errors.Is(err, errSegmentFailed) {
		w.setErr(err)
		w.seg.cancel(err) // no use segmenting what will not be written
	}
	r.end.release(w)
}

func (r *writers) writeMask(ctx context.Context, writer int, w *work) error {
	track := fmt.Sprintf("writer %d", writer)
	plane, nz := w.vol.NX*w.vol.NY, w.vol.NZ
	mask := w.mem.mask.Bytes()[:plane*nz]
	var out *nifti.Writer
	committed := false
	defer func() {
		if out != nil && !committed {
			out.Abort() // removes the temporary file
		}
	}()
	for written := 0; ; {
		ready, finished, err := w.seg.progress.state()
		if err != nil {
			return errSegmentFailed
		}
		if ready == written {
			if finished {
				break
			}
			select {
			case <-w.seg.progress.wake:
			case <-w.claimLost():
				return fmt.Errorf("write %s: %w", w.job.Output, claim.ErrLost)
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		// Every plane ready at once: one large write keeps all the gzip workers busy, where
		// pieces of --slab planes (8 MiB at 512x512 and the default 32) left half of 16 cores
		// idle and the writer fell behind the GPU.
		z1 := ready
		start := time.Now()
		if out == nil {
			if out, err = r.createMask(ctx, w); err != nil {
				return err
			}
		}
		if w.prep.plan.inPlace() { // the engine labelled the flipped volume: these planes back
			geometry.FlipXY(mask[written*plane:z1*plane], w.vol.NX, w.vol.NY, w.prep.plan.ro.Flip[0], w.prep.plan.ro.Flip[1])
		}
		err = out.WriteSlices(mask[written*plane : z1*plane])
		n := int64((z1 - written) * plane)
		r.rec.span(w, span{stage: stage.Write, slab: written / r.cfg.Workers.Slab, device: stage.Host, track: track,
			start: start, end: time.Now(), bytes: n, voxels: n})
		if err != nil {
			return err
		}
		written = z1
	}
	if r.cfg.Output.Analyser != nil {
		if err := r.analyse(w, track); err != nil {
			return err
		}
	}
	if w.mem.in != nil { // left for the analyse step
		r.mem.putBack(r.mem.inputs, w.mem.in)
		w.mem.in = nil
	}
	segPath := ""
	if r.wantsSEG(w.job) {
		var err error
		if segPath, err = r.writeSEG(w, mask, track); err != nil {
			return err
		}
	}
	if w.claim != nil {
		// Paused past the claim's timeout, this process may have lost the volume to another.
		if err := w.claim.Check(); err != nil {
			return err
		}
	}
	start := time.Now()
	err := out.Commit()
	end := time.Now()
	r.rec.span(w, span{stage: stage.Write, slab: -1, device: stage.Host, track: track, start: start, end: end})
	if err != nil {
		if segPath != "" {
			os.Remove(segPath) // no SEG of a mask that is not there
		}
		return err
	}
	committed = true
	w.rec.committed = end
	return nil
}

// createMask starts the mask's temporary file, its header recording the provenance: it waits
// for the input's hash, then checks that the input has not changed since the volume was taken.
func (r *writers) createMask(ctx context.Context, w *work) (*nifti.Writer, error) {
	var h hashResult
	select {
	case h = <-w.src.hash:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if h.err != nil {
		return nil, fmt.Errorf("read %s: %w", w.job.Input, h.err)
	}
	if now, _, err := w.job.Stat(); err != nil || !now.SameFiles(w.src.input) {
		return nil, fmt.Errorf("read %s: %w", w.job.Input, ErrInputChanged)
	}
	rec := r.cfg.Output.Provenance
	rec.Input = w.src.input
	rec.Input.XXH3 = h.sum
	rec.Grid = w.prep.plan.String()
	if r.wantsSEG(w.job) {
		rec.SEG = filepath.Base(records.SEGPath(w.job.Output))
	}
	if err := os.MkdirAll(filepath.Dir(w.job.Output), 0o755); err != nil {
		return nil, fmt.Errorf("write %s: %w", w.job.Output, err)
	}
	hdr := nifti.MaskHeader(w.src.hdr, uint8(r.cfg.Output.Classes-1), r.cfg.Output.Descrip)
	hdr.Extensions = []nifti.Extension{rec.Extension()}
	return nifti.Create(w.job.Output, hdr, r.cfg.Output.Write)
}

// claimLost is closed when the volume's claim was taken over (never, without claims).
func (w *work) claimLost() <-chan struct{} {
	if w.claim == nil {
		return nil
	}
	return w.claim.Lost()
}

// analyse is the analyse step, in the writer once the mask is whole and before the commit:
// Config.Analyser makes the volume's statistics and preview (or removes stale ones) from the
// final mask on the input's grid, with the input as read when it needs it (the engine worker
// left it to the writer).
func (r *writers) analyse(w *work, track string) error {
	a := r.cfg.Output.Analyser
	voxels := w.vol.NX * w.vol.NY * w.vol.NZ
	mask := w.mem.mask.Bytes()[:voxels]
	if !a.NeedsInput() {
		return a.Analyse(w.job.Name, w.src.hdr, nil, mask)
	}
	start := time.Now()
	if w.prep.plan.inPlace() { // the input as read, for the intensities and the picture
		flipVolume(&w.vol, w.prep.plan)
	}
	if err := a.Analyse(w.job.Name, w.src.hdr, &w.vol, mask); err != nil {
		return err
	}
	r.rec.span(w, span{stage: stage.Analyse, slab: -1, device: stage.Host, track: track,
		start: start, end: time.Now(), voxels: int64(voxels)})
	return nil
}
