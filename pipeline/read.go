package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"voxpipe/io/nifti"
	"voxpipe/model"
	"voxpipe/stage"
	"voxpipe/store/provenance"
)

// readers is the read stage: Config.Readers workers, each taking volumes from the producer,
// decoding one at a time into an input buffer (with its statistics) and handing it to the
// engines.
type readers struct {
	*services
	in queue
}

// startReaders starts the readers on g; they close next's queue once all have returned.
func startReaders(ctx context.Context, g *errgroup.Group, r *services, next *engines) *readers {
	s := &readers{services: r, in: make(queue)}
	startWorkers(g, r.cfg.Workers.Readers, next.close, func(i int) error { return s.work(ctx, i, next) })
	return s
}

// put hands a volume to the readers.
func (s *readers) put(ctx context.Context, w *work) error { return s.in.put(ctx, s.end, w) }

// close tells the readers that no more volumes are coming.
func (s *readers) close() { close(s.in) }

// work is reader i's loop: it reads each volume it takes and hands the ones read to next.
func (s *readers) work(ctx context.Context, i int, next *engines) error {
	for w := range s.in {
		if !s.read(ctx, i, w) {
			continue // failed and released
		}
		if err := next.put(ctx, w); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// ErrNonFinite fails volumes with NaN or infinite values, which the network cannot normalise.
var ErrNonFinite = errors.New("pipeline: volume has NaN or infinite values")

// read decodes the volume into a pooled buffer (int16 when the stored values fit, float32
// otherwise) and accumulates the normalisation statistics on the way: by z-ranges in parallel
// for uncompressed files and for gzipped ones that nifti.Open inflated whole on several cores
// (readAt), slab by slab in order for the other gzipped ones (readSequential).
func (r *readers) read(ctx context.Context, reader int, w *work) bool {
	w.rec.start = time.Now()
	if !w.job.Arrived.IsZero() {
		w.rec.start = w.job.Arrived // a watched file's sojourn starts when it is complete
	}
	buf, err := r.mem.inputs.Get(ctx)
	if err != nil {
		r.end.fail(w, context.Cause(ctx))
		return false
	}
	w.mem.in = buf
	if err := r.mem.admit(ctx, w); err != nil {
		r.end.fail(w, err)
		return false
	}
	w.rec.readStart = time.Now()
	err = r.decode(ctx, reader, w)
	w.rec.readEnd = time.Now()
	r.mem.releaseScratch(w) // decode has closed the reader and with it any inflate memory
	if err == nil {
		// After the read, which may use every core (the parallel inflate), while the volume is
		// prepared and the engine works; the mask's header waits for it.
		r.startHash(ctx, w)
		err = r.prepare(w, fmt.Sprintf("reader %d", reader))
	}
	if err != nil {
		r.end.fail(w, err)
		return false
	}
	return true
}

// ErrInputChanged fails a volume whose input changed while voxpipe read it: the mask would
// match neither version.
var ErrInputChanged = errors.New("pipeline: input changed while it was read")

func (r *readers) decode(ctx context.Context, reader int, w *work) error {
	if w.job.Series != nil {
		return r.decodeDICOM(ctx, reader, w)
	}
	track := fmt.Sprintf("reader %d", reader)
	t := time.Now()
	threads := r.cfg.readThreads()
	opts := []nifti.OpenOption{nifti.WithInflateThreads(threads), nifti.WithContext(ctx)}
	if r.cfg.Input.Volume != nil {
		opts = append(opts, nifti.WithVolume(*r.cfg.Input.Volume))
	}
	rd, err := nifti.Open(w.job.Input, append(opts, nifti.WithInflateInto(r.inflateInto(w)))...)
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return err
	}
	defer rd.Close()
	if h, was := rd.Header(), w.src.hdr; was != nil &&
		(h.NX() != was.NX() || h.NY() != was.NY() || h.NZ() != was.NZ() || h.Datatype != was.Datatype) {
		// What was admitted (and budgeted) is not what is read.
		return fmt.Errorf("read %s: %w (its header now declares other dims or datatype)", w.job.Input, ErrInputChanged)
	}
	w.src.hdr = rd.Header()
	nx, ny, nz := w.src.hdr.NX(), w.src.hdr.NY(), w.src.hdr.NZ()
	plane := nx * ny
	voxels := plane * nz
	w.rec.sum.Dims = fmt.Sprintf("%dx%dx%d", nx, ny, nz)
	w.rec.sum.Voxels = int64(voxels)
	w.vol = model.Volume{NX: nx, NY: ny, NZ: nz}
	r.rec.progress().VolumeStarted(w.job, nz)

	asInt16 := nifti.Int16Exact(w.src.hdr.Datatype)
	sampleSize := 4
	if asInt16 {
		sampleSize = 2
	}
	if err := r.mem.grow(w, w.mem.in, voxels*sampleSize); err != nil {
		return err
	}
	if asInt16 {
		w.vol.I16 = w.mem.in.Int16s(voxels)
	} else {
		w.vol.F32 = w.mem.in.Float32s(voxels)
	}
	var stats model.Stats
	w.mem.inflatedInto = rd.InflatedInto()
	if rd.Seekable() {
		if stats, err = r.readAt(ctx, rd, w, threads, w.mem.inflatedInto, track, t); err != nil {
			return err
		}
	} else if stats, err = r.readSequential(ctx, rd, w, track, t); err != nil {
		return err
	}
	r.noteScaling(w)
	slope, inter := rd.Scaling()
	return setNorm(w, stats, slope, inter)
}

// noteScaling warns, naming the file, about a header scaling that does not mean what it says
// (scl_slope 0, NaN or infinite; scl_inter not finite).
func (r *readers) noteScaling(w *work) {
	if msg := w.src.hdr.ScalingWarning(); msg != "" {
		w.prep.dom.Warnings = append(w.prep.dom.Warnings, w.job.Input+": "+msg)
		r.log.Warn("input scaling", "volume", w.job.Name, "file", w.job.Input, "warning", msg)
	}
}

// setNorm sets the volume's normalisation from its statistics (and scaling).
func setNorm(w *work, stats model.Stats, slope, inter float64) error {
	mu, sigma := stats.MeanStd(slope, inter)
	if math.IsNaN(mu) || math.IsInf(mu, 0) || math.IsNaN(sigma) || math.IsInf(sigma, 0) {
		// A NaN or infinite voxel poisons the statistics and with them every voxel's input.
		return fmt.Errorf("read %s: %w", w.job.Input, ErrNonFinite)
	}
	w.vol.Norm = model.NormFor(mu, sigma, slope, inter)
	w.prep.flat = stats.Flat(slope, inter)
	return nil
}

// inflateInto is the read's nifti.WithInflateInto callback: a gzipped volume whose stored
// voxels are what the engine reads (engineReads, in host byte order) is inflated straight into
// the input buffer, grown here to hold the data: no copy, no second volume in memory. It
// returns nil (inflate elsewhere) for other volumes, and when the buffer cannot grow; decode
// then sizes the buffer itself and reports that error.
func (r *readers) inflateInto(w *work) func(prefix int, dataBytes int64, dt nifti.DataType, swapped bool) []byte {
	return func(prefix int, dataBytes int64, dt nifti.DataType, swapped bool) []byte {
		if swapped || !engineReads(dt) || int64(int(dataBytes)) != dataBytes {
			return nil
		}
		if err := r.mem.grow(w, w.mem.in, int(dataBytes)); err != nil {
			return nil
		}
		return w.mem.in.WithPrefix(prefix)
	}
}

// engineReads reports whether voxels stored as dt are what the engines read, as they are:
// int16 for the datatypes whose values int16 holds exactly, float32 for the others.
func engineReads(dt nifti.DataType) bool {
	if nifti.Int16Exact(dt) {
		return dt == nifti.Int16
	}
	return dt == nifti.Float32
}

// readSequential reads a volume in order, slab by slab, adding each slab to the statistics
// once read (for gzip, the inflating read-ahead works on the next slab meanwhile). Timing rows
// read and stats per slab; the first read row starts at t, when the file was opened.
func (r *readers) readSequential(ctx context.Context, rd *nifti.Reader, w *work, track string, t time.Time) (model.Stats, error) {
	nz, plane := w.vol.NZ, w.vol.NX*w.vol.NY
	asInt16 := w.vol.I16 != nil
	sampleSize := 4
	if asInt16 {
		sampleSize = 2
	}
	var stats model.Stats
	var err error
	for z, slab := 0, 0; z < nz; slab++ {
		if err := ctx.Err(); err != nil {
			return stats, context.Cause(ctx)
		}
		want := min(r.cfg.Workers.Slab, nz-z)
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
		r.rec.span(w, span{stage: stage.Read, slab: slab, device: stage.Host, track: track, start: t, end: time.Now(),
			bytes: int64(n * plane * sampleSize), voxels: int64(n * plane)})
		t = time.Now()
		if asInt16 {
			stats.AddInt16(w.vol.I16[z*plane : (z+n)*plane])
		} else {
			stats.AddFloat32(w.vol.F32[z*plane : (z+n)*plane])
		}
		r.rec.span(w, span{stage: stage.Stats, slab: slab, device: stage.Host, track: track, start: t, end: time.Now(),
			voxels: int64(n * plane)})
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
// AddFloat32 sums one slab (model.StatsFrom, AddFloat32Piece); the tasks' statistics are
// merged in z order (Stats.Merge), so the result equals the sequential statistics bit for bit.
// Taking tasks as they come rather than one z-range per goroutine keeps the goroutines busy to
// the end (docs/perf.md). Timing rows: one `read` row from t (the file's opening) until
// every task is done, so that the statistics, fused into the read, are in it; one `stats` row
// for the merge.
func (r *readers) readAt(ctx context.Context, rd *nifti.Reader, w *work, threads int, inPlace bool, track string, t time.Time) (model.Stats, error) {
	nz, plane := w.vol.NZ, w.vol.NX*w.vol.NY
	asInt16 := w.vol.I16 != nil
	sampleSize := 2
	var origin float32
	if !asInt16 {
		sampleSize = 4
		// The first value is the origin of the float32 sums: read it (with its plane) first.
		if !inPlace {
			if _, err := rd.ReadSlicesFloat32At(w.vol.F32[:plane], 0, 1); err != nil {
				return model.Stats{}, err
			}
		}
		origin = w.vol.F32[0]
	}
	// A task is one piece of about readPiece bytes (int16), or a slab read in such pieces in
	// order (float32).
	piece := max(1, readPiece/(plane*sampleSize))
	task := piece
	if !asInt16 {
		task = r.cfg.Workers.Slab
	}
	tasks := (nz + task - 1) / task
	parts := make([]model.Stats, tasks)
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for range max(1, min(threads, tasks)) {
		g.Go(func() error {
			for {
				k := int(next.Add(1) - 1)
				if k >= tasks {
					return nil
				}
				if !asInt16 {
					parts[k] = model.StatsFrom(origin)
				}
				if err := readTask(gctx, rd, w, &parts[k], k*task, min((k+1)*task, nz), piece, inPlace); err != nil {
					return err
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		return model.Stats{}, err
	}
	read := time.Now()
	r.rec.span(w, span{stage: stage.Read, slab: -1, device: stage.Host, track: track, start: t, end: read,
		bytes: int64(nz * plane * sampleSize), voxels: int64(nz * plane)})
	var stats model.Stats
	for _, p := range parts {
		stats.Merge(p)
	}
	r.rec.span(w, span{stage: stage.Stats, slab: -1, device: stage.Host, track: track, start: read, end: time.Now(),
		voxels: int64(nz * plane)})
	return stats, nil
}

// readTask is one task of readAt: it reads slices [z0, z1) in pieces of up to piece slices
// into the volume (unless inPlace: they are there already) and adds them to part.
func readTask(ctx context.Context, rd *nifti.Reader, w *work, part *model.Stats, z0, z1, piece int, inPlace bool) error {
	plane := w.vol.NX * w.vol.NY
	for z := z0; z < z1; {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		want := min(piece, z1-z)
		n := want
		var err error
		if w.vol.I16 != nil {
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
			err = fmt.Errorf("read %s: volume ends at slice %d of %d", w.job.Input, z+n, w.vol.NZ)
		}
		if err != nil {
			return err
		}
		z += n
	}
	return nil
}

// hashResult is the input's hash, or why it could not be made.
type hashResult struct {
	sum string
	err error
}

// startHash hashes the input's files in the background (on all cores, a few ms for a large
// volume); the writer waits for it before writing the mask's header, which records it.
func (r *readers) startHash(ctx context.Context, w *work) {
	w.src.hash = make(chan hashResult, 1)
	go func() {
		sum, err := provenance.Hash(ctx, w.src.files)
		w.src.hash <- hashResult{sum, err}
	}()
}
