// Package progress shows a run's progress: bars on a terminal (Bars), log lines elsewhere
// (Log), and Multi to feed several. Each is a Reporter, which pipeline.Config.Progress takes.
package progress

import (
	"voxpipe/jobs"
	"voxpipe/telemetry/timing"
)

// Reporter receives a run's progress (the method set of pipeline.Progress). Methods are called
// from several goroutines.
type Reporter interface {
	Start(volumes int)
	VolumeStarted(job jobs.Job, planes int) // the volume's z-planes to segment
	PlanesDone(job jobs.Job, planes int)    // that many more have their labels
	VolumeDone(job jobs.Job, status timing.Status)
	Close()
}

// Multi hands every call to each of ps (nil ones left out).
func Multi(ps ...Reporter) Reporter {
	var m multiProgress
	for _, p := range ps {
		if p != nil {
			m = append(m, p)
		}
	}
	return m
}

type multiProgress []Reporter

func (m multiProgress) Start(n int) {
	for _, p := range m {
		p.Start(n)
	}
}

func (m multiProgress) VolumeStarted(j jobs.Job, planes int) {
	for _, p := range m {
		p.VolumeStarted(j, planes)
	}
}

func (m multiProgress) PlanesDone(j jobs.Job, planes int) {
	for _, p := range m {
		p.PlanesDone(j, planes)
	}
}

func (m multiProgress) VolumeDone(j jobs.Job, s timing.Status) {
	for _, p := range m {
		p.VolumeDone(j, s)
	}
}

func (m multiProgress) Close() {
	for _, p := range m {
		p.Close()
	}
}
