package progress

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"voxpipe/jobs"
	"voxpipe/telemetry/timing"
)

// Log is the progress of a run without a terminal (a service, a cluster job, cron): a
// log line every interval with the volumes done of the total, the planes of the volumes in
// flight, the rate and an estimate of the time left. Nothing is logged while nothing happens.
type Log struct {
	log   *slog.Logger
	every time.Duration

	mu       sync.Mutex
	total    int // 0: unknown (a watch)
	done     int
	byStatus map[timing.Status]int
	inFlight map[int]*planes // by Job.Index
	start    time.Time
	changed  bool // since the last line
	stop     chan struct{}
	stopOnce sync.Once
}

type planes struct {
	name        string
	done, total int
}

// NewLog logs progress to log every interval.
func NewLog(log *slog.Logger, every time.Duration) *Log {
	return &Log{log: log, every: every, byStatus: map[timing.Status]int{},
		inFlight: map[int]*planes{}, stop: make(chan struct{})}
}

func (p *Log) Start(volumes int) {
	p.mu.Lock()
	p.total, p.start = volumes, time.Now()
	p.mu.Unlock()
	go func() {
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.Line()
			}
		}
	}()
}

func (p *Log) VolumeStarted(job jobs.Job, n int) {
	p.mu.Lock()
	p.inFlight[job.Index] = &planes{name: job.Name, total: n}
	p.changed = true
	p.mu.Unlock()
}

func (p *Log) PlanesDone(job jobs.Job, n int) {
	p.mu.Lock()
	if f := p.inFlight[job.Index]; f != nil {
		f.done += n
		p.changed = true
	}
	p.mu.Unlock()
}

func (p *Log) VolumeDone(job jobs.Job, status timing.Status) {
	p.mu.Lock()
	delete(p.inFlight, job.Index)
	p.done++
	p.byStatus[status]++
	p.changed = true
	p.mu.Unlock()
}

func (p *Log) Close() { p.stopOnce.Do(func() { close(p.stop) }) }

// Line logs the progress now, if anything changed since the last line.
func (p *Log) Line() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.changed {
		return
	}
	p.changed = false
	elapsed := time.Since(p.start)
	// Volumes done, counting the in-flight ones by the fraction of their planes done.
	progress := float64(p.done)
	var flight []string
	for _, f := range p.inFlight {
		if f.total > 0 {
			progress += float64(f.done) / float64(f.total)
		}
		flight = append(flight, fmt.Sprintf("%s %d/%d planes", f.name, f.done, f.total))
	}
	attrs := []any{"done", p.done}
	if p.total > 0 {
		attrs = append(attrs, "total", p.total)
	}
	for _, s := range timing.Statuses {
		if n := p.byStatus[s]; n > 0 {
			attrs = append(attrs, string(s), n)
		}
	}
	if len(flight) > 0 {
		attrs = append(attrs, "in_flight", strings.Join(flight, ", "))
	}
	if elapsed > 0 && progress > 0 {
		perMin := progress / elapsed.Minutes()
		attrs = append(attrs, "volumes_per_min", fmt.Sprintf("%.2f", perMin))
		if p.total > 0 {
			left := time.Duration(float64(elapsed) * (float64(p.total) - progress) / progress)
			attrs = append(attrs, "eta", left.Round(time.Second).String())
		}
	}
	p.log.Info("progress", attrs...)
}
