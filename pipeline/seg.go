package pipeline

import (
	"fmt"
	"os"
	"time"

	"voxpipe/io/dicomseg"
	"voxpipe/jobs"
	"voxpipe/stage"
	"voxpipe/store/records"
)

// wantsSEG reports whether the job's mask gets a DICOM SEG: a DICOM series, with SEG output on.
func (s *services) wantsSEG(job jobs.Job) bool {
	return s.cfg.Output.SEG != nil && job.Series != nil
}

// segInTheWay reports a file at the job's SEG path that voxpipe did not write (a user's file,
// another tool's SEG): writing the SEG would replace it.
func (s *services) segInTheWay(job jobs.Job) bool {
	if !s.wantsSEG(job) {
		return false
	}
	path := records.SEGPath(job.Output)
	_, err := os.Lstat(path)
	return err == nil && !dicomseg.WrittenHere(path)
}

// writeSEG is the SEG step, in the writer once the mask is whole on the input's grid (the
// series' own), before the mask's commit: it writes the SEG atomically beside the mask and
// returns its path. A SEG that cannot be written fails the volume, and the mask is not
// committed: a rerun does both.
func (r *writers) writeSEG(w *work, mask []byte, track string) (string, error) {
	path := records.SEGPath(w.job.Output)
	start := time.Now()
	sum, err := dicomseg.WriteFile(path, w.job.Series, mask, *r.cfg.Output.SEG)
	if err != nil {
		return "", fmt.Errorf("write the DICOM SEG %s: %w", path, err)
	}
	r.rec.span(w, span{stage: stage.SEG, slab: -1, device: stage.Host, track: track,
		start: start, end: time.Now(), bytes: sum.Bytes, voxels: int64(len(mask))})
	w.rec.mu.Lock()
	// The SEG's SOP Instance UID, not its path: the records never hold a DICOM series' mask
	// name (--dicom-name may put patient data in it); the file lies beside the mask
	// (records.SEGPath), and the mask's provenance names it.
	w.rec.sum.SEG = sum.SOPInstanceUID
	w.rec.mu.Unlock()
	return path, nil
}
