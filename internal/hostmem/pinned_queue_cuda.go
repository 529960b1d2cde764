//go:build cuda

package hostmem

import (
	"slices"
	"sync"
	"unsafe"
)

// PinQueue page-locks host buffers after they are mapped: mapping and faulting pages in needs no
// CUDA context, page-locking does, so a buffer can be filled while the context is still being
// made, and pinned on whichever thread has the context first (the CUDA engine: aside, as soon
// as its context exists, or just before a copy from the buffer, PinFor). The zero value is
// ready to use.
type PinQueue struct {
	mu      sync.Mutex
	pending []*QueuedBuffer // mapped, page-locking not started
	pinning []*QueuedBuffer // taken off pending, page-locking under way
}

// QueuedBuffer is host memory from PinQueue.Map.
type QueuedBuffer struct {
	p unsafe.Pointer
	n int

	// Set by whoever took the buffer off the pending list (pinList), before it closes done; read
	// after done.
	pinned bool
	err    error
	done   chan struct{}
}

// Bytes is the buffer's memory.
func (b *QueuedBuffer) Bytes() []byte { return unsafe.Slice((*byte)(b.p), b.n) }

// Pointer and Len are where the buffer is and its length.
func (b *QueuedBuffer) Pointer() unsafe.Pointer { return b.p }
func (b *QueuedBuffer) Len() int                { return b.n }

// Map maps bytes of memory, faulted in on all cores (MapTouched), and queues it for
// page-locking. It needs no CUDA context.
func (q *PinQueue) Map(bytes int) (*QueuedBuffer, error) {
	p, err := MapTouched(bytes)
	if err != nil {
		return nil, err
	}
	b := &QueuedBuffer{p: p, n: bytes, done: make(chan struct{})}
	q.mu.Lock()
	q.pending = append(q.pending, b)
	q.mu.Unlock()
	return b, nil
}

// PinPending page-locks every queued buffer; a CUDA context must be current on the calling OS
// thread. A failure leaves that buffer pageable: copies from it still work, slower; Release
// reports the error.
func (q *PinQueue) PinPending() {
	q.mu.Lock()
	list := q.pending
	q.pending = nil
	q.pinning = append(q.pinning, list...)
	q.mu.Unlock()
	q.pinList(list)
}

// pinList page-locks buffers taken off the pending list into q.pinning (a context current on the
// calling thread) and marks each done.
func (q *PinQueue) pinList(list []*QueuedBuffer) {
	for _, b := range list {
		b.err = Pin(b.p, b.n)
		b.pinned = b.err == nil
		q.mu.Lock()
		q.pinning = slices.DeleteFunc(q.pinning, func(x *QueuedBuffer) bool { return x == b })
		q.mu.Unlock()
		close(b.done)
	}
}

// PinFor makes sure that the buffers holding host memory [p, p+n) are page-locked, or have
// failed to be, before a copy from them (a CUDA context current on the calling OS thread): it
// page-locks those still queued and waits for those being page-locked elsewhere. Other queued
// buffers are left queued.
func (q *PinQueue) PinFor(p unsafe.Pointer, n int) {
	lo, hi := uintptr(p), uintptr(p)+uintptr(n)
	holds := func(b *QueuedBuffer) bool {
		blo, bhi := uintptr(b.p), uintptr(b.p)+uintptr(b.n)
		return blo < hi && lo < bhi
	}
	var mine []*QueuedBuffer
	var wait []chan struct{}
	q.mu.Lock()
	for _, b := range q.pinning {
		if holds(b) {
			wait = append(wait, b.done)
		}
	}
	q.pending = slices.DeleteFunc(q.pending, func(b *QueuedBuffer) bool {
		if holds(b) {
			mine = append(mine, b)
			return true
		}
		return false
	})
	q.pinning = append(q.pinning, mine...)
	q.mu.Unlock()
	q.pinList(mine)
	for _, c := range wait {
		<-c
	}
}

// Release takes b out of the queue and unmaps it. A buffer still queued only leaves the queue;
// one taken off it is waited for and, if page-locked, unpinned through withContext (which must
// run its function with a CUDA context current). It returns the page-locking's error if that
// failed (copies then went through pageable memory), else the unpinning's or unmapping's.
func (q *PinQueue) Release(b *QueuedBuffer, withContext func(func() error) error) error {
	q.mu.Lock()
	i := slices.Index(q.pending, b)
	if i >= 0 {
		q.pending = slices.Delete(q.pending, i, i+1)
	}
	q.mu.Unlock()
	var err error
	if i < 0 { // pinList has taken it: once it is done, undo it
		<-b.done
		err = b.err
		if b.pinned {
			err = withContext(func() error { return Unpin(b.p) })
		}
	}
	// Unmapping needs no context: off the context's thread, so buffers free in parallel.
	if uerr := UnmapTouched(b.p, b.n); uerr != nil && err == nil {
		err = uerr
	}
	return err
}
