//go:build cuda

package cuda

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"voxpipe/engine"
	"voxpipe/engine/cuda/kernels/pinned"
)

// pinnedBuffer is host memory from AllocHost: mapped and faulted in at once, page-locked as soon
// as the engine's context exists (registerAside), or by Segment (pinFor).
type pinnedBuffer struct {
	e    *cudaEngine
	p    unsafe.Pointer
	n    int
	once sync.Once
	done bool // freed

	// Set by whoever took the buffer off the pending list (registerList), before it closes
	// regDone; read after regDone.
	registered bool
	regErr     error
	regDone    chan struct{}
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
		if i < 0 { // registerList has taken it: once it is done, undo it
			<-b.regDone
			err = b.regErr
			if b.registered {
				// Aside, like the page-locking: the engine's thread may be busy, or gone
				// after a failed open (the context lives while buffers do: stopIfIdle).
				err = e.withContext(func() error { return pinned.Unregister(b.p) })
			}
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
	p, err := pinned.MapTouched(bytes)
	if err != nil {
		e.mu.Lock()
		e.liveHost--
		e.stopIfIdle()
		e.mu.Unlock()
		return nil, fmt.Errorf("cuda: %s: %w", e.name, err)
	}
	b := &pinnedBuffer{e: e, p: p, n: bytes, regDone: make(chan struct{})}
	e.pendMu.Lock()
	e.pending = append(e.pending, b)
	e.pendMu.Unlock()
	go e.registerAside()
	return b, nil
}

// registerAside page-locks the buffers AllocHost has queued on an OS thread of its own, with the
// engine's context current there too, as soon as that context exists: page-locking the first
// volume's buffers (~0.8 GB at 512x512x1000) then overlaps the engine's kernel and weight
// loading and the read, instead of delaying the first upload (docs/perf.md). Segment waits for
// it (pinFor). Nothing to report: Free returns a buffer's page-locking error.
func (e *cudaEngine) registerAside() {
	<-e.ctxMade
	if e.ctx == (cu.CUContext{}) {
		return // no context: the engine failed to open and will not copy
	}
	// On failure the buffers stay queued for Segment (pinFor).
	_ = e.withContext(func() error { e.registerPending(); return nil })
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

// registerPending page-locks the buffers AllocHost has queued, on a thread where the engine's
// context is current. A failure leaves that buffer pageable: copies from it still work, slower;
// Free reports the error. (With several GPUs the pipeline allocates through the first engine;
// another engine that segments a volume before the first has page-locked its buffer copies it as
// pageable memory, correct but slower.)
func (e *cudaEngine) registerPending() {
	e.pendMu.Lock()
	list := e.pending
	e.pending = nil
	e.registering = append(e.registering, list...)
	e.pendMu.Unlock()
	e.registerList(list)
}

// registerList page-locks the buffers taken off the pending list into e.registering (a context
// current on the calling thread) and marks each done.
func (e *cudaEngine) registerList(list []*pinnedBuffer) {
	for _, b := range list {
		b.regErr = pinned.Register(b.p, b.n)
		b.registered = b.regErr == nil
		e.pendMu.Lock()
		e.registering = slices.DeleteFunc(e.registering, func(x *pinnedBuffer) bool { return x == b })
		e.pendMu.Unlock()
		close(b.regDone)
	}
}

// pinFor makes sure that the buffers holding host memory [p, p+n) are page-locked, or have
// failed to be, before a copy from them (on the engine's thread): it page-locks those still
// queued and waits for those being page-locked aside (registerAside). Other queued buffers are
// left to registerAside.
func (e *cudaEngine) pinFor(p unsafe.Pointer, n int) {
	lo, hi := uintptr(p), uintptr(p)+uintptr(n)
	holds := func(b *pinnedBuffer) bool {
		blo, bhi := uintptr(b.p), uintptr(b.p)+uintptr(b.n)
		return blo < hi && lo < bhi
	}
	var mine []*pinnedBuffer
	var wait []chan struct{}
	e.pendMu.Lock()
	for _, b := range e.registering {
		if holds(b) {
			wait = append(wait, b.regDone)
		}
	}
	e.pending = slices.DeleteFunc(e.pending, func(b *pinnedBuffer) bool {
		if holds(b) {
			mine = append(mine, b)
			return true
		}
		return false
	})
	e.registering = append(e.registering, mine...)
	e.pendMu.Unlock()
	e.registerList(mine)
	for _, c := range wait {
		<-c
	}
}
