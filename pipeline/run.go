// Package pipeline runs batches of volumes through read -> normalise -> segment -> write, as
// stages connected by channels, with buffers from bounded pools so that memory does not grow
// with the batch, and records per-stage timings.
//
// Each stage is a small type in its own file, with a constructor that starts its workers on
// the run's errgroup, a put method that hands it a volume (selecting on ctx.Done()), and a
// worker loop: the producer (producer.go: what to do with each job, from its header), the
// readers (read.go, read_dicom.go; each read ends with the prepare step, prepare.go), the
// engine workers (segment.go) and the writers (write.go). A stage's workers close the next
// stage's queue once all of them have returned. The stages share the run's services: its host
// memory (memory.go, budget.go, over internal/hostmem), its records (record.go) and the end of
// its volumes (conclude.go). volume.go says how a volume travels and who owns it when.
package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"golang.org/x/sync/errgroup"

	"voxpipe/io/nifti"
	"voxpipe/store/provenance"
)

// Result counts the outcome of a run.
type Result struct {
	OK, Skipped, Failed, Busy, Conflict int
}

// Done is the number of volumes with a row in the summary.
func (r Result) Done() int { return r.OK + r.Skipped + r.Failed + r.Busy + r.Conflict }

// ErrStoppedEarly is the cause recorded for volumes not finished because --fail-fast stopped
// the batch.
var ErrStoppedEarly = errors.New("pipeline: batch stopped after a failure (fail-fast)")

// Run processes every job. Per-volume failures are recorded in the summary and do not stop
// the batch (unless FailFast); the returned error is for the run itself: cancellation (a
// signal), or an output that cannot be written.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	cfg.Output.Provenance.Generator = provenance.Generator
	runCtx, stop := context.WithCancelCause(ctx)
	sv := newServices(cfg, stop)
	if !cfg.Workers.LeaveBuffers {
		defer sv.mem.freeAll()
	}
	defer stop(nil)
	res, err := sv.run(runCtx)
	switch cause := context.Cause(runCtx); {
	case errors.Is(cause, ErrStoppedEarly):
		// The failure that stopped the batch is in the summary; the run itself went as asked.
		sv.log.Warn("fail-fast: batch stopped after a failed volume", "unprocessed", len(cfg.Input.Jobs)-res.Done())
		err = nil
	case cause != nil:
		err = cause
	}
	return res, err
}

// services are what the stages share (each stage embeds them): the run's configuration and
// log, its host memory (memory.go, budget.go), its records (record.go) and the end of its
// volumes (conclude.go).
type services struct {
	cfg Config
	log *slog.Logger
	mem *memory
	rec *recorder
	end *concluder
}

// newServices makes a run's services; stop stops the run with a cause (nil: a run that never
// stops itself, reading alone). A nil log discards, a nil Progress reports nothing.
func newServices(cfg Config, stop context.CancelCauseFunc) *services {
	if cfg.Telemetry.Log == nil {
		cfg.Telemetry.Log = discardLogger
	}
	if cfg.Telemetry.Progress == nil {
		cfg.Telemetry.Progress = nopProgress{}
	}
	log := cfg.Telemetry.Log
	mem := newMemory(cfg, log)
	rec := newRecorder(cfg.Telemetry, stop)
	return &services{cfg: cfg, log: log, mem: mem, rec: rec, end: newConcluder(cfg, log, mem, rec, stop)}
}

// run starts the stages on one errgroup, each before the one that hands it work (a stage's
// workers close the next one's queue once all of them have returned), and waits for them.
func (sv *services) run(ctx context.Context) (Result, error) {
	sv.rec.progress().Start(len(sv.cfg.Input.Jobs))
	defer sv.rec.progress().Close()

	g, ctx := errgroup.WithContext(ctx)
	first := make(chan *nifti.Header, 1) // the first volume's header, from the producer
	g.Go(func() error {
		sv.mem.prewarmMask(ctx, first)
		return nil
	})
	writers := startWriters(ctx, g, sv)
	engines := startEngines(ctx, g, sv, writers)
	readers := startReaders(ctx, g, sv, engines)
	startProducer(ctx, g, sv, readers, first)

	err := g.Wait()
	if err == nil {
		err = sv.rec.err()
	}
	return sv.end.result(), err
}

// queue hands volumes to a stage's workers; the stage before closes it once all its workers
// have returned, which is how the stage learns that no more work is coming.
type queue chan *work

// put hands w to the stage, or fails it when ctx ends first: then no worker has it.
func (q queue) put(ctx context.Context, end *concluder, w *work) error {
	select {
	case q <- w:
		return nil
	case <-ctx.Done():
		end.fail(w, context.Cause(ctx))
		return ctx.Err()
	}
}

// startWorkers starts n workers on g; once all of them have returned, done runs (closing the
// next stage's queue), if not nil.
func startWorkers(g *errgroup.Group, n int, done func(), worker func(i int) error) {
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		g.Go(func() error {
			defer wg.Done()
			return worker(i)
		})
	}
	if done != nil {
		g.Go(func() error {
			wg.Wait()
			done()
			return nil
		})
	}
}
