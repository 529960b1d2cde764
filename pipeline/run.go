// Package pipeline runs batches of volumes through read -> normalise -> segment -> write, as
// stages connected by channels, with buffers from bounded pools so that memory does not grow
// with the batch, and records per-stage timings.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"time"
	"voxpipe/engine"
	"voxpipe/internal/hostmem"

	"golang.org/x/sync/errgroup"

	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/model"
	"voxpipe/store/claim"
	"voxpipe/store/provenance"
	"voxpipe/telemetry/timing"
)

// Config describes one batch run.
type Config struct {
	Input   Input
	Engines []engine.Engine // one worker per engine, all pulling from one queue
	Prepare Prepare
	Workers Workers
	Output  Output
	// FailFast stops the batch at the first failed volume.
	FailFast  bool
	Telemetry Telemetry
}

// Input is what a run segments.
type Input struct {
	Jobs []jobs.Job
	// Source, when set, hands the jobs in instead of Jobs, for as long as it stays open (the
	// watch service): Run returns once it is closed and its jobs are done.
	Source <-chan jobs.Job
	// Volume, when set, is the volume (0-based) of 4D inputs to segment; nil: 4D inputs fail
	// (nifti.ErrMultiVolume).
	Volume *int
}

// Prepare is how volumes are brought to the model before segmentation (prepare.go).
type Prepare struct {
	// Card is the model's card (nil: the model has none): the orientation and spacing volumes
	// are brought to, and the domain they are checked against.
	Card *model.Card
	// Resample lets volumes whose voxel size differs from the card's by more than
	// geometry.SpacingTolerance be resampled to it (--resample auto); false: they are only
	// reoriented.
	Resample bool
	// StrictDomain fails volumes the domain check judges out of domain; warnings never fail
	// a volume.
	StrictDomain bool
}

// Workers sizes the stages and bounds their host memory.
type Workers struct {
	Slab    int // z-slices per slab for reading and segmenting
	Readers int // volumes read in parallel
	// ReadThreads is how many goroutines read one volume: an uncompressed one by position (see
	// readers.readAt), a gzipped one of a few MiB or more by inflating it whole on that many
	// (nifti.WithInflateThreads, then read by position from memory); 0: the default rule of
	// Config.readThreads. With one thread, gzipped volumes stream in order.
	ReadThreads int
	Writers     int // masks written in parallel
	// MaxMemory bounds the bytes of host buffers (input and mask pools, inflate scratch)
	// allocated at once; a volume that needs more than that alone fails before anything is
	// allocated for it. 0: no bound.
	MaxMemory int64
	// LeaveBuffers leaves the pool buffers allocated when Run returns, for a process that
	// exits right after it: the exit reclaims them faster than freeing them one by one
	// (page-locked ones especially, docs/perf.md). Anyone else leaks them.
	LeaveBuffers bool
}

// Output is what a run writes beside each mask, and when it skips or claims one.
type Output struct {
	Classes int    // labels written are 0..Classes-1
	Descrip string // descrip field of the written masks ("voxpipe <model>")
	Write   nifti.WriteOptions
	// Overwrite redoes every volume, up-to-date masks and files voxpipe did not write
	// included (default: skip up-to-date masks, report the others as conflicts).
	Overwrite bool
	// VerifyInputs makes the rerun check re-hash each input whose size and mtime match.
	VerifyInputs bool
	// Claims, when set, makes the run claim each volume before working on it, so that several
	// processes can share the output folder; volumes claimed by live processes are recorded
	// busy. nil: no claims (tests, benchmarks).
	Claims *claim.Manager
	// OnBusy, when set, takes the jobs claimed by live processes instead of a busy row (the
	// watch service hands them out again later).
	OnBusy func(jobs.Job)
	// Provenance is recorded in every mask, its Input filled in per volume; its Model decides
	// whether an existing mask is up to date. Generator is set by Run.
	Provenance provenance.Record
	// Analyser, when set, makes each volume's statistics and preview, or removes stale ones,
	// before its mask is committed (package analysis); nil: none (tests, benchmarks).
	Analyser Analyser
}

// Telemetry is where a run reports: its records, its log and its observers, each may be nil.
type Telemetry struct {
	RunID    string
	Host     string // summary.csv's host column
	Shard    string // summary.csv's shard column
	Timings  *timing.CSVFile[timing.Row]
	Summary  *timing.CSVFile[timing.Summary]
	Trace    *timing.Trace
	Log      *slog.Logger
	Progress Progress
	Observer Observer
}

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

// readThreads is ReadThreads, or by default the cores shared among the readers that can be
// busy at once: max(1, GOMAXPROCS / min(Readers, len(Jobs))). One volume alone gets every
// core; a batch read by 2 readers on 16 cores, 8 goroutines each.
func (c *Config) readThreads() int {
	if c.Workers.ReadThreads > 0 {
		return c.Workers.ReadThreads
	}
	return max(1, runtime.GOMAXPROCS(0)/max(1, min(c.Workers.Readers, c.jobCount())))
}

// jobCount is the number of jobs, or for a Source as many as can be in flight at once.
func (c *Config) jobCount() int {
	if c.Input.Source != nil {
		return c.Workers.Readers + len(c.Engines) + c.Workers.Writers
	}
	return len(c.Input.Jobs)
}

func (c *Config) validate() error {
	switch {
	case len(c.Engines) == 0:
		return errors.New("pipeline: no engine")
	case c.Workers.Slab < 1:
		return fmt.Errorf("pipeline: slab must be at least 1, got %d", c.Workers.Slab)
	case c.Workers.Readers < 1 || c.Workers.Writers < 1:
		return fmt.Errorf("pipeline: need at least one reader and one writer (got %d, %d)", c.Workers.Readers, c.Workers.Writers)
	case c.Workers.ReadThreads < 0:
		return fmt.Errorf("pipeline: read threads must be 0 (automatic) or more, got %d", c.Workers.ReadThreads)
	case c.Output.Classes < 1 || c.Output.Classes > 256:
		return fmt.Errorf("pipeline: %d classes do not fit uint8 labels", c.Output.Classes)
	}
	return nil
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
