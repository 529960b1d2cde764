package pipeline

import (
	"context"
	"log/slog"
	"math"

	"voxpipe/engine/engine"
	"voxpipe/internal/hostmem"
	"voxpipe/io/nifti"
)

// memory is the run's host memory: the pools of input and mask buffers, and the budget that
// bounds them (budget.go: what each volume reserves, admit).
type memory struct {
	budget        *hostmem.Budget // nil: no Workers.MaxMemory
	inputs, masks *hostmem.Pool[*hostmem.Buffer]
	readThreads   int // Config.readThreads: whether a gzipped volume needs inflate scratch
	log           *slog.Logger
}

// newMemory makes the run's pools, their buffers allocated from the first engine (hostAlloc;
// with none, reading alone, from hostmem.MapAlloc). Each reader and each engine holds at most
// one input volume; each engine and each writer at most one mask. With these pools full,
// nothing more is ever allocated. A batch of fewer volumes than that never uses more than one
// buffer per volume.
func newMemory(cfg Config, log *slog.Logger) *memory {
	alloc := hostmem.AllocFunc(hostmem.MapAlloc)
	if len(cfg.Engines) > 0 {
		alloc = hostAlloc(cfg.Engines[0])
	}
	batch := max(1, cfg.jobCount())
	return &memory{
		budget:      hostmem.NewBudget(cfg.Workers.MaxMemory),
		inputs:      hostmem.NewPool(newBuffers(alloc, min(cfg.Workers.Readers+len(cfg.Engines), batch), inputHeadroom)...),
		masks:       hostmem.NewPool(newBuffers(alloc, min(len(cfg.Engines)+cfg.Workers.Writers, batch), 0)...),
		readThreads: cfg.readThreads(),
		log:         log,
	}
}

// freeAll frees every pool buffer, in parallel (hostmem.FreeAll).
func (m *memory) freeAll() {
	if err := hostmem.FreeAll(m.inputs, m.masks); err != nil {
		m.log.Warn("free host buffer", "err", err)
	}
}

// prewarmMask sizes a mask buffer for the first volume while that volume is being read: the
// engine's page-locked memory for a large mask takes a while (docs/perf.md), which would
// otherwise delay its segmentation. The producer hands the header it read for that volume to
// first (nothing when the first job is not to be done, or comes from a Source). The buffer
// goes back to the pool at once (a one-volume run has exactly one); failures are left to the
// segment stage, which sizes the buffer again.
func (m *memory) prewarmMask(ctx context.Context, first <-chan *nifti.Header) {
	var hdr *nifti.Header
	select {
	case hdr = <-first:
	case <-ctx.Done():
	}
	if hdr == nil {
		return
	}
	voxels := int64(hdr.NX()) * int64(hdr.NY()) * int64(hdr.NZ())
	if voxels <= 0 || voxels > math.MaxInt32*int64(8) {
		return
	}
	buf, err := m.masks.Get(ctx)
	if err != nil {
		return
	}
	// Back through the budget: a reader that started waiting for memory meanwhile (its trim
	// missed this buffer, held here) has it freed, or it would wait for it forever.
	defer m.putBack(m.masks, buf)
	if !m.budget.TryAcquire(voxels) {
		return // under a tight budget: left to the volume's own reservation
	}
	before := buf.Allocated()
	_ = buf.Ensure(int(voxels))
	m.budget.Release(voxels - int64(buf.Allocated()-before))
}

// inputHeadroom is the headroom of input buffers: a NIfTI header (348 or 540 bytes, then 4)
// and extensions of up to ~64 KiB, so that a gzipped file can be inflated into the buffer
// whole, its header landing in front of the voxels (hostmem.Buffer.WithPrefix).
const inputHeadroom = 64 << 10

// hostAlloc is where eng's host buffers come from: its page-locked memory when it needs it
// (engine.HostAllocator), so that readers decode straight into memory the GPU can copy from;
// otherwise memory outside the Go heap (hostmem.MapAlloc).
func hostAlloc(eng engine.Engine) hostmem.AllocFunc {
	if a, ok := eng.(engine.HostAllocator); ok {
		return func(n int) (hostmem.Block, error) { return a.AllocHost(n) }
	}
	return hostmem.MapAlloc
}

// newBuffers returns n empty buffers allocating from alloc with headroom bytes before them.
func newBuffers(alloc hostmem.AllocFunc, n, headroom int) []*hostmem.Buffer {
	bufs := make([]*hostmem.Buffer, n)
	for i := range bufs {
		bufs[i] = hostmem.NewBuffer(alloc, headroom)
	}
	return bufs
}

// dropModel frees the model's view and gives its memory back to the budget.
func (m *memory) dropModel(w *work) {
	if w.prep.model == nil {
		return
	}
	w.prep.model, w.prep.modelMask = nil, nil
	m.budget.Release(w.prep.modelBytes)
	w.prep.modelBytes = 0
}
