package pipeline

import (
	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/model"
	"voxpipe/telemetry/timing"
)

// Progress receives the run's progress: a bar on a terminal, log lines elsewhere. Methods are
// called from several goroutines.
type Progress interface {
	Start(volumes int)
	VolumeStarted(job jobs.Job, planes int) // the volume's z-planes to segment
	PlanesDone(job jobs.Job, planes int)    // that many more have their labels
	VolumeDone(job jobs.Job, status timing.Status)
	Close()
}

type nopProgress struct{}

func (nopProgress) Start(int)                          {}
func (nopProgress) VolumeStarted(jobs.Job, int)        {}
func (nopProgress) PlanesDone(jobs.Job, int)           {}
func (nopProgress) VolumeDone(jobs.Job, timing.Status) {}
func (nopProgress) Close()                             {}

// Observer sees every timings.csv and summary.csv row as it is recorded (metrics). Methods are
// called from several goroutines.
type Observer interface {
	Row(timing.Row)
	Summary(timing.Summary)
}

// Analyser makes what a volume's reader looks at besides its mask (statistics, a preview) in
// the writer, before the mask is committed (package analysis implements it). Methods are
// called from several goroutines.
type Analyser interface {
	// NeedsInput reports whether Analyse reads the input's values: the engine worker then
	// leaves the input buffer to the writer.
	NeedsInput() bool
	// Analyse makes the outputs of the volume named name (header hdr, values vol, nil unless
	// NeedsInput; mask on the input's grid) and removes stale ones; an error fails the volume.
	Analyse(name string, hdr *nifti.Header, vol *model.Volume, mask []uint8) error
	// Missing says what an up-to-date mask of the volume named name lacks of what is asked
	// for ("statistics are"...), or is empty; such a volume is done again.
	Missing(name string) string
}
