package hostmem

import (
	"context"
	"errors"
	"slices"
	"testing"
	"unsafe"
)

// A pool hands out the items it was made with, no more: Get waits for one to come back, or
// fails when its context ends; Drain takes the idle ones.
func TestPool(t *testing.T) {
	t.Parallel()
	p := NewPool(1, 2)
	if p.Cap() != 2 {
		t.Fatalf("Cap %d, want 2", p.Cap())
	}
	a, err := p.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Get(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Get from an empty pool, context done: %v", err)
	}
	p.Put(a)
	if got := p.Drain(); !slices.Equal(got, []int{a}) {
		t.Errorf("Drain: %v, want [%d]", got, a)
	}
	if got := p.Drain(); len(got) != 0 {
		t.Errorf("second Drain: %v", got)
	}
}

// countingAlloc hands out Go memory and counts the blocks alive.
type countingAlloc struct {
	live, allocs int
	fail         error
}

type countedBlock struct {
	b []byte
	a *countingAlloc
}

func (c *countedBlock) Bytes() []byte { return c.b }
func (c *countedBlock) Free() error {
	c.a.live--
	return nil
}

func (a *countingAlloc) alloc(n int) (Block, error) {
	if a.fail != nil {
		return nil, a.fail
	}
	a.live++
	a.allocs++
	return &countedBlock{make([]byte, n), a}, nil
}

// A buffer grows to the largest size asked, keeps its memory for smaller ones, keeps its
// headroom in front of its bytes, and frees its block.
func TestBufferGrowsAndFrees(t *testing.T) {
	t.Parallel()
	var a countingAlloc
	b := NewBuffer(a.alloc, 16)
	if err := b.Ensure(100); err != nil {
		t.Fatal(err)
	}
	if len(b.Bytes()) != 100 || b.Allocated() != 116 || a.live != 1 {
		t.Fatalf("Ensure(100): %d bytes, %d allocated, %d blocks", len(b.Bytes()), b.Allocated(), a.live)
	}
	b.Bytes()[0] = 7
	if err := b.Ensure(40); err != nil || len(b.Bytes()) != 40 || a.allocs != 1 || b.Bytes()[0] != 7 {
		t.Errorf("Ensure(40) after 100: %v, %d bytes, %d allocations", err, len(b.Bytes()), a.allocs)
	}
	if p := b.WithPrefix(16); len(p) != 56 || &p[16] != &b.Bytes()[0] {
		t.Errorf("WithPrefix(16): %d bytes, not ending on the buffer's", len(p))
	}
	if b.WithPrefix(17) != nil || b.WithPrefix(-1) != nil {
		t.Error("a prefix beyond the headroom was given")
	}
	if err := b.Ensure(200); err != nil || a.live != 1 || a.allocs != 2 || b.Allocated() != 216 {
		t.Errorf("Ensure(200): %v, %d live of %d blocks, %d allocated", err, a.live, a.allocs, b.Allocated())
	}
	if got := b.Int16s(100); len(got) != 100 || &b.Bytes()[0] != (*byte)(unsafe.Pointer(&got[0])) {
		t.Error("Int16s does not view the buffer")
	}
	if err := b.Free(); err != nil || a.live != 0 || b.Allocated() != 0 {
		t.Errorf("Free: %v, %d blocks live, %d allocated", err, a.live, b.Allocated())
	}
	a.fail = errors.New("no memory")
	if err := b.Ensure(1); !errors.Is(err, a.fail) {
		t.Errorf("Ensure with a failing allocator: %v", err)
	}
}

// FreeAll frees every idle buffer of the pools and leaves them empty; MapAlloc's blocks free
// once.
func TestFreeAll(t *testing.T) {
	t.Parallel()
	var bufs []*Buffer
	for range 3 {
		b := NewBuffer(MapAlloc, 8)
		if err := b.Ensure(5 << 20); err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
	}
	p, q := NewPool(bufs[0], bufs[1]), NewPool(bufs[2])
	if err := FreeAll(p, q); err != nil {
		t.Fatal(err)
	}
	for i, b := range bufs {
		if b.Allocated() != 0 {
			t.Errorf("buffer %d still holds %d bytes", i, b.Allocated())
		}
	}
	if n := len(p.Drain()) + len(q.Drain()); n != 0 {
		t.Errorf("%d buffers left in the pools", n)
	}
	blk, err := MapAlloc(10)
	if err != nil || len(blk.Bytes()) != 10 {
		t.Fatalf("MapAlloc(10): %v", err)
	}
	if err := blk.Free(); err != nil {
		t.Fatal(err)
	}
	if err := blk.Free(); err != nil {
		t.Errorf("second Free: %v", err)
	}
}
