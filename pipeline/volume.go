package pipeline

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"voxpipe/internal/hostmem"
	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/model"
	"voxpipe/store/claim"
	"voxpipe/store/provenance"
	"voxpipe/telemetry/timing"
)

// A volume's state travels with it through the stages (work). Each stage owns the volume
// while it works on it, and hands it on through the next stage's queue (queue.put), or fails
// it itself (concluder.fail), giving back the buffers it holds. The one exception is the
// hand-over from the segment stage to the write stage, where segmentation and writing overlap:
// as soon as an engine worker has a mask buffer for a volume it queues the volume for the
// writers and starts the engine; the engine reports each slab whose labels are final
// (engine.Options.OnSlabDone, recorded in segProgress) and the writer streams those planes
// into the temporary file while later slabs are computed, then commits once the engine has
// returned without error. The rules that keep this safe:
//
//   - Ownership and buffers. From the hand-over on, the volume has two holders, its engine
//     worker and its writer (work.seg.holders = 2). Each lets go exactly once (release); the last
//     one concludes the volume: its summary row, ok or failed, written exactly once, and its
//     mask buffer back in the pool, exactly once and only after both the engine and the writer
//     are done with it. The engine worker gives the input buffer back itself, before it lets
//     go. Before the hand-over (no mask buffer yet, or the queue refused under cancellation)
//     the engine worker alone owns the volume and fails it itself.
//   - No deadlock. An engine worker never waits for a writer: the writers' queue holds at most
//     as many volumes as there are mask buffers (each queued volume holds one), which is its
//     capacity, so the hand-over never blocks; OnSlabDone only records the progress and wakes
//     the writer without blocking. Writers wait only for slabs of volumes already handed over,
//     whose engines therefore run freely (or have returned). An engine worker blocks only on
//     the mask pool, when it holds no volume in segmentation, and buffers come back as writers
//     finish. With all writers busy, volumes wait in the queue while engines keep segmenting
//     (at most engines+writers masks in flight).
//   - Failures. The volume's first failure wins (setErr). An engine error ends the writer's
//     wait; the writer aborts its temporary file (nothing carries the final name) and never
//     commits. A writer error (disk full) cancels the engine's work on the volume
//     (seg.cancel). Either way the volume is failed once, by whoever lets go last, and with
//     --fail-fast that stops the batch.
//   - Cancellation. Every wait selects on ctx.Done(): the hand-over, the writer's wait for
//     slabs, the pool. On SIGINT the engine returns the context's error, the writer aborts, and
//     the last holder fails the volume as interrupted. Volumes still queued are drained by the
//     writers, which abort them at once.
//   - Timings. The engine's own events; one `write` row per chunk written (at most a slab of
//     planes, timed around the write call only, the first one including creating the
//     temporary file) and one `write` row with slab -1 for the commit (flush, fsync, rename):
//     time spent waiting for slabs is in no row. WriteMS is their sum; WallMS runs from the
//     start of the read to the end of the commit.

// work is one volume travelling through the stages. Its state is split by concern, each part
// written by the stages that own it (see the rules above): what the producer learnt of its
// input (src), the host memory it holds (mem, budget.go), the volume as read, how it meets
// the model (prep, prepare.go), its summary row and timings (rec, record.go), and what its
// engine worker and writer share from the hand-over on (seg).
type work struct {
	job   jobs.Job
	claim *claim.Claim // nil without Output.Claims; released once the volume's row is written
	src   source
	mem   held
	vol   model.Volume // the volume as read, in mem.in
	prep  prepared
	rec   volRecord
	seg   handover
}

// source is what the producer learnt of the volume's input before reading any of its data.
type source struct {
	// hdr is the input's header (read again by nifti.Open in the read stage).
	hdr *nifti.Header
	// input is the input's fingerprint without its hash, files the files hashed (the data file
	// last), reason why the volume is being done.
	input  provenance.Input
	files  []string
	reason string
	// hash receives the input's XXH3-128 (or its error) once, from the goroutine the read
	// stage starts.
	hash chan hashResult
}

// held is the host memory the volume holds: its pool buffers and, under Config.MaxMemory,
// the bytes reserved and not yet allocated, the inflate scratch among them (see budget.go).
type held struct {
	in, mask          *hostmem.Buffer
	reserved, scratch int64
	// inflatedInto: the gzipped file was inflated straight into in (nifti.WithInflateInto).
	inflatedInto bool
}

// prepared is how the volume meets the model (prepare.go; its plan made by the producer),
// and, when it is not read as stored, the model's view of it and the mask on that grid (heap
// memory, modelBytes of it drawn from the budget), until the restore step.
type prepared struct {
	flat       bool // the statistics found every voxel equal
	dom        domainState
	plan       *gridPlan // from the producer (planFor), nil with planErr
	planErr    error
	model      *model.Volume
	modelMask  []uint8
	modelBytes int64
}

// volRecord is the volume's summary row and the times it is made of.
type volRecord struct {
	mu         sync.Mutex // engines report events from their own goroutines
	sum        timing.Summary
	kernelsEnd float64 // under mu: the latest end of a kernels span, ms since the run's start
	err        error   // first failure of the volume, under mu (see setErr)
	// start: the volume's arrival (Job.Arrived) or the reader taking it; readStart, readEnd:
	// its decode; segStart: its engine call (under mu). wall_ms runs from start; queue_ms is
	// the waits between them (queueMS).
	start, readStart, readEnd, segStart time.Time
	committed                           time.Time // when the writer's Commit returned (its last action)
}

// handover is what the volume's engine worker and its writer share from the start of its
// segmentation, when it is held by both at once (see the rules above).
type handover struct {
	// holders counts the goroutines holding the volume; the last to let go concludes it.
	holders  atomic.Int32
	progress *segProgress
	cancel   context.CancelCauseFunc // stops the engine's work on this volume (the writer failed)
}

// queueMS is the time the volume waited within its wall time (under w.rec.mu): from its start
// (arrival, or the reader taking it) to its read (an input buffer, the memory budget), and
// from its read's end to its engine call (a free engine, a mask buffer). Stages not reached
// count for nothing.
func (w *work) queueMS() float64 {
	var q time.Duration
	if !w.rec.readStart.IsZero() {
		q += w.rec.readStart.Sub(w.rec.start)
	}
	if !w.rec.segStart.IsZero() && !w.rec.readEnd.IsZero() {
		q += w.rec.segStart.Sub(w.rec.readEnd)
	}
	return ms(q)
}

// setErr records the volume's first failure; later ones are consequences of it.
func (w *work) setErr(err error) {
	w.rec.mu.Lock()
	if w.rec.err == nil {
		w.rec.err = err
	}
	w.rec.mu.Unlock()
}

// segProgress is how far the engine has got with a volume, shared by its engine worker and
// its writer.
type segProgress struct {
	nz   int
	wake chan struct{} // capacity 1: something changed since the writer last looked

	mu       sync.Mutex
	ready    int   // planes [0, ready) hold final labels
	finished bool  // the engine call has returned
	err      error // its error, or a broken OnSlabDone contract
}

func newSegProgress(nz int) *segProgress {
	return &segProgress{nz: nz, wake: make(chan struct{}, 1)}
}

// slabDone is the engine's OnSlabDone: it never blocks.
func (p *segProgress) slabDone(z0, z1 int) {
	p.mu.Lock()
	switch {
	case p.err != nil:
	case z0 != p.ready || z1 <= z0 || z1 > p.nz:
		// Writing planes the engine may still change would be wrong: fail the volume instead.
		p.err = fmt.Errorf("pipeline: engine reported slab z %d..%d done after z %d of %d", z0, z1, p.ready, p.nz)
	default:
		p.ready = z1
	}
	p.mu.Unlock()
	p.poke()
}

// finish records the engine's verdict and returns the volume's: err, or a broken OnSlabDone
// contract. A successful engine has filled the whole mask, also when it reported no slabs.
func (p *segProgress) finish(err error) error {
	p.mu.Lock()
	p.finished = true
	if p.err == nil {
		p.err = err
	}
	if p.err == nil {
		p.ready = p.nz
	}
	err = p.err
	p.mu.Unlock()
	p.poke()
	return err
}

func (p *segProgress) poke() {
	select {
	case p.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

func (p *segProgress) state() (ready int, finished bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready, p.finished, p.err
}
