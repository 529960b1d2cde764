package progress

import (
	"io"
	"sync"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"voxpipe/jobs"
	"voxpipe/telemetry/timing"
)

// Bars shows progress as terminal bars: one for the batch, one per volume in flight (z-planes
// segmented: engines cut volumes into slabs of their own sizes).
// Log output should go through Bars.Writer so that it prints above the bars.
type Bars struct {
	p     *mpb.Progress
	mu    sync.Mutex
	total *mpb.Bar
	vols  map[int]*mpb.Bar
}

// NewBars draws bars on w, which should be a terminal.
func NewBars(w io.Writer) *Bars {
	return &Bars{p: mpb.New(mpb.WithOutput(w), mpb.WithWidth(48)), vols: map[int]*mpb.Bar{}}
}

// Writer prints lines above the bars.
func (b *Bars) Writer() io.Writer { return b.p }

func (b *Bars) Start(volumes int) {
	b.total = b.p.AddBar(int64(volumes), mpb.BarPriority(1<<30),
		mpb.PrependDecorators(decor.Name("volumes ", decor.WCSyncSpaceR), decor.CountersNoUnit("%d/%d", decor.WCSyncSpace)),
		mpb.AppendDecorators(decor.Elapsed(decor.ET_STYLE_GO, decor.WCSyncSpace), decor.Name(" "), decor.AverageETA(decor.ET_STYLE_GO)))
}

func (b *Bars) VolumeStarted(job jobs.Job, planes int) {
	bar := b.p.AddBar(int64(planes), mpb.BarRemoveOnComplete(),
		mpb.PrependDecorators(decor.Name(job.Name+" ", decor.WCSyncSpaceR), decor.CountersNoUnit("%d/%d planes", decor.WCSyncSpace)))
	b.mu.Lock()
	b.vols[job.Index] = bar
	b.mu.Unlock()
}

func (b *Bars) PlanesDone(job jobs.Job, planes int) {
	b.mu.Lock()
	bar := b.vols[job.Index]
	b.mu.Unlock()
	if bar != nil {
		bar.IncrBy(planes)
	}
}

func (b *Bars) VolumeDone(job jobs.Job, status timing.Status) {
	b.mu.Lock()
	bar := b.vols[job.Index]
	delete(b.vols, job.Index)
	b.mu.Unlock()
	if bar != nil {
		bar.Abort(true)
	}
	b.total.Increment()
}

func (b *Bars) Close() {
	b.mu.Lock()
	for _, bar := range b.vols {
		bar.Abort(true)
	}
	b.mu.Unlock()
	if b.total != nil && !b.total.Completed() {
		b.total.Abort(false)
	}
	b.p.Wait()
}
