package pipeline

import "voxpipe/pipeline/timing"

// Progress receives the run's progress: a bar on a terminal, log lines elsewhere. Methods are
// called from several goroutines.
type Progress interface {
	Start(volumes int)
	VolumeStarted(job Job, planes int) // the volume's z-planes to segment
	PlanesDone(job Job, planes int)    // that many more have their labels
	VolumeDone(job Job, status timing.Status)
	Close()
}

type nopProgress struct{}

func (nopProgress) Start(int)                     {}
func (nopProgress) VolumeStarted(Job, int)        {}
func (nopProgress) PlanesDone(Job, int)           {}
func (nopProgress) VolumeDone(Job, timing.Status) {}
func (nopProgress) Close()                        {}
