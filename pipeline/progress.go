package pipeline

import (
	"voxpipe/jobs"
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
