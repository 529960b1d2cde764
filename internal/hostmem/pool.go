package pipeline

import (
	"context"
	"fmt"
	"unsafe"
	"voxpipe/engine"
)

// Pool is a bounded pool: a channel pre-filled with every item there will ever be. Get blocks
// until an item is free, so the number of buffers alive never depends on the batch size.
type Pool[T any] struct{ free chan T }

// NewPool returns a pool holding items.
func NewPool[T any](items ...T) *Pool[T] {
	p := &Pool[T]{free: make(chan T, len(items))}
	for _, it := range items {
		p.free <- it
	}
	return p
}

// Get takes a free item, waiting for one, or fails when ctx is done.
func (p *Pool[T]) Get(ctx context.Context) (T, error) {
	select {
	case it := <-p.free:
		return it, nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// Cap is the number of items the pool was made with.
func (p *Pool[T]) Cap() int { return cap(p.free) }

// Put returns an item taken with Get.
func (p *Pool[T]) Put(it T) { p.free <- it }

// Drain takes every item back (after all users are done) for cleanup.
func (p *Pool[T]) Drain() []T {
	var all []T
	for {
		select {
		case it := <-p.free:
			all = append(all, it)
		default:
			return all
		}
	}
}

// hostBuffer is a reusable byte buffer that grows to the largest volume it has held. When the
// engine needs page-locked memory (engine.HostAllocator), it is allocated there, so readers
// decode straight into memory the GPU can copy from. Input buffers keep headroom bytes before
// it, so that a gzipped file can be inflated into it whole, its header landing in front of
// the voxels (withPrefix).
type hostBuffer struct {
	alloc    engine.HostAllocator // nil: ordinary Go memory
	pinned   engine.HostBuffer
	headroom int
	all      []byte // the allocation: headroom bytes, then bytes
	bytes    []byte
}

// inputHeadroom is the headroom of input buffers: a NIfTI header (348 or 540 bytes, then 4)
// and extensions of up to ~64 KiB.
const inputHeadroom = 64 << 10

// ensure makes the buffer at least n bytes long, keeping it when it already is. Contents are
// not preserved on growth.
func (b *hostBuffer) ensure(n int) error {
	if n <= cap(b.bytes) {
		b.bytes = b.bytes[:n]
		return nil
	}
	if err := b.free(); err != nil {
		return err
	}
	total := b.headroom + n
	if b.alloc == nil {
		b.all = make([]byte, total)
	} else {
		pb, err := b.alloc.AllocHost(total)
		if err != nil {
			return fmt.Errorf("pipeline: allocate %d bytes of pinned host memory: %w", total, err)
		}
		b.pinned, b.all = pb, pb.Bytes()[:total]
	}
	b.bytes = b.all[b.headroom:total]
	return nil
}

// withPrefix returns the buffer's bytes with the p bytes of headroom before them, or nil when
// the headroom is smaller.
func (b *hostBuffer) withPrefix(p int) []byte {
	if p < 0 || p > b.headroom {
		return nil
	}
	return b.all[b.headroom-p : b.headroom+len(b.bytes)]
}

// capacity is the bytes the buffer has allocated (headroom included).
func (b *hostBuffer) capacity() int { return len(b.all) }

func (b *hostBuffer) free() error {
	var err error
	if b.pinned != nil {
		err = b.pinned.Free()
	}
	b.pinned, b.all, b.bytes = nil, nil, nil
	return err
}

// int16s and float32s view the buffer as samples; the buffer must hold whole samples and is
// aligned (Go and pinned allocations are at least 8-byte aligned).
func (b *hostBuffer) int16s(n int) []int16 {
	return unsafe.Slice((*int16)(unsafe.Pointer(unsafe.SliceData(b.bytes))), n)
}

func (b *hostBuffer) float32s(n int) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b.bytes))), n)
}
