package pipeline

import (
	"context"
	"fmt"
	"unsafe"

	"voxpipe/segment"
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
// engine needs page-locked memory (segment.HostAllocator), it is allocated there, so readers
// decode straight into memory the GPU can copy from.
type hostBuffer struct {
	alloc  segment.HostAllocator // nil: ordinary Go memory
	pinned segment.HostBuffer
	bytes  []byte
}

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
	if b.alloc == nil {
		b.bytes = make([]byte, n)
		return nil
	}
	pb, err := b.alloc.AllocHost(n)
	if err != nil {
		return fmt.Errorf("pipeline: allocate %d bytes of pinned host memory: %w", n, err)
	}
	b.pinned, b.bytes = pb, pb.Bytes()[:n]
	return nil
}

func (b *hostBuffer) free() error {
	var err error
	if b.pinned != nil {
		err = b.pinned.Free()
	}
	b.pinned, b.bytes = nil, nil
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
