// Package pipeline runs batches of volumes through read -> normalise -> segment -> write, as
// stages connected by channels, with buffers from bounded pools so that memory does not grow
// with the batch, and records per-stage timings.
package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"time"
	"voxpipe/internal/hostmem"

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
	r := &runner{cfg: cfg, t0: time.Now(), log: cfg.Telemetry.Log, budget: hostmem.NewBudget(cfg.Workers.MaxMemory)}
	r.cfg.Output.Provenance.Generator = provenance.Generator
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.cfg.Telemetry.Progress == nil {
		r.cfg.Telemetry.Progress = nopProgress{}
	}
	alloc := hostAlloc(cfg.Engines[0])
	// Each reader and each engine holds at most one input volume; each engine and each writer
	// at most one mask. With these pools full, nothing more is ever allocated.
	// A batch of fewer volumes than that never uses more than one buffer per volume.
	batch := max(1, cfg.jobCount())
	r.inputs = hostmem.NewPool(newBuffers(alloc, min(cfg.Workers.Readers+len(cfg.Engines), batch), inputHeadroom)...)
	r.masks = hostmem.NewPool(newBuffers(alloc, min(len(cfg.Engines)+cfg.Workers.Writers, batch), 0)...)
	if !cfg.Workers.LeaveBuffers {
		defer r.freeBuffers()
	}

	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	r.stop = stop
	res, err := r.run(runCtx)
	switch cause := context.Cause(runCtx); {
	case errors.Is(cause, ErrStoppedEarly):
		// The failure that stopped the batch is in the summary; the run itself went as asked.
		r.log.Warn("fail-fast: batch stopped after a failed volume", "unprocessed", len(cfg.Input.Jobs)-res.Done())
		err = nil
	case cause != nil:
		err = cause
	}
	return res, err
}

type runner struct {
	cfg    Config
	budget *hostmem.Budget // nil: no Config.MaxMemory
	t0     time.Time
	log    *slog.Logger
	stop   context.CancelCauseFunc
	inputs *hostmem.Pool[*hostmem.Buffer]
	masks  *hostmem.Pool[*hostmem.Buffer]

	mu     sync.Mutex
	result Result
	outErr error // first error writing the CSVs
}

// freeBuffers frees every pool buffer, in parallel (hostmem.FreeAll).
func (r *runner) freeBuffers() {
	if err := hostmem.FreeAll(r.inputs, r.masks); err != nil {
		r.log.Warn("free host buffer", "err", err)
	}
}

func (r *runner) run(ctx context.Context) (Result, error) {
	r.cfg.Telemetry.Progress.Start(len(r.cfg.Input.Jobs))
	defer r.cfg.Telemetry.Progress.Close()

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		r.prewarmMask(ctx)
		return nil
	})
	// Each stage is started before the one that hands it work, and closes the next one's
	// queue once all its workers have returned.
	writers := startWriters(ctx, g, r)
	engines := startEngines(ctx, g, r, writers)
	readers := startReaders(ctx, g, r, engines)
	startProducer(ctx, g, r, readers)

	err := g.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		err = r.outErr
	}
	return r.result, err
}

// prewarmMask sizes a mask buffer for the first volume while that volume is being read: the
// engine's page-locked memory for a large mask takes a while (docs/perf.md), which would
// otherwise delay its segmentation. The buffer goes back to the
// pool at once (a one-volume run has exactly one); failures are left to the segment stage,
// which sizes the buffer again.
func (r *runner) prewarmMask(ctx context.Context) {
	// Jobs refused at discovery (a FIFO) must not be opened.
	if r.cfg.Input.Source != nil || len(r.cfg.Input.Jobs) == 0 || r.cfg.Input.Jobs[0].Err != nil {
		return
	}
	hdr, err := nifti.ReadHeader(r.cfg.Input.Jobs[0].Input)
	if err != nil {
		return
	}
	voxels := int64(hdr.NX()) * int64(hdr.NY()) * int64(hdr.NZ())
	if voxels <= 0 || voxels > math.MaxInt32*int64(8) {
		return
	}
	buf, err := r.masks.Get(ctx)
	if err != nil {
		return
	}
	defer r.masks.Put(buf)
	if !r.budget.TryAcquire(voxels) {
		return // under a tight budget: left to the volume's own reservation
	}
	before := buf.Allocated()
	_ = buf.Ensure(int(voxels))
	r.budget.Release(voxels - int64(buf.Allocated()-before))
}

// queue hands volumes to a stage's workers; the stage before closes it once all its workers
// have returned, which is how the stage learns that no more work is coming.
type queue chan *work

// put hands w to the stage, or fails it when ctx ends first: then no worker has it.
func (q queue) put(ctx context.Context, r *runner, w *work) error {
	select {
	case q <- w:
		return nil
	case <-ctx.Done():
		r.fail(w, context.Cause(ctx))
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
