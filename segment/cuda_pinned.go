//go:build cuda

package segment

import (
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"voxpipe/kernels/pinned"
)

// pinnedBuffer is host memory from AllocHost: mapped and faulted in at once, page-locked on the
// engine's thread as soon as it can (registerPending).
type pinnedBuffer struct {
	e    *cudaEngine
	p    unsafe.Pointer
	n    int
	once sync.Once
	done bool // freed

	// Set on the engine's thread by registerPending; read there, or after a call.
	registered bool
	regErr     error
}

func (b *pinnedBuffer) Bytes() []byte {
	if b.done {
		return nil
	}
	return unsafe.Slice((*byte)(b.p), b.n)
}

// Free unregisters the buffer (if it was page-locked: a buffer still waiting for that only
// leaves the queue) and unmaps it. It returns the page-locking's error if that failed (the
// engine then copied through pageable memory).
func (b *pinnedBuffer) Free() error {
	var err error
	b.once.Do(func() {
		b.done = true
		e := b.e
		e.pendMu.Lock()
		i := slices.Index(e.pending, b)
		if i >= 0 {
			e.pending = slices.Delete(e.pending, i, i+1)
		}
		e.pendMu.Unlock()
		if i < 0 { // registerPending has taken it: ask the thread, after it
			err = e.call(func() error {
				if b.registered {
					return pinned.Unregister(b.p)
				}
				return b.regErr
			})
		}
		// Unmapping needs no context: off the engine's thread, so buffers free in parallel.
		if uerr := pinned.Unmap(b.p, b.n); uerr != nil && err == nil {
			err = uerr
		}
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
// mapped and faulted in, which needs no context; the page-locking follows on the engine's thread
// (while the caller fills the buffer), and Segment does any still pending before it copies. The
// engine's context lives until every buffer is freed, also after Close.
func (e *cudaEngine) AllocHost(bytes int) (HostBuffer, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrEngineClosed
	}
	e.liveHost++
	e.mu.Unlock()
	p, err := pinned.MapTouched(bytes)
	if err != nil {
		e.mu.Lock()
		e.liveHost--
		e.stopIfIdle()
		e.mu.Unlock()
		return nil, fmt.Errorf("segment: %s: %w", e.name, err)
	}
	b := &pinnedBuffer{e: e, p: p, n: bytes}
	e.pendMu.Lock()
	e.pending = append(e.pending, b)
	e.pendMu.Unlock()
	go e.call(func() error { e.registerPending(); return nil }) // nothing to report: see Free
	return b, nil
}

// registerPending page-locks the buffers AllocHost has queued (on the thread). A failure leaves
// that buffer pageable: copies from it still work, slower; Free reports the error. (With several
// GPUs the pipeline allocates through the first engine; another engine that segments a volume
// before the first has page-locked its buffer copies it as pageable memory, correct but slower.)
func (e *cudaEngine) registerPending() {
	e.pendMu.Lock()
	list := e.pending
	e.pending = nil
	e.pendMu.Unlock()
	for _, b := range list {
		b.regErr = pinned.Register(b.p, b.n)
		b.registered = b.regErr == nil
	}
}
