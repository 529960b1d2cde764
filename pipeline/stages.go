package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"voxpipe/io/nifti"
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

// read decodes the volume slab by slab into a pooled buffer (int16 when the stored values fit,
// float32 otherwise) and accumulates the normalisation statistics on the way.
func (r *runner) read(ctx context.Context, reader int, w *work) bool {
	w.start = time.Now()
	buf, err := r.inputs.Get(ctx)
	if err != nil {
		r.fail(w, context.Cause(ctx))
		return false
	}
	w.in = buf
	if err := r.decode(ctx, reader, w); err != nil {
		r.fail(w, err)
		return false
	}
	return true
}

func (r *runner) decode(ctx context.Context, reader int, w *work) error {
	track := fmt.Sprintf("reader %d", reader)
	t := time.Now()
	rd, err := nifti.Open(w.job.Input)
	if err != nil {
		return err
	}
	defer rd.Close()
	w.hdr = rd.Header()
	nx, ny, nz := w.hdr.NX(), w.hdr.NY(), w.hdr.NZ()
	plane := nx * ny
	voxels := plane * nz
	w.sum.Dims = fmt.Sprintf("%dx%dx%d", nx, ny, nz)
	w.sum.Voxels = int64(voxels)
	w.vol = segment.Volume{NX: nx, NY: ny, NZ: nz}
	r.progress().VolumeStarted(w.job, slabCount(nz, r.cfg.Slab))

	asInt16 := nifti.Int16Exact(w.hdr.Datatype)
	sampleSize := 4
	if asInt16 {
		sampleSize = 2
	}
	if err := w.in.ensure(voxels * sampleSize); err != nil {
		return err
	}
	if asInt16 {
		w.vol.I16 = w.in.int16s(voxels)
	} else {
		w.vol.F32 = w.in.float32s(voxels)
	}
	var stats segment.Stats
	for z, slab := 0, 0; z < nz; slab++ {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
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
			return err
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
	slope, inter := rd.Scaling()
	mu, sigma := stats.MeanStd(slope, inter)
	if math.IsNaN(mu) || math.IsInf(mu, 0) || math.IsNaN(sigma) || math.IsInf(sigma, 0) {
		// A NaN or infinite voxel poisons the statistics and with them every voxel's input.
		return fmt.Errorf("read %s: %w", w.job.Input, ErrNonFinite)
	}
	w.vol.Norm = segment.NormFor(mu, sigma, slope, inter)
	return nil
}

func slabCount(nz, slab int) int { return (nz + slab - 1) / slab }

// segment runs the engine on the volume into a pooled mask buffer, then frees the input.
func (r *runner) segment(ctx context.Context, worker int, eng segment.Engine, w *work) bool {
	buf, err := r.masks.Get(ctx)
	if err != nil {
		r.fail(w, context.Cause(ctx))
		return false
	}
	w.mask = buf
	voxels := w.vol.NX * w.vol.NY * w.vol.NZ
	if err := w.mask.ensure(voxels); err != nil {
		r.fail(w, err)
		return false
	}
	device := eng.Name()
	w.mu.Lock()
	w.sum.Engine = device
	w.mu.Unlock()
	start := time.Now()
	sawSegment := false
	err = eng.Segment(ctx, &w.vol, w.mask.bytes[:voxels], segment.Options{
		Slab: r.cfg.Slab,
		OnEvent: func(ev segment.Event) {
			s := start.Add(ev.Start)
			switch ev.Stage {
			case StageSegment:
				sawSegment = true
				r.progress().SlabDone(w.job)
			case "d2h": // a GPU slab is done when its mask is back
				r.progress().SlabDone(w.job)
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
	r.inputs.Put(w.in)
	w.in = nil
	if err != nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		r.fail(w, fmt.Errorf("segment %s: %w", w.job.Input, err))
		return false
	}
	return true
}

// write streams the mask into a temporary file next to its final name and renames it.
func (r *runner) write(ctx context.Context, writer int, w *work) bool {
	start := time.Now()
	err := r.writeMask(ctx, w)
	end := time.Now()
	voxels := w.sum.Voxels
	r.span(w, StageWrite, -1, "host", fmt.Sprintf("writer %d", writer), start, end, voxels, voxels)
	if err != nil {
		r.fail(w, err)
		return false
	}
	r.masks.Put(w.mask)
	w.mask = nil
	w.sum.Status = timing.StatusOK
	w.sum.WallMS = ms(end.Sub(w.start))
	if w.sum.WallMS > 0 {
		w.sum.MVoxPerS = float64(voxels) / 1e3 / w.sum.WallMS
	}
	r.finish(w)
	return true
}

func (r *runner) writeMask(ctx context.Context, w *work) error {
	if err := os.MkdirAll(filepath.Dir(w.job.Output), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", w.job.Output, err)
	}
	hdr := nifti.MaskHeader(w.hdr, uint8(r.cfg.Classes-1), r.cfg.Descrip)
	out, err := nifti.Create(w.job.Output, hdr, r.cfg.Write)
	if err != nil {
		return err
	}
	plane := w.vol.NX * w.vol.NY
	mask := w.mask.bytes[:plane*w.vol.NZ]
	for z := 0; z < w.vol.NZ; z += r.cfg.Slab {
		if err := ctx.Err(); err != nil {
			out.Abort()
			return context.Cause(ctx)
		}
		if err := out.WriteSlices(mask[z*plane : min(z+r.cfg.Slab, w.vol.NZ)*plane]); err != nil {
			out.Abort()
			return err
		}
	}
	if err := out.Commit(); err != nil {
		out.Abort()
		return err
	}
	return nil
}

// skip records a volume whose mask already exists.
func (r *runner) skip(job Job) {
	r.log.Info("skip: mask exists (use --overwrite to redo)", "volume", job.Name, "mask", job.Output)
	r.progress().VolumeDone(job, timing.StatusSkipped)
	r.summarise(timing.Summary{RunID: r.cfg.RunID, Volume: job.Name, Status: timing.StatusSkipped,
		Error: "mask exists", Output: job.Output})
}

// fail records a failed volume and gives back whatever buffers it holds.
func (r *runner) fail(w *work, err error) {
	if w.in != nil {
		r.inputs.Put(w.in)
		w.in = nil
	}
	if w.mask != nil {
		r.masks.Put(w.mask)
		w.mask = nil
	}
	if err == nil {
		err = errors.New("unknown error")
	}
	if errors.Is(err, context.Canceled) {
		err = fmt.Errorf("interrupted: %w", err)
	}
	w.sum.Status = timing.StatusFailed
	w.sum.Error = err.Error()
	w.sum.Output = ""
	if !w.start.IsZero() {
		w.sum.WallMS = ms(time.Since(w.start))
	}
	r.log.Error("volume failed", "volume", w.job.Name, "input", w.job.Input, "err", err)
	if r.cfg.FailFast && !errors.Is(err, ErrStoppedEarly) {
		r.stop(ErrStoppedEarly)
	}
	r.finish(w)
}

func (r *runner) finish(w *work) {
	w.mu.Lock()
	sum := w.sum
	w.mu.Unlock()
	if sum.Status == timing.StatusOK {
		r.log.Info("volume done", "volume", sum.Volume, "dims", sum.Dims, "engine", sum.Engine,
			"wall_ms", round3(sum.WallMS), "mvox_per_s", round3(sum.MVoxPerS), "mask", sum.Output)
	}
	r.progress().VolumeDone(w.job, sum.Status)
	r.summarise(sum)
}

func (r *runner) summarise(sum timing.Summary) {
	r.mu.Lock()
	switch sum.Status {
	case timing.StatusOK:
		r.result.OK++
	case timing.StatusSkipped:
		r.result.Skipped++
	default:
		r.result.Failed++
	}
	r.mu.Unlock()
	if r.cfg.Summary != nil {
		r.noteOutErr(r.cfg.Summary.Append(sum))
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
		w.sum.KernelsMS += s.DurationMS
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
