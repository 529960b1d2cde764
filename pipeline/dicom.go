package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"voxpipe/internal/regular"
	"voxpipe/io/dicom"
	"voxpipe/io/nifti"
	"voxpipe/segment"
	"voxpipe/stage"
	"voxpipe/store/provenance"
)

// DICOM inputs (issue 21). A folder's files that are not NIfTI are read as DICOM, one job per
// series (io/dicom). The rest of the pipeline sees a series through the NIfTI header dcm2niix
// would give its volume (dicom.Series.Header): the same budget, geometry, mask header and
// provenance as a NIfTI input. What differs is here: discovery (dicomJobs), the fingerprint
// (statJob: the series' files and UIDs), the header (jobHeader) and the read (decodeDICOM).
// Jobs are named by series number and ID (a hash of the SeriesInstanceUID), and logs and
// records show the mask as the series ID (shownOutput): the mask's file name comes from
// --dicom-name, whose default (dicom.DefaultName) is that job name, no patient data.

// isDICOM reports whether the file at path, a regular file, parses as DICOM or is a DICOM
// file that fails to (anything but dicom.ErrNotDICOM). Other files are not opened.
func isDICOM(path string) bool {
	if _, err := regular.Check(path); err != nil {
		return false
	}
	_, err := dicom.ParseFile(path)
	return err == nil || !errors.Is(err, dicom.ErrNotDICOM)
}

// dicomJobs makes one job per series found in files; series that cannot be read (a member
// that cannot, see dicom.ScanFiles; their geometry) get Job.Err. Files that are not DICOM
// images are left out, listed in d.Skipped.
func dicomJobs(d *Discovery, files []string, outDir, maskName, dicomName string) ([]Job, error) {
	if len(files) == 0 {
		return nil, nil
	}
	if err := dicom.CheckName(dicomName); err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	scan := dicom.ScanFiles(files, 0)
	d.Skipped = append(d.Skipped, scan.Skipped...)
	var jobs []Job
	for i, name := range dicom.Names(scan.Series, dicomName) {
		s := scan.Series[i]
		job := Job{
			Name:   DICOMJobName(s),
			Input:  filepath.Dir(s.Files[0].Path),
			Output: filepath.Join(outDir, filepath.FromSlash(strings.ReplaceAll(maskName, "{name}", name))),
			Err:    s.Err,
			Series: s,
		}
		if s.Err == nil {
			job.Voxels = s.Voxels()
		} else {
			job.Err = fmt.Errorf("DICOM series %s (number %d) in %s: %w", s.ID(), s.Number, job.Input, s.Err)
		}
		jobs = append(jobs, job)
	}
	return jobs, nil
}

// DICOMJobName is a series' job name: its number and ID, no patient data.
func DICOMJobName(s *dicom.Series) string { return fmt.Sprintf("series_%d_%s", s.Number, s.ID()) }

// shownOutput is the mask as logs and records show it: its path, or for a DICOM series (whose
// mask name may hold patient data) the series ID.
func (j Job) shownOutput() string {
	if j.Series != nil {
		return "dicom series " + j.Series.ID()
	}
	return j.Output
}

// statJob fingerprints a job's input: its NIfTI file(s), or its series' files (in slice order)
// and UIDs.
func statJob(job Job) (provenance.Input, []string, error) {
	s := job.Series
	if s == nil {
		return provenance.Stat(job.Input)
	}
	paths := make([]string, len(s.Files))
	for i, f := range s.Files {
		paths[i] = f.Path
	}
	in, files, err := provenance.StatFiles(paths)
	in.DICOM = &provenance.DICOMSeries{StudyInstanceUID: s.StudyUID, SeriesInstanceUID: s.UID, Part: s.Part}
	return in, files, err
}

// jobHeader is the input's header: read from the NIfTI file, or the series' as dcm2niix would
// write it.
func jobHeader(job Job) (*nifti.Header, error) {
	if job.Series == nil {
		return nifti.ReadHeader(job.Input)
	}
	return job.Series.Header(job.Series.StoredType()), nil
}

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
	if v := r.cfg.Volume; v != nil && *v != 0 {
		return fmt.Errorf("read %s: %w: volume %d requested, DICOM series %s is one volume", w.job.Input, nifti.ErrMultiVolume, *v, s.ID())
	}
	nx, ny, nz := s.Columns, s.Rows, len(s.Slices)
	voxels := nx * ny * nz
	w.sum.Dims = fmt.Sprintf("%dx%dx%d", nx, ny, nz)
	w.sum.Voxels = int64(voxels)
	w.vol = segment.Volume{NX: nx, NY: ny, NZ: nz}
	r.progress().VolumeStarted(w.job, nz)
	stored := s.StoredType()
	sample := 4
	if nifti.Int16Exact(stored) {
		sample = 2
	}
	if err := r.grow(w, w.in, voxels*sample); err != nil {
		return err
	}
	dt, err := s.ReadRaw(w.in.bytes[:voxels*stored.Size()], r.cfg.readThreads())
	if err != nil {
		return err
	}
	widenInPlace(w.in.bytes[:voxels*sample], voxels, dt)
	if nifti.Int16Exact(dt) {
		w.vol.I16 = w.in.int16s(voxels)
	} else {
		w.vol.F32 = w.in.float32s(voxels)
	}
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	w.hdr = s.Header(dt)
	read := time.Now()
	sampleSize := 4
	if w.vol.I16 != nil {
		sampleSize = 2
	}
	r.span(w, span{stage: stage.Read, slab: -1, device: stage.Host, track: track, start: t, end: read,
		bytes: int64(voxels * sampleSize), voxels: int64(voxels)})
	var stats segment.Stats
	if w.vol.I16 != nil {
		stats.AddInt16(w.vol.I16)
	} else {
		for z := 0; z < nz; z += r.cfg.Slab { // as readSequential sums float32: slab by slab
			stats.AddFloat32(w.vol.F32[z*nx*ny : min(z+r.cfg.Slab, nz)*nx*ny])
		}
	}
	r.span(w, span{stage: stage.Stats, slab: -1, device: stage.Host, track: track, start: read, end: time.Now(),
		voxels: int64(voxels)})
	slope, inter := w.hdr.EffectiveScaling()
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
