package hostmem

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// Block is host memory from an AllocFunc; Bytes stays valid until Free. engine.HostBuffer has
// the same methods, so an engine's page-locked buffers are Blocks.
type Block interface {
	Bytes() []byte
	Free() error
}

// AllocFunc allocates a Block of n bytes: MapAlloc, or an engine's page-locked memory.
type AllocFunc func(n int) (Block, error)

// Buffer is a reusable byte buffer that grows to the largest size it has been asked for. Its
// memory comes from its AllocFunc (nil: the Go heap). A buffer keeps headroom bytes before
// its bytes, so that a file whose header precedes its data can be read into it whole, the
// header landing in front (WithPrefix). A Buffer is used by one goroutine at a time.
type Buffer struct {
	alloc    AllocFunc
	block    Block // nil: Go memory, or nothing allocated
	headroom int
	all      []byte // the allocation: headroom bytes, then bytes
	bytes    []byte
}

// NewBuffer returns an empty buffer that allocates from alloc (nil: the Go heap) with headroom
// bytes before its bytes.
func NewBuffer(alloc AllocFunc, headroom int) *Buffer {
	return &Buffer{alloc: alloc, headroom: headroom}
}

// Ensure makes the buffer at least n bytes long (Bytes then has length n), keeping its memory
// when it is large enough. Contents are not preserved on growth.
func (b *Buffer) Ensure(n int) error {
	if n <= cap(b.bytes) {
		b.bytes = b.bytes[:n]
		return nil
	}
	if err := b.Free(); err != nil {
		return err
	}
	total := b.headroom + n
	if b.alloc == nil {
		b.all = make([]byte, total)
	} else {
		blk, err := b.alloc(total)
		if err != nil {
			return fmt.Errorf("hostmem: allocate %d bytes of host memory: %w", total, err)
		}
		b.block, b.all = blk, blk.Bytes()[:total]
	}
	b.bytes = b.all[b.headroom:total]
	return nil
}

// Bytes is the buffer's memory, as long as the last Ensure asked.
func (b *Buffer) Bytes() []byte { return b.bytes }

// WithPrefix returns the buffer's bytes with the p bytes of headroom before them, or nil when
// the headroom is smaller.
func (b *Buffer) WithPrefix(p int) []byte {
	if p < 0 || p > b.headroom {
		return nil
	}
	return b.all[b.headroom-p : b.headroom+len(b.bytes)]
}

// Allocated is the bytes the buffer holds (headroom included): what a Budget counts of it.
func (b *Buffer) Allocated() int { return len(b.all) }

// Free releases the buffer's memory; the buffer stays usable (Ensure allocates again).
func (b *Buffer) Free() error {
	var err error
	if b.block != nil {
		err = b.block.Free()
	}
	b.block, b.all, b.bytes = nil, nil, nil
	return err
}

// Int16s and Float32s view the buffer's first n samples; the buffer must hold them. Go and
// mapped allocations are at least 8-byte aligned, and so is the start of Bytes when the
// headroom is a multiple of 8.
func (b *Buffer) Int16s(n int) []int16 {
	return unsafe.Slice((*int16)(unsafe.Pointer(unsafe.SliceData(b.bytes))), n)
}

// Float32s: see Int16s.
func (b *Buffer) Float32s(n int) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b.bytes))), n)
}

// FreeAll frees every idle buffer of the pools, in parallel (returning a large buffer's pages
// to the kernel takes milliseconds; for page-locked memory its unregistering may be serialised
// elsewhere, the unmapping is not), once their users are done. The pools are left empty.
func FreeAll(pools ...*Pool[*Buffer]) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, p := range pools {
		for _, b := range p.Drain() {
			wg.Go(func() {
				if err := b.Free(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}
