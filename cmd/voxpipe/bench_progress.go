package main

// bench's progress lines: one as each engine run ends, written by a goroutine of their own.

import (
	"context"
	"fmt"
	"io"
	"time"
	"voxpipe/engine/engine"
	"voxpipe/model"
)

// benchProgress prints a line as each of BenchEngine's engine calls ends: warmups, then the
// timed runs with an estimate of the time the remaining ones take. BenchEngine makes all its
// calls at once on one copy of the volume in (pinned) host memory, so the calls are observed
// by wrapping the engine; the lines are written by a goroutine of their own, so that writing
// them is not in the next call's time.
type benchProgress struct {
	w            io.Writer
	warmup, runs int
	ended        chan time.Duration // each call's time, in order
	done         chan struct{}
	timedTotal   time.Duration
	timed, calls int
}

func newBenchProgress(w io.Writer, warmup, runs int) *benchProgress {
	p := &benchProgress{w: w, warmup: warmup, runs: runs,
		ended: make(chan time.Duration, warmup+runs), done: make(chan struct{})}
	go p.print()
	return p
}

func (p *benchProgress) print() {
	defer close(p.done)
	for d := range p.ended {
		p.calls++
		if p.calls <= p.warmup {
			fmt.Fprintf(p.w, "bench: warmup %d/%d: %s\n", p.calls, p.warmup, benchDuration(d))
			continue
		}
		p.timed++
		p.timedTotal += d
		line := fmt.Sprintf("bench: run %d/%d: %s", p.timed, p.runs, benchDuration(d))
		if left := p.runs - p.timed; left > 0 {
			eta := p.timedTotal / time.Duration(p.timed) * time.Duration(left)
			line += fmt.Sprintf(" (engine runs: about %s left)", benchETA(eta))
		}
		fmt.Fprintln(p.w, line)
	}
}

// close waits for the lines of the calls made to be written.
func (p *benchProgress) close() {
	close(p.ended)
	<-p.done
}

// benchDuration prints milliseconds like the summary line, or seconds and minutes when long.
func benchDuration(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return d.Round(time.Second).String()
}

// benchETA prints an estimate to a tenth of a second, or to the second past a minute.
func benchETA(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// wrap returns eng with its Segment calls reported, keeping the interfaces BenchEngine looks
// for (host allocation, GPU statistics).
func (p *benchProgress) wrap(eng engine.Engine) engine.Engine {
	t := &timedEngine{Engine: eng, ended: p.ended}
	alloc, isAlloc := eng.(engine.HostAllocator)
	stats, isStats := eng.(engine.GPUStatsReporter)
	switch {
	case isAlloc && isStats:
		return struct {
			*timedEngine
			engine.HostAllocator
			engine.GPUStatsReporter
		}{t, alloc, stats}
	case isAlloc:
		return struct {
			*timedEngine
			engine.HostAllocator
		}{t, alloc}
	case isStats:
		return struct {
			*timedEngine
			engine.GPUStatsReporter
		}{t, stats}
	}
	return t
}

// timedEngine sends the time of each successful Segment call to ended (which has room for
// every call BenchEngine makes, so the send never waits).
type timedEngine struct {
	engine.Engine
	ended chan<- time.Duration
}

func (e *timedEngine) Segment(ctx context.Context, vol *model.Volume, out []uint8, opt engine.Options) error {
	start := time.Now()
	err := e.Engine.Segment(ctx, vol, out, opt)
	if err == nil {
		select {
		case e.ended <- time.Since(start):
		default:
		}
	}
	return err
}
