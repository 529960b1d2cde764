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

// writeSEG is the SEG step, in the writer once the mask is whole on the input's grid (the
// series' own), before the mask's commit: it writes the SEG atomically beside the mask and
// returns its path. A SEG that cannot be written fails the volume, and the mask is not
// committed: a rerun does both.
func (r *writers) writeSEG(w *work, mask []byte, track string) (string, error) {
	path := records.SEGPath(w.job.Output)
	start := time.Now()
	if _, err := dicomseg.WriteFile(path, w.job.Series, mask, *r.cfg.Output.SEG); err != nil {
		return "", fmt.Errorf("write the DICOM SEG %s: %w", path, err)
	}
	var size int64
	if st, err := os.Stat(path); err == nil {
		size = st.Size()
	}
	r.rec.span(w, span{stage: stage.SEG, slab: -1, device: stage.Host, track: track,
		start: start, end: time.Now(), bytes: size, voxels: int64(len(mask))})
	w.rec.mu.Lock()
	w.rec.sum.SEG = path // named as the volume column names the series (--dicom-name)
	w.rec.mu.Unlock()
	return path, nil
}
