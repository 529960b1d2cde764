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
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"voxpipe/io/nifti"
	"voxpipe/pipeline/timing"
	"voxpipe/segment"
)

// Config describes one batch run.
type Config struct {
	Jobs    []Job
	Engines []segment.Engine // one worker per engine, all pulling from one queue
	Classes int              // labels written are 0..Classes-1
	Descrip string           // descrip field of the written masks ("voxpipe <model>")

	Slab    int // z-slices per slab for reading and segmenting
	Readers int // volumes read in parallel
	// ReadThreads is how many goroutines read one volume: an uncompressed one by position (see
	// runner.readAt), a gzipped one of a few MiB or more by inflating it whole on that many
	// (nifti.WithInflateThreads, then read by position from memory); 0: the default rule of
	// Config.readThreads. With one thread, gzipped volumes stream in order.
	ReadThreads int
	Writers     int // masks written in parallel
	Write       nifti.WriteOptions
	Overwrite   bool // redo volumes whose mask exists (default: skip them)
	FailFast    bool // stop the batch at the first failed volume
	// LeaveBuffers leaves the pool buffers allocated when Run returns, for a process that
	// exits right after it: the exit reclaims them faster than freeing them one by one
	// (page-locked ones: `voxpipe run` on one volume took ~20 ms less on the GPU machine,
	// docs/perf.md). Anyone else leaks them.
	LeaveBuffers bool

	RunID    string
	Timings  *timing.CSVFile[timing.Row]     // may be nil
	Summary  *timing.CSVFile[timing.Summary] // may be nil
	Trace    *timing.Trace                   // may be nil
	Log      *slog.Logger                    // may be nil
	Progress Progress                        // may be nil
}

// Result counts the outcome of a run.
type Result struct {
	OK, Skipped, Failed int
}

// ErrStoppedEarly is the cause recorded for volumes not finished because --fail-fast stopped
// the batch.
var ErrStoppedEarly = errors.New("pipeline: batch stopped after a failure (fail-fast)")

// work is one volume travelling through the stages, with the buffers it holds.
type work struct {
	job  Job
	hdr  *nifti.Header
	in   *hostBuffer
	mask *hostBuffer
	vol  segment.Volume
	// inflatedInto: the gzipped file was inflated straight into in (nifti.WithInflateInto).
	inflatedInto bool

	mu         sync.Mutex // engines report events from their own goroutines
	sum        timing.Summary
	kernelsEnd float64 // under mu: the latest end of a kernels span, ms since the run's start
	err        error   // first failure of the volume, under mu (see setErr)
	start      time.Time

	// From the start of its segmentation the volume is held by two goroutines at once, its
	// engine worker and its writer (see the comment on runner.segment): holders counts them,
	// and the last to let go concludes the volume.
	holders   atomic.Int32
	seg       *segProgress
	cancelSeg context.CancelCauseFunc // stops the engine's work on this volume (the writer failed)
	committed time.Time               // when the writer's Commit returned (its last action)
}

// Run processes every job. Per-volume failures are recorded in the summary and do not stop
// the batch (unless FailFast); the returned error is for the run itself: cancellation (a
// signal), or an output that cannot be written.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	r := &runner{cfg: cfg, t0: time.Now(), log: cfg.Log}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.cfg.Progress == nil {
		r.cfg.Progress = nopProgress{}
	}
	alloc := defaultAllocator
	if a, ok := cfg.Engines[0].(segment.HostAllocator); ok {
		alloc = a
	}
	newBuffers := func(n, headroom int) []*hostBuffer {
		bufs := make([]*hostBuffer, n)
		for i := range bufs {
			bufs[i] = &hostBuffer{alloc: alloc, headroom: headroom}
		}
		return bufs
	}
	// Each reader and each engine holds at most one input volume; each engine and each writer
	// at most one mask. With these pools full, nothing more is ever allocated.
	// A batch of fewer volumes than that never uses more than one buffer per volume.
	jobs := max(1, len(cfg.Jobs))
	r.inputs = NewPool(newBuffers(min(cfg.Readers+len(cfg.Engines), jobs), inputHeadroom)...)
	r.masks = NewPool(newBuffers(min(len(cfg.Engines)+cfg.Writers, jobs), 0)...)
	if !cfg.LeaveBuffers {
		defer r.freeBuffers()
	}

	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	r.stop = stop
	res, err := r.run(runCtx)
	switch cause := context.Cause(runCtx); {
	case errors.Is(cause, ErrStoppedEarly):
		// The failure that stopped the batch is in the summary; the run itself went as asked.
		r.log.Warn("fail-fast: batch stopped after a failed volume", "unprocessed", len(cfg.Jobs)-res.OK-res.Skipped-res.Failed)
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
	if c.ReadThreads > 0 {
		return c.ReadThreads
	}
	return max(1, runtime.GOMAXPROCS(0)/max(1, min(c.Readers, len(c.Jobs))))
}

func (c *Config) validate() error {
	switch {
	case len(c.Engines) == 0:
		return errors.New("pipeline: no engine")
	case c.Slab < 1:
		return fmt.Errorf("pipeline: slab must be at least 1, got %d", c.Slab)
	case c.Readers < 1 || c.Writers < 1:
		return fmt.Errorf("pipeline: need at least one reader and one writer (got %d, %d)", c.Readers, c.Writers)
	case c.ReadThreads < 0:
		return fmt.Errorf("pipeline: read threads must be 0 (automatic) or more, got %d", c.ReadThreads)
	case c.Classes < 1 || c.Classes > 256:
		return fmt.Errorf("pipeline: %d classes do not fit uint8 labels", c.Classes)
	}
	return nil
}

type runner struct {
	cfg    Config
	t0     time.Time
	log    *slog.Logger
	stop   context.CancelCauseFunc
	inputs *Pool[*hostBuffer]
	masks  *Pool[*hostBuffer]

	mu     sync.Mutex
	result Result
	outErr error // first error writing the CSVs
}

// freeBuffers frees every pool buffer, in parallel: returning a volume's worth of pages to the
// kernel takes milliseconds per buffer (munmap; for page-locked memory the unregistering is
// serialised on the engine's thread, the unmapping is not).
func (r *runner) freeBuffers() {
	var wg sync.WaitGroup
	for _, p := range []*Pool[*hostBuffer]{r.inputs, r.masks} {
		for _, b := range p.Drain() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := b.free(); err != nil {
					r.log.Warn("free host buffer", "err", err)
				}
			}()
		}
	}
	wg.Wait()
}

func (r *runner) run(ctx context.Context) (Result, error) {
	r.cfg.Progress.Start(len(r.cfg.Jobs))
	defer r.cfg.Progress.Close()

	toRead := make(chan *work)
	toSegment := make(chan *work)
	// Engine workers queue a volume here as its segmentation starts and never wait on it:
	// every queued volume holds a mask buffer, so the queue never holds more than the mask
	// pool, its capacity (see runner.segment).
	toWrite := make(chan *work, r.masks.Cap())
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		r.prewarmMask(ctx)
		return nil
	})

	g.Go(func() error {
		defer close(toRead)
		for _, job := range r.cfg.Jobs {
			if !r.cfg.Overwrite {
				if _, err := os.Stat(job.Output); err == nil {
					r.skip(job)
					continue
				}
			}
			w := &work{job: job}
			w.sum = timing.Summary{RunID: r.cfg.RunID, Volume: job.Name, Output: job.Output}
			select {
			case toRead <- w:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	startStage(g, r.cfg.Readers, toSegment, func(i int) error {
		return r.pump(ctx, toRead, toSegment, func(w *work) bool { return r.read(ctx, i, w) })
	})
	startStage(g, len(r.cfg.Engines), toWrite, func(i int) error {
		eng := r.cfg.Engines[i]
		// An engine still opening (the CUDA engine's context) finishes while the readers read;
		// one that cannot open stops the run with its error instead of failing every volume.
		if o, ok := eng.(segment.BackgroundOpener); ok {
			if err := o.Ready(); err != nil {
				return err
			}
		}
		return r.pump(ctx, toSegment, nil, func(w *work) bool { r.segment(ctx, i, eng, w, toWrite); return false })
	})
	startStage(g, r.cfg.Writers, nil, func(i int) error {
		return r.pump(ctx, toWrite, nil, func(w *work) bool { r.write(ctx, i, w); return false })
	})

	err := g.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		err = r.outErr
	}
	return r.result, err
}

// prewarmMask sizes a mask buffer for the first volume while that volume is being read: the
// engine's page-locked memory for a 512x512x1000 mask takes ~20 ms on the GPU machine
// (docs/perf.md), which would otherwise delay its segmentation. The buffer goes back to the
// pool at once (a one-volume run has exactly one); failures are left to the segment stage,
// which sizes the buffer again.
func (r *runner) prewarmMask(ctx context.Context) {
	if len(r.cfg.Jobs) == 0 {
		return
	}
	hdr, err := nifti.ReadHeader(r.cfg.Jobs[0].Input)
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
	_ = buf.ensure(int(voxels))
	r.masks.Put(buf)
}

// startStage starts n workers; out, if any, is closed once all of them have returned, which
// is how the next stage learns that no more work is coming.
func startStage(g *errgroup.Group, n int, out chan<- *work, worker func(i int) error) {
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		g.Go(func() error {
			defer wg.Done()
			return worker(i)
		})
	}
	if out != nil {
		g.Go(func() error {
			wg.Wait()
			close(out)
			return nil
		})
	}
}

// pump runs do on every volume from in and passes those it kept on to out. do returns false
// when it has finished the volume itself (failed it and released its buffers).
func (r *runner) pump(ctx context.Context, in <-chan *work, out chan<- *work, do func(*work) bool) error {
	for w := range in {
		if !do(w) || out == nil {
			continue
		}
		select {
		case out <- w:
		case <-ctx.Done():
			r.fail(w, context.Cause(ctx))
			return ctx.Err()
		}
	}
	return ctx.Err()
}
