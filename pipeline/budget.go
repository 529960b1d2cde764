package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"voxpipe/io/nifti"
)

// ErrMemoryBudget fails a volume whose host buffers alone would exceed Config.MaxMemory.
var ErrMemoryBudget = errors.New("pipeline: volume needs more host memory than the budget (--max-memory)")

// budget bounds the host memory of the run's buffers (Config.MaxMemory): the capacity of every
// pool buffer, idle or in use, plus what admitted volumes have reserved and not yet allocated.
// The invariant: acquired = sum of pool buffer capacities + sum of volumes' reservations.
//
// A volume is admitted by its reader once its header is known and before anything is sized
// for it: it reserves the growth of its input buffer, a whole mask and the inflate's scratch.
// A volume that needs more than the whole budget fails alone (ErrMemoryBudget). One that must
// wait frees its own input buffer first and has the idle pool buffers freed, so waiting readers
// hold nothing, and buffers given back while someone waits are freed too: admitted volumes
// never wait on the budget, so they always finish and free what the waiters need. The
// semaphore is FIFO, so a large volume is not starved by small ones.
type budget struct {
	limit   int64
	sem     *semaphore.Weighted
	waiters atomic.Int32
}

func newBudget(limit int64) *budget {
	if limit <= 0 {
		return nil
	}
	return &budget{limit: limit, sem: semaphore.NewWeighted(limit)}
}

func (b *budget) release(n int64) {
	if b != nil && n > 0 {
		b.sem.Release(n)
	}
}

// volumeNeeds is what a volume's buffers take: its input buffer (with headroom), its mask, the
// memory a gzipped file is inflated into when it cannot be inflated straight into the input
// buffer, and the model's view of it when it is reoriented or resampled (prepare.go). files
// are the input's files (work.files: the data file last), p its plan (work.plan).
// A DICOM series (its header is the one dcm2niix would write) takes its input buffer and mask
// only: it is read, deflated files inflated, straight into the input buffer and widened there
// (decodeDICOM).
func (r *runner) volumeNeeds(h *nifti.Header, files []string, p *gridPlan) (in, mask, scratch, prep int64) {
	prep = p.prepareBytes(h)
	voxels := int64(h.NX()) * int64(h.NY()) * int64(h.NZ())
	sample := int64(4)
	asInt16 := nifti.Int16Exact(h.Datatype)
	if asInt16 {
		sample = 2
	}
	in = voxels*sample + inputHeadroom
	mask = voxels
	volumes := h.Volumes()
	gz := len(files) > 0 && nifti.Gzipped(files[len(files)-1])
	direct := volumes == 1 && !h.Swapped() && engineReads(h.Datatype) // inflated into the input buffer
	if gz && r.cfg.readThreads() > 1 && !direct && volumes <= 2 {
		scratch = h.VoxOffset + volumes*voxels*int64(h.BitPix/8)
	}
	return in, mask, scratch, prep
}

// admit reserves the memory volume w needs before its reader sizes anything for it (see
// budget). w.in is the input buffer the reader took from the pool.
func (r *runner) admit(ctx context.Context, w *work) error {
	b := r.budget
	if b == nil {
		return nil
	}
	in, mask, scratch, prep := r.volumeNeeds(w.hdr, w.files, w.plan)
	if need := in + mask + scratch + prep; need > b.limit {
		return fmt.Errorf("read %s: %w: its buffers need %s (input %s, mask %s, inflate %s, model's view %s), the budget is %s",
			w.job.Input, ErrMemoryBudget, gib(need), gib(in), gib(mask), gib(scratch), gib(prep), gib(b.limit))
	}
	growth := max(0, in-int64(w.in.capacity())) + mask + scratch + prep
	if b.sem.TryAcquire(growth) {
		w.reserved, w.scratch = growth, scratch
		return nil
	}
	b.waiters.Add(1)
	defer b.waiters.Add(-1)
	r.freeBuffer(w.in)
	r.trimIdle()
	full := in + mask + scratch + prep
	if err := b.sem.Acquire(ctx, full); err != nil {
		return context.Cause(ctx)
	}
	w.reserved, w.scratch = full, scratch
	return nil
}

// grow makes buf hold n bytes; under a budget, its growth is drawn from w's reservation.
func (r *runner) grow(w *work, buf *hostBuffer, n int) error {
	before := buf.capacity()
	err := buf.ensure(n)
	if r.budget != nil {
		w.reserved -= int64(buf.capacity() - before)
	}
	return err
}

// releaseScratch gives back the inflate's scratch once the reader is closed.
func (r *runner) releaseScratch(w *work) {
	if r.budget == nil || w.scratch == 0 {
		return
	}
	w.reserved -= w.scratch
	r.budget.release(w.scratch)
	w.scratch = 0
}

// releaseReservation gives back what w reserved and has not allocated.
func (r *runner) releaseReservation(w *work) {
	if r.budget == nil {
		return
	}
	r.budget.release(w.reserved)
	w.reserved, w.scratch = 0, 0
}

// freeBuffer frees buf's memory and gives its capacity back to the budget.
func (r *runner) freeBuffer(buf *hostBuffer) {
	c := int64(buf.capacity())
	if err := buf.free(); err != nil {
		r.log.Warn("free host buffer", "err", err)
	}
	r.budget.release(c)
}

// trimIdle frees the buffers idle in the pools, for a volume waiting for memory.
func (r *runner) trimIdle() {
	for _, p := range []*Pool[*hostBuffer]{r.inputs, r.masks} {
		idle := p.Drain()
		for _, buf := range idle {
			r.freeBuffer(buf)
		}
		for _, buf := range idle {
			p.Put(buf)
		}
	}
}

// putBack returns buf to its pool, freeing it first when a volume waits for memory.
func (r *runner) putBack(p *Pool[*hostBuffer], buf *hostBuffer) {
	if r.budget != nil && r.budget.waiters.Load() > 0 {
		r.freeBuffer(buf)
	}
	p.Put(buf)
}

func gib(n int64) string {
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}
