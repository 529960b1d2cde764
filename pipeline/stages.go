package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"voxpipe/io/nifti"
	"voxpipe/pipeline/claim"
	"voxpipe/pipeline/provenance"
	"voxpipe/pipeline/records"
	"voxpipe/pipeline/timing"
	"voxpipe/segment"
)

// Stage names, as they appear in timings.csv.
const (
	StageRead    = "read"
	StageStats   = "stats"
	StageSegment = "segment"
	StageWrite   = "write"
)

// ErrNonFinite fails volumes with NaN or infinite values, which the network cannot normalise.
var ErrNonFinite = errors.New("pipeline: volume has NaN or infinite values")

// read decodes the volume into a pooled buffer (int16 when the stored values fit, float32
// otherwise) and accumulates the normalisation statistics on the way: by z-ranges in parallel
// for uncompressed files and for gzipped ones that nifti.Open inflated whole on several cores
// (readAt), slab by slab in order for the other gzipped ones (readSequential).
func (r *runner) read(ctx context.Context, reader int, w *work) bool {
	w.start = time.Now()
	if !w.job.Arrived.IsZero() {
		w.start = w.job.Arrived // a watched file's sojourn starts when it is complete
	}
	buf, err := r.inputs.Get(ctx)
	if err != nil {
		r.fail(w, context.Cause(ctx))
		return false
	}
	w.in = buf
	if err := r.admit(ctx, w); err != nil {
		r.fail(w, err)
		return false
	}
	w.readStart = time.Now()
	err = r.decode(ctx, reader, w)
	w.readEnd = time.Now()
	r.releaseScratch(w) // decode has closed the reader and with it any inflate memory
	if err != nil {
		r.fail(w, err)
		return false
	}
	// After the read, which may use every core (the parallel inflate), while the engine works.
	r.startHash(ctx, w)
	return true
}

// ErrInputChanged fails a volume whose input changed while voxpipe read it: the mask would
// match neither version.
var ErrInputChanged = errors.New("pipeline: input changed while it was read")

func (r *runner) decode(ctx context.Context, reader int, w *work) error {
	track := fmt.Sprintf("reader %d", reader)
	t := time.Now()
	threads := r.cfg.readThreads()
	opts := []nifti.OpenOption{nifti.WithInflateThreads(threads), nifti.WithContext(ctx)}
	if r.cfg.Volume != nil {
		opts = append(opts, nifti.WithVolume(*r.cfg.Volume))
	}
	rd, err := nifti.Open(w.job.Input, append(opts,
		nifti.WithInflateInto(func(prefix int, dataBytes int64, dt nifti.DataType, swapped bool) []byte {
			// Inflated straight into the input buffer when the stored voxels are what the
			// engine reads (int16 or float32 in host order): no copy, no second volume in memory.
			asInt16 := nifti.Int16Exact(dt)
			if swapped || !(asInt16 && dt == nifti.Int16 || !asInt16 && dt == nifti.Float32) ||
				int64(int(dataBytes)) != dataBytes || r.grow(w, w.in, int(dataBytes)) != nil {
				return nil
			}
			return w.in.withPrefix(prefix)
		}))...)
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if errors.Is(err, nifti.ErrMultiVolume) && r.cfg.Volume == nil {
			err = fmt.Errorf("%w (choose one with --volume N)", err)
		}
		return err
	}
	defer rd.Close()
	if h, was := rd.Header(), w.hdr; was != nil &&
		(h.NX() != was.NX() || h.NY() != was.NY() || h.NZ() != was.NZ() || h.Datatype != was.Datatype) {
		// What was admitted (and budgeted) is not what is read.
		return fmt.Errorf("read %s: %w (its header now declares other dims or datatype)", w.job.Input, ErrInputChanged)
	}
	w.hdr = rd.Header()
	nx, ny, nz := w.hdr.NX(), w.hdr.NY(), w.hdr.NZ()
	plane := nx * ny
	voxels := plane * nz
	w.sum.Dims = fmt.Sprintf("%dx%dx%d", nx, ny, nz)
	w.sum.Voxels = int64(voxels)
	w.vol = segment.Volume{NX: nx, NY: ny, NZ: nz}
	r.progress().VolumeStarted(w.job, nz)

	asInt16 := nifti.Int16Exact(w.hdr.Datatype)
	sampleSize := 4
	if asInt16 {
		sampleSize = 2
	}
	if err := r.grow(w, w.in, voxels*sampleSize); err != nil {
		return err
	}
	if asInt16 {
		w.vol.I16 = w.in.int16s(voxels)
	} else {
		w.vol.F32 = w.in.float32s(voxels)
	}
	var stats segment.Stats
	w.inflatedInto = rd.InflatedInto()
	if rd.Seekable() {
		if stats, err = r.readAt(ctx, rd, w, threads, w.inflatedInto, track, t); err != nil {
			return err
		}
	} else if stats, err = r.readSequential(ctx, rd, w, track, t); err != nil {
		return err
	}
	slope, inter := rd.Scaling()
	mu, sigma := stats.MeanStd(slope, inter)
	if math.IsNaN(mu) || math.IsInf(mu, 0) || math.IsNaN(sigma) || math.IsInf(sigma, 0) {
		// A NaN or infinite voxel poisons the statistics and with them every voxel's input.
		return fmt.Errorf("read %s: %w", w.job.Input, ErrNonFinite)
	}
	w.vol.Norm = segment.NormFor(mu, sigma, slope, inter)
	return nil
}

// readSequential reads a volume in order, slab by slab, adding each slab to the statistics
// once read (for gzip, the inflating read-ahead works on the next slab meanwhile). Timing rows
// read and stats per slab; the first read row starts at t, when the file was opened.
func (r *runner) readSequential(ctx context.Context, rd *nifti.Reader, w *work, track string, t time.Time) (segment.Stats, error) {
	nz, plane := w.vol.NZ, w.vol.NX*w.vol.NY
	asInt16 := w.vol.I16 != nil
	sampleSize := 4
	if asInt16 {
		sampleSize = 2
	}
	var stats segment.Stats
	var err error
	for z, slab := 0, 0; z < nz; slab++ {
		if err := ctx.Err(); err != nil {
			return stats, context.Cause(ctx)
		}
		want := min(r.cfg.Slab, nz-z)
		var n int
		if asInt16 {
			n, err = rd.ReadSlicesInt16(w.vol.I16[z*plane:], want)
		} else {
			n, err = rd.ReadSlicesFloat32(w.vol.F32[z*plane:], want)
		}
		if err == io.EOF || (err == nil && n == 0) {
			err = fmt.Errorf("read %s: volume ends at slice %d of %d", w.job.Input, z, nz)
		}
		if err != nil {
			return stats, err
		}
		r.span(w, StageRead, slab, "host", track, t, time.Now(), int64(n*plane*sampleSize), int64(n*plane))
		t = time.Now()
		if asInt16 {
			stats.AddInt16(w.vol.I16[z*plane : (z+n)*plane])
		} else {
			stats.AddFloat32(w.vol.F32[z*plane : (z+n)*plane])
		}
		r.span(w, StageStats, slab, "host", track, t, time.Now(), 0, int64(n*plane))
		z += n
		t = time.Now()
	}
	return stats, nil
}

// readPiece is how much a positional reader reads per call, in decoded bytes (whole planes,
// at least one): small enough that the statistics then sum it from cache. A variable for tests.
var readPiece = 1 << 20

// readAt reads an uncompressed volume by position on `threads` goroutines, each taking the
// next task of a list in z order and adding the planes it reads to that task's own statistics
// right after reading them, while they are in cache (inPlace: the volume is already in the
// input buffer, inflated into it at Open, and only the statistics are made). Tasks are ~1 MiB
// pieces (readPiece) for int16, whose sums are exact in any split, and whole slabs of the
// sequential path for float32, each summed from the volume's first value as origin, exactly as
// AddFloat32 sums one slab (segment.StatsFrom, AddFloat32Piece); the tasks' statistics are
// merged in z order (Stats.Merge), so the result equals the sequential statistics bit for bit.
// Taking tasks as they come rather than one z-range per goroutine keeps the goroutines busy to
// the end (one range per goroutine left 7 of 21 ms of a 524 MB volume's statistics to a few
// stragglers on the GPU machine). Timing rows: one `read` row from t (the file's opening) until
// every task is done, so that the statistics, fused into the read, are in it; one `stats` row
// for the merge.
func (r *runner) readAt(ctx context.Context, rd *nifti.Reader, w *work, threads int, inPlace bool, track string, t time.Time) (segment.Stats, error) {
	nz, plane := w.vol.NZ, w.vol.NX*w.vol.NY
	asInt16 := w.vol.I16 != nil
	sampleSize := 2
	var origin float32
	if !asInt16 {
		sampleSize = 4
		// The first value is the origin of the float32 sums: read it (with its plane) first.
		if !inPlace {
			if _, err := rd.ReadSlicesFloat32At(w.vol.F32[:plane], 0, 1); err != nil {
				return segment.Stats{}, err
			}
		}
		origin = w.vol.F32[0]
	}
	// A task is one piece of about readPiece bytes (int16), or a slab read in such pieces in
	// order (float32).
	piece := max(1, readPiece/(plane*sampleSize))
	task := piece
	if !asInt16 {
		task = r.cfg.Slab
	}
	tasks := (nz + task - 1) / task
	parts := make([]segment.Stats, tasks)
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for range max(1, min(threads, tasks)) {
		g.Go(func() error {
			for {
				k := int(next.Add(1) - 1)
				if k >= tasks {
					return nil
				}
				part := &parts[k]
				if !asInt16 {
					*part = segment.StatsFrom(origin)
				}
				z1 := min((k+1)*task, nz)
				for z := k * task; z < z1; {
					if gctx.Err() != nil {
						return context.Cause(gctx)
					}
					want := min(piece, z1-z)
					n := want
					var err error
					if asInt16 {
						if !inPlace {
							n, err = rd.ReadSlicesInt16At(w.vol.I16[z*plane:], z, want)
						}
						part.AddInt16(w.vol.I16[z*plane : (z+n)*plane])
					} else {
						if !inPlace {
							n, err = rd.ReadSlicesFloat32At(w.vol.F32[z*plane:], z, want)
						}
						part.AddFloat32Piece(w.vol.F32[z*plane : (z+n)*plane])
					}
					if err == nil && n != want {
						err = fmt.Errorf("read %s: volume ends at slice %d of %d", w.job.Input, z+n, nz)
					}
					if err != nil {
						return err
					}
					z += n
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		return segment.Stats{}, err
	}
	read := time.Now()
	r.span(w, StageRead, -1, "host", track, t, read, int64(nz*plane*sampleSize), int64(nz*plane))
	var stats segment.Stats
	for _, p := range parts {
		stats.Merge(p)
	}
	r.span(w, StageStats, -1, "host", track, read, time.Now(), 0, int64(nz*plane))
	return stats, nil
}

// Segmentation and writing overlap. As soon as an engine worker has a mask buffer for a
// volume it queues the volume for the write stage and starts the engine; the engine reports
// each slab whose labels are final (segment.Options.OnSlabDone) and the writer streams those
// planes into the temporary file while later slabs are computed, then commits once the engine
// has returned without error. The rules that keep this safe:
//
//   - Ownership and buffers. From the hand-over on, the volume has two holders, its engine
//     worker and its writer (work.holders = 2). Each lets go exactly once (release); the last
//     one concludes the volume: its summary row, ok or failed, written exactly once, and its
//     mask buffer back in the pool, exactly once and only after both the engine and the writer
//     are done with it. The engine worker gives the input buffer back itself, before it lets
//     go. Before the hand-over (no mask buffer yet, or the queue refused under cancellation)
//     the engine worker alone owns the volume and fails it itself.
//   - No deadlock. An engine worker never waits for a writer: the queue toWrite holds at most
//     as many volumes as there are mask buffers (each queued volume holds one), which is its
//     capacity, so the hand-over never blocks; OnSlabDone only records the progress and wakes
//     the writer without blocking. Writers wait only for slabs of volumes already handed over,
//     whose engines therefore run freely (or have returned). An engine worker blocks only on
//     the mask pool, when it holds no volume in segmentation, and buffers come back as writers
//     finish. With all writers busy, volumes wait in the queue while engines keep segmenting
//     (at most engines+writers masks in flight, as before).
//   - Failures. The volume's first failure wins (setErr). An engine error ends the writer's
//     wait; the writer aborts its temporary file (nothing carries the final name) and never
//     commits. A writer error (disk full) cancels the engine's work on the volume
//     (cancelSeg). Either way the volume is failed once, by whoever lets go last, and with
//     --fail-fast that stops the batch.
//   - Cancellation. Every wait selects on ctx.Done(): the hand-over, the writer's wait for
//     slabs, the pool. On SIGINT the engine returns the context's error, the writer aborts, and
//     the last holder fails the volume as interrupted. Volumes still queued are drained by the
//     writers, which abort them at once.
//   - Timings. The engine's own events as before; one `write` row per chunk written (at most a
//     slab of planes, timed around the write call only, the first one including creating the
//     temporary file) and one `write` row with slab -1 for the commit (flush, fsync, rename):
//     time spent waiting for slabs is in no row. WriteMS is their sum; WallMS runs from the
//     start of the read to the end of the commit.

// segment runs the engine on the volume into a pooled mask buffer, handing the volume to the
// write stage (toWrite) as it starts; then frees the input and lets go of the volume.
func (r *runner) segment(ctx context.Context, worker int, eng segment.Engine, w *work, toWrite chan<- *work) {
	buf, err := r.masks.Get(ctx)
	if err != nil {
		r.fail(w, context.Cause(ctx))
		return
	}
	w.mask = buf
	voxels := w.vol.NX * w.vol.NY * w.vol.NZ
	err = r.grow(w, w.mask, voxels)
	r.releaseReservation(w) // every buffer the volume needs is now sized
	if err != nil {
		r.fail(w, err)
		return
	}
	segCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w.seg = newSegProgress(w.vol.NZ)
	w.cancelSeg = cancel
	w.holders.Store(2)
	select {
	case toWrite <- w:
	case <-ctx.Done():
		r.fail(w, context.Cause(ctx)) // no writer has it: the volume is still ours alone
		return
	}

	device := eng.Name()
	start := time.Now()
	w.mu.Lock()
	w.sum.Engine = device
	w.segStart = start
	w.mu.Unlock()
	sawSegment := false
	plane := int64(w.vol.NX) * int64(w.vol.NY)
	err = eng.Segment(segCtx, &w.vol, w.mask.bytes[:voxels], segment.Options{
		Slab:       r.cfg.Slab,
		OnSlabDone: w.seg.slabDone,
		OnEvent: func(ev segment.Event) {
			s := start.Add(ev.Start)
			switch ev.Stage {
			case StageSegment:
				sawSegment = true
				r.progress().PlanesDone(w.job, int(ev.Voxels/plane))
			case "d2h": // a GPU slab is done when its mask is back
				r.progress().PlanesDone(w.job, int(ev.Voxels/plane))
			}
			r.record(w, timing.Span{Process: device, Track: ev.Stage, Row: timing.Row{
				Stage: ev.Stage, Slab: ev.Slab, Device: device,
				StartMS: ms(s.Sub(r.t0)), DurationMS: ms(ev.Duration), Bytes: ev.Bytes, Voxels: ev.Voxels,
			}})
		},
	})
	end := time.Now()
	// The engine's own events cover its work; a single whole-volume row stands in for engines
	// that report only finer stages (h2d, kernels, d2h), so "segment" is always there once.
	w.mu.Lock()
	w.sum.SegmentMS = ms(end.Sub(start))
	w.mu.Unlock()
	if !sawSegment {
		r.span(w, StageSegment, -1, device, fmt.Sprintf("engine %d", worker), start, end, 0, int64(voxels))
	}
	r.putBack(r.inputs, w.in)
	w.in = nil
	if err != nil && segCtx.Err() != nil {
		err = context.Cause(segCtx) // the run's cause, or the writer's failure
	}
	if err = w.seg.finish(err); err != nil {
		w.setErr(fmt.Errorf("segment %s: %w", w.job.Input, err))
	}
	r.release(w)
}

// segProgress is how far the engine has got with a volume, shared by its engine worker and
// its writer.
type segProgress struct {
	nz   int
	wake chan struct{} // capacity 1: something changed since the writer last looked

	mu       sync.Mutex
	ready    int   // planes [0, ready) hold final labels
	finished bool  // the engine call has returned
	err      error // its error, or a broken OnSlabDone contract
}

func newSegProgress(nz int) *segProgress {
	return &segProgress{nz: nz, wake: make(chan struct{}, 1)}
}

// slabDone is the engine's OnSlabDone: it never blocks.
func (p *segProgress) slabDone(z0, z1 int) {
	p.mu.Lock()
	switch {
	case p.err != nil:
	case z0 != p.ready || z1 <= z0 || z1 > p.nz:
		// Writing planes the engine may still change would be wrong: fail the volume instead.
		p.err = fmt.Errorf("pipeline: engine reported slab z %d..%d done after z %d of %d", z0, z1, p.ready, p.nz)
	default:
		p.ready = z1
	}
	p.mu.Unlock()
	p.poke()
}

// finish records the engine's verdict and returns the volume's: err, or a broken OnSlabDone
// contract. A successful engine has filled the whole mask, also when it reported no slabs.
func (p *segProgress) finish(err error) error {
	p.mu.Lock()
	p.finished = true
	if p.err == nil {
		p.err = err
	}
	if p.err == nil {
		p.ready = p.nz
	}
	err = p.err
	p.mu.Unlock()
	p.poke()
	return err
}

func (p *segProgress) poke() {
	select {
	case p.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

func (p *segProgress) state() (ready int, finished bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready, p.finished, p.err
}

// errSegmentFailed ends a writer whose volume's engine failed; the volume's error is the
// engine's, recorded by its worker.
var errSegmentFailed = errors.New("pipeline: segmentation failed")

// write streams the mask into a temporary file as its planes become final, commits it, and
// lets go of the volume.
func (r *runner) write(ctx context.Context, writer int, w *work) {
	err := r.writeMask(ctx, writer, w)
	if err != nil && !errors.Is(err, errSegmentFailed) {
		w.setErr(err)
		w.cancelSeg(err) // no use segmenting what will not be written
	}
	r.release(w)
}

func (r *runner) writeMask(ctx context.Context, writer int, w *work) error {
	track := fmt.Sprintf("writer %d", writer)
	plane, nz := w.vol.NX*w.vol.NY, w.vol.NZ
	mask := w.mask.bytes[:plane*nz]
	var out *nifti.Writer
	committed := false
	defer func() {
		if out != nil && !committed {
			out.Abort() // removes the temporary file
		}
	}()
	for written := 0; ; {
		ready, finished, err := w.seg.state()
		if err != nil {
			return errSegmentFailed
		}
		if ready == written {
			if finished {
				break
			}
			select {
			case <-w.seg.wake:
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
		z1 := min(ready, written+r.cfg.Slab)
		start := time.Now()
		if out == nil {
			if out, err = r.createMask(ctx, w); err != nil {
				return err
			}
		}
		err = out.WriteSlices(mask[written*plane : z1*plane])
		n := int64((z1 - written) * plane)
		r.span(w, StageWrite, written/r.cfg.Slab, "host", track, start, time.Now(), n, n)
		if err != nil {
			return err
		}
		written = z1
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
	r.span(w, StageWrite, -1, "host", track, start, end, 0, 0)
	if err != nil {
		return err
	}
	committed = true
	w.committed = end
	return nil
}

// createMask starts the mask's temporary file, its header recording the provenance: it waits
// for the input's hash, then checks that the input has not changed since the volume was taken.
func (r *runner) createMask(ctx context.Context, w *work) (*nifti.Writer, error) {
	var h hashResult
	select {
	case h = <-w.hash:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if h.err != nil {
		return nil, fmt.Errorf("read %s: %w", w.job.Input, h.err)
	}
	if now, _, err := provenance.Stat(w.job.Input); err != nil || !now.SameFiles(w.input) {
		return nil, fmt.Errorf("read %s: %w", w.job.Input, ErrInputChanged)
	}
	rec := r.cfg.Provenance
	rec.Input = w.input
	rec.Input.XXH3 = h.sum
	if err := os.MkdirAll(filepath.Dir(w.job.Output), 0o755); err != nil {
		return nil, fmt.Errorf("write %s: %w", w.job.Output, err)
	}
	hdr := nifti.MaskHeader(w.hdr, uint8(r.cfg.Classes-1), r.cfg.Descrip)
	hdr.Extensions = []nifti.Extension{rec.Extension()}
	return nifti.Create(w.job.Output, hdr, r.cfg.Write)
}

// claimLost is closed when the volume's claim was taken over (never, without claims).
func (w *work) claimLost() <-chan struct{} {
	if w.claim == nil {
		return nil
	}
	return w.claim.Lost()
}

// queueMS is the time the volume waited within its wall time (under w.mu): from its start
// (arrival, or the reader taking it) to its read (an input buffer, the memory budget), and
// from its read's end to its engine call (a free engine, a mask buffer). Stages not reached
// count for nothing.
func (w *work) queueMS() float64 {
	var q time.Duration
	if !w.readStart.IsZero() {
		q += w.readStart.Sub(w.start)
	}
	if !w.segStart.IsZero() && !w.readEnd.IsZero() {
		q += w.segStart.Sub(w.readEnd)
	}
	return ms(q)
}

// setErr records the volume's first failure; later ones are consequences of it.
func (w *work) setErr(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

// release lets go of a volume held by its engine worker and its writer; the last one to let go
// concludes it: failed with its first error, or ok once committed.
func (r *runner) release(w *work) {
	if w.holders.Add(-1) > 0 {
		return
	}
	w.mu.Lock()
	err := w.err
	w.mu.Unlock()
	if err != nil {
		r.fail(w, err)
		return
	}
	r.putBack(r.masks, w.mask)
	w.mask = nil
	w.mu.Lock()
	w.sum.Status = timing.StatusOK
	w.sum.WallMS = ms(w.committed.Sub(w.start))
	w.sum.QueueMS = w.queueMS()
	if w.sum.WallMS > 0 {
		w.sum.MVoxPerS = float64(w.sum.Voxels) / 1e3 / w.sum.WallMS
	}
	w.mu.Unlock()
	r.finish(w)
}

// conclude records a volume that is not processed (skipped, busy, conflict) and why.
func (r *runner) conclude(w *work, status timing.Status, why string) {
	r.log.Info(string(status), "volume", w.job.Name, "mask", w.job.Output, "reason", why)
	w.sum.Status, w.sum.Reason = status, why
	if status != timing.StatusSkipped {
		w.sum.Output = ""
	}
	r.finish(w)
}

// fail records a failed volume and gives back whatever buffers it holds.
func (r *runner) fail(w *work, err error) {
	if w.in != nil {
		r.putBack(r.inputs, w.in)
		w.in = nil
	}
	if w.mask != nil {
		r.putBack(r.masks, w.mask)
		w.mask = nil
	}
	r.releaseReservation(w)
	if err == nil {
		err = errors.New("unknown error")
	}
	if errors.Is(err, context.Canceled) {
		err = fmt.Errorf("interrupted: %w", err)
	}
	w.mu.Lock()
	w.sum.Status = timing.StatusFailed
	w.sum.Error = err.Error()
	w.sum.Output = ""
	if !w.start.IsZero() {
		w.sum.WallMS = ms(time.Since(w.start))
		w.sum.QueueMS = w.queueMS()
	}
	w.mu.Unlock()
	r.log.Error("volume failed", "volume", w.job.Name, "input", w.job.Input, "err", err)
	if r.cfg.FailFast && !errors.Is(err, ErrStoppedEarly) {
		r.stop(ErrStoppedEarly)
	}
	r.finish(w)
}

// finish records the volume's summary row, then releases its claim: a process killed between
// the two leaves a claim that the next run takes over, never a mask without its row while the
// claim is free.
func (r *runner) finish(w *work) {
	w.mu.Lock()
	w.sum.FinishedAt = records.Stamp(time.Now())
	w.sum.Host = r.cfg.Host
	sum := w.sum
	w.mu.Unlock()
	if sum.Status == timing.StatusOK {
		r.log.Info("volume done", "volume", sum.Volume, "dims", sum.Dims, "engine", sum.Engine,
			"wall_ms", round3(sum.WallMS), "mvox_per_s", round3(sum.MVoxPerS), "mask", sum.Output)
	}
	r.progress().VolumeDone(w.job, sum.Status)
	r.summarise(sum)
	if w.claim != nil {
		if err := w.claim.Release(); err != nil {
			r.log.Warn("release claim", "volume", w.job.Name, "err", err)
		}
	}
}

func (r *runner) summarise(sum timing.Summary) {
	r.mu.Lock()
	switch sum.Status {
	case timing.StatusOK:
		r.result.OK++
	case timing.StatusSkipped:
		r.result.Skipped++
	case timing.StatusBusy:
		r.result.Busy++
	case timing.StatusConflict:
		r.result.Conflict++
	default:
		r.result.Failed++
	}
	r.mu.Unlock()
	if r.cfg.Summary != nil {
		r.noteOutErr(r.cfg.Summary.Append(sum))
	}
	if r.cfg.Observer != nil {
		r.cfg.Observer.Summary(sum)
	}
}

// span records a host stage event and adds it to the volume's stage totals.
func (r *runner) span(w *work, stage string, slab int, process, track string, start, end time.Time, bytes, voxels int64) {
	r.record(w, timing.Span{Process: process, Track: track, Row: timing.Row{
		Stage: stage, Slab: slab, Device: process,
		StartMS: ms(start.Sub(r.t0)), DurationMS: ms(end.Sub(start)), Bytes: bytes, Voxels: voxels,
	}})
}

func (r *runner) record(w *work, s timing.Span) {
	w.mu.Lock()
	switch s.Stage {
	case StageRead:
		w.sum.ReadMS += s.DurationMS
	case StageStats:
		w.sum.StatsMS += s.DurationMS
	case StageWrite:
		w.sum.WriteMS += s.DurationMS
	case "h2d":
		w.sum.H2DMS += s.DurationMS
	case "d2h":
		w.sum.D2HMS += s.DurationMS
	case StageSegment:
		// the summary's segment time is the engine call's wall time, set by segment()
	default: // kernels, or finer kernel groups
		// Time with a kernel running: the CUDA fp16 engine's kernels of consecutive slabs
		// overlap (two streams); engines report them in order.
		w.sum.KernelsMS += timing.BusyAdded(&w.kernelsEnd, s.StartMS, s.DurationMS)
	}
	w.mu.Unlock()
	r.emit(w, s)
}

func (r *runner) emit(w *work, s timing.Span) {
	s.RunID, s.Volume = r.cfg.RunID, w.job.Name
	if r.cfg.Timings != nil {
		r.noteOutErr(r.cfg.Timings.Append(s.Row))
	}
	if r.cfg.Trace != nil {
		r.cfg.Trace.Add(s)
	}
	if r.cfg.Observer != nil {
		r.cfg.Observer.Row(s.Row)
	}
}

// noteOutErr keeps the first failure to write the CSVs; the run then stops, since a batch
// whose results cannot be recorded should not go on silently.
func (r *runner) noteOutErr(err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	first := r.outErr == nil
	if first {
		r.outErr = err
	}
	r.mu.Unlock()
	if first {
		r.stop(err)
	}
}

func (r *runner) progress() Progress { return r.cfg.Progress }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }
