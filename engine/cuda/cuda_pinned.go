//go:build cuda

package cuda

import (
	"fmt"
	"runtime"
	"sync"

	"gorgonia.org/cu"

	"voxpipe/engine/engine"
	"voxpipe/internal/hostmem"
)

// pinnedBuffer is host memory from AllocHost: mapped and faulted in at once, page-locked as soon
// as the engine's context exists (registerAside), or by Segment (PinFor), through the engine's
// hostmem.PinQueue.
type pinnedBuffer struct {
	e    *cudaEngine
	buf  *hostmem.QueuedBuffer
	once sync.Once
	done bool // freed
}

func (b *pinnedBuffer) Bytes() []byte {
	if b.done {
		return nil
	}
	return b.buf.Bytes()
}

// Free unregisters the buffer (if it was page-locked: a buffer still waiting for that only
// leaves the queue) and unmaps it. It returns the page-locking's error if that failed (the
// engine then copied through pageable memory).
func (b *pinnedBuffer) Free() error {
	var err error
	b.once.Do(func() {
		b.done = true
		e := b.e
		// Unpinned aside, like the page-locking: the engine's thread may be busy, or gone after a
		// failed open (the context lives while buffers do: stopIfIdle).
		err = e.pins.Release(b.buf, e.withContext)
		e.mu.Lock()
		e.liveHost--
		e.stopIfIdle()
		e.mu.Unlock()
	})
	return err
}

// AllocHost implements HostAllocator: portable page-locked memory (mmap'd, faulted in on all
// cores, then cuMemHostRegister: faster than cuMemHostAlloc, docs/perf.md), so
// any GPU engine of the process copies from it at full speed. It returns once the memory is
// mapped and faulted in, which needs no context; the page-locking follows on a thread of its own
// as soon as the engine's context exists (registerAside: while the caller fills the buffer, and
// while the engine still loads its kernels and weights), and Segment waits for it, or does it,
// before it copies. The engine's context lives until every buffer is freed, also after Close.
func (e *cudaEngine) AllocHost(bytes int) (engine.HostBuffer, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, engine.ErrEngineClosed
	}
	e.liveHost++
	e.mu.Unlock()
	buf, err := e.pins.Map(bytes)
	if err != nil {
		e.mu.Lock()
		e.liveHost--
		e.stopIfIdle()
		e.mu.Unlock()
		return nil, fmt.Errorf("cuda: %s: %w", e.name, err)
	}
	go e.registerAside()
	return &pinnedBuffer{e: e, buf: buf}, nil
}

// registerAside page-locks the buffers AllocHost has queued on an OS thread of its own, with the
// engine's context current there too, as soon as that context exists: page-locking the first
// volume's buffers (~0.8 GB at 512x512x1000) then overlaps the engine's kernel and weight
// loading and the read, instead of delaying the first upload (docs/perf.md). Segment waits for
// it (PinFor). Nothing to report: Free returns a buffer's page-locking error. (With several GPUs
// the pipeline allocates through the first engine; another engine that segments a volume before
// the first has page-locked its buffer copies it as pageable memory, correct but slower.)
func (e *cudaEngine) registerAside() {
	<-e.ctxMade
	if e.ctx == (cu.CUContext{}) {
		return // no context: the engine failed to open and will not copy
	}
	// On failure the buffers stay queued for Segment (PinFor).
	_ = e.withContext(func() error { e.pins.PinPending(); return nil })
}

// withContext runs f on the calling goroutine, locked to its OS thread, with the engine's context
// current there (besides its own thread), and leaves no context current on that pooled thread.
// The context must exist (ctxMade) and live (a pinned buffer not yet freed keeps it).
func (e *cudaEngine) withContext(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(e.ctx); err != nil {
		return fmt.Errorf("cuda: %s: make the context current: %w", e.name, err)
	}
	err := f()
	_ = cu.SetCurrentContext(cu.CUContext{})
	return err
}
