package pipeline

import (
	"context"
	"errors"
	"fmt"

	"voxpipe/internal/hostmem"
	"voxpipe/io/nifti"
)

// ErrMemoryBudget fails a volume whose host buffers alone would exceed Config.MaxMemory.
var ErrMemoryBudget = errors.New("pipeline: volume needs more host memory than the budget (--max-memory)")

// The run's host buffers are bounded by a hostmem.Budget of Config.MaxMemory bytes (nil: no
// bound): the capacity of every pool buffer, idle or in use, plus what admitted volumes have
// reserved and not yet allocated.
//
// A volume is admitted by its reader once its header is known and before anything is sized
// for it: it reserves the growth of its input buffer, a whole mask and the inflate's scratch.
// A volume that needs more than the whole budget fails alone (ErrMemoryBudget). One that must
// wait frees its own input buffer first and has the idle pool buffers freed, so waiting readers
// hold nothing, and buffers given back while someone waits are freed too: admitted volumes
// never wait on the budget, so they always finish and free what the waiters need. Waiters are
// served in order, so a large volume is not starved by small ones.

// volumeNeeds is what a volume's buffers take: its input buffer (with headroom), its mask, the
// memory a gzipped file is inflated into when it cannot be inflated straight into the input
// buffer, and the model's view of it when it is reoriented or resampled (prepare.go). files
// are the input's files (work.src.files: the data file last), p its plan (work.prep.plan).
// A DICOM series (its header is the one dcm2niix would write) takes its input buffer and mask,
// and as scratch the compressed frames its read threads hold (admit): it is read, deflated
// files inflated and compressed frames decoded, straight into the input buffer and widened
// there (decodeDICOM).
func (m *memory) volumeNeeds(h *nifti.Header, files []string, p *gridPlan) (in, mask, scratch, prep int64) {
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
	if gz && m.readThreads > 1 && !direct && volumes <= 2 {
		// the inflated stream, header and all; a header ReadHeader returned always has a
		// Layout (were it not, Open fails the volume right after admission)
		if l, err := nifti.LayoutOf(h); err == nil {
			scratch = l.End()
		}
	}
	return in, mask, scratch, prep
}

// admit reserves the memory volume w needs before its reader sizes anything for it (see
// budget). w.mem.in is the input buffer the reader took from the pool.
func (m *memory) admit(ctx context.Context, w *work) error {
	b := m.budget
	if b == nil {
		return nil
	}
	in, mask, scratch, prep := m.volumeNeeds(w.src.hdr, w.src.files, w.prep.plan)
	if w.job.Series != nil { // compressed frames, one per read thread at most (dicom.ReadRaw)
		scratch = w.job.Series.DecodeScratch(m.readThreads)
	}
	if need := in + mask + scratch + prep; need > b.Limit() {
		return fmt.Errorf("read %s: %w: its buffers need %s (input %s, mask %s, inflate or decode %s, model's view %s), the budget is %s",
			w.job.Input, ErrMemoryBudget, gib(need), gib(in), gib(mask), gib(scratch), gib(prep), gib(b.Limit()))
	}
	growth := max(0, in-int64(w.mem.in.Allocated())) + mask + scratch + prep
	if b.TryAcquire(growth) {
		w.mem.reserved, w.mem.scratch = growth, scratch
		return nil
	}
	full := in + mask + scratch + prep
	makeRoom := func() {
		m.freeBuffer(w.mem.in)
		m.trimIdle()
	}
	if err := b.Wait(ctx, full, makeRoom); err != nil {
		return context.Cause(ctx)
	}
	w.mem.reserved, w.mem.scratch = full, scratch
	return nil
}

// grow makes buf hold n bytes; under a budget, its growth is drawn from w's reservation.
func (m *memory) grow(w *work, buf *hostmem.Buffer, n int) error {
	before := buf.Allocated()
	err := buf.Ensure(n)
	if m.budget != nil {
		w.mem.reserved -= int64(buf.Allocated() - before)
	}
	return err
}

// releaseScratch gives back the inflate's scratch once the reader is closed.
func (m *memory) releaseScratch(w *work) {
	if m.budget == nil || w.mem.scratch == 0 {
		return
	}
	w.mem.reserved -= w.mem.scratch
	m.budget.Release(w.mem.scratch)
	w.mem.scratch = 0
}

// releaseReservation gives back what w reserved and has not allocated.
func (m *memory) releaseReservation(w *work) {
	if m.budget == nil {
		return
	}
	m.budget.Release(w.mem.reserved)
	w.mem.reserved, w.mem.scratch = 0, 0
}

// freeBuffer frees buf's memory and gives it back to the budget.
func (m *memory) freeBuffer(buf *hostmem.Buffer) {
	if err := m.budget.Free(buf); err != nil {
		m.log.Warn("free host buffer", "err", err)
	}
}

// trimIdle frees the buffers idle in the pools, for a volume waiting for memory.
func (m *memory) trimIdle() {
	if err := m.budget.Trim(m.inputs, m.masks); err != nil {
		m.log.Warn("free host buffer", "err", err)
	}
}

// putBack returns buf to its pool, freeing it first when a volume waits for memory.
func (m *memory) putBack(p *hostmem.Pool[*hostmem.Buffer], buf *hostmem.Buffer) {
	if err := m.budget.Put(p, buf); err != nil {
		m.log.Warn("free host buffer", "err", err)
	}
}

func gib(n int64) string {
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}
