package pipeline

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"voxpipe/io/nifti"
	"voxpipe/model"
	"voxpipe/stage"
)

// decodeDICOM is the read stage for a series: its files are read in parallel (dicom.ReadRaw)
// straight into the input buffer, which admission sized for the engine's samples (int16 for
// int16-exact types, float32 for the others) and so holds the stored samples too; those
// that are not what the engine reads are then widened in place (uint16 series whose values
// all fit int16 are int16 already, as dcm2niix stores them). Nothing else is allocated for
// the voxels: the read takes what the budget reserved (budget.go), no more. Then the
// statistics as the NIfTI path makes them (int16: exact; float32: slab by slab), so that a
// series and dcm2niix's NIfTI of it are normalised alike. A series is one volume: --volume N
// other than 0 fails it, as it fails a 3D NIfTI file. Timing rows: one read (slab -1) and one
// stats.
func (r *readers) decodeDICOM(ctx context.Context, reader int, w *work) error {
	track := fmt.Sprintf("reader %d", reader)
	t := time.Now()
	s := w.job.Series
	if s.Err != nil {
		return s.Err
	}
	if v := r.cfg.Input.Volume; v != nil && *v != 0 {
		return fmt.Errorf("read %s: %w: volume %d requested, DICOM series %s is one volume", w.job.Input, nifti.ErrMultiVolume, *v, s.ID())
	}
	nx, ny, nz := s.Columns, s.Rows, len(s.Slices)
	voxels := nx * ny * nz
	w.rec.sum.Dims = fmt.Sprintf("%dx%dx%d", nx, ny, nz)
	w.rec.sum.Voxels = int64(voxels)
	w.vol = model.Volume{NX: nx, NY: ny, NZ: nz}
	r.rec.progress().VolumeStarted(w.job, nz)
	stored := s.StoredType()
	sample := 4
	if nifti.Int16Exact(stored) {
		sample = 2
	}
	if err := r.mem.grow(w, w.mem.in, voxels*sample); err != nil {
		return err
	}
	dt, err := s.ReadRaw(w.mem.in.Bytes()[:voxels*stored.Size()], r.cfg.readThreads())
	if err != nil {
		return err
	}
	widenInPlace(w.mem.in.Bytes()[:voxels*sample], voxels, dt)
	if nifti.Int16Exact(dt) {
		w.vol.I16 = w.mem.in.Int16s(voxels)
	} else {
		w.vol.F32 = w.mem.in.Float32s(voxels)
	}
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	w.src.hdr = s.Header(dt)
	read := time.Now()
	sampleSize := 4
	if w.vol.I16 != nil {
		sampleSize = 2
	}
	r.rec.span(w, span{stage: stage.Read, slab: -1, device: stage.Host, track: track, start: t, end: read,
		bytes: int64(voxels * sampleSize), voxels: int64(voxels)})
	var stats model.Stats
	if w.vol.I16 != nil {
		stats.AddInt16(w.vol.I16)
	} else {
		for z := 0; z < nz; z += r.cfg.Workers.Slab { // as readSequential sums float32: slab by slab
			stats.AddFloat32(w.vol.F32[z*nx*ny : min(z+r.cfg.Workers.Slab, nz)*nx*ny])
		}
	}
	r.rec.span(w, span{stage: stage.Stats, slab: -1, device: stage.Host, track: track, start: read, end: time.Now(),
		voxels: int64(voxels)})
	slope, inter := w.src.hdr.EffectiveScaling()
	return setNorm(w, stats, slope, inter)
}

// widenInPlace converts the n host-order samples of type dt at the start of buf into what the
// engine reads, in the same buffer: int16 for int16-exact types, float32 for the others. The
// engine's samples are at least as wide as the stored ones, so the conversion runs from the
// last sample, whose result lies at or after every sample not yet converted.
func widenInPlace(buf []byte, n int, dt nifti.DataType) {
	if dt == nifti.Int16 || dt == nifti.Float32 || n == 0 {
		return
	}
	size := dt.Size()
	at := func(i int) float64 {
		b := buf[i*size:]
		switch dt {
		case nifti.Uint8:
			return float64(b[0])
		case nifti.Int8:
			return float64(int8(b[0]))
		case nifti.Uint16:
			return float64(*(*uint16)(unsafe.Pointer(&b[0])))
		case nifti.Int32:
			return float64(*(*int32)(unsafe.Pointer(&b[0])))
		}
		return float64(*(*uint32)(unsafe.Pointer(&b[0])))
	}
	if nifti.Int16Exact(dt) {
		out := unsafe.Slice((*int16)(unsafe.Pointer(&buf[0])), n)
		for i := n - 1; i >= 0; i-- {
			out[i] = int16(at(i))
		}
		return
	}
	out := unsafe.Slice((*float32)(unsafe.Pointer(&buf[0])), n)
	for i := n - 1; i >= 0; i-- {
		out[i] = float32(at(i))
	}
}
