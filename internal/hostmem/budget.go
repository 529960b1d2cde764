package hostmem

import (
	"context"
	"errors"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// Budget bounds the bytes of host memory a set of pooled Buffers holds: the memory of every
// buffer, idle or in use, plus what users have reserved and not yet allocated. Its invariant:
// acquired = sum of the buffers' Allocated + sum of the reservations. Users reserve before
// they size anything (TryAcquire, or Wait), draw their buffers' growth from the reservation,
// and Release what they do not allocate.
//
// A user that must Wait frees what it holds and has the idle buffers freed (the makeRoom step
// of Wait), and while anyone waits, buffers given back are freed too (Put): users holding a
// reservation never wait on the budget, so they always finish and free what the waiters need.
// Waiters are served first in, first out, so a large reservation is not starved by small ones.
//
// A nil *Budget is no bound: it grants everything and frees nothing early.
type Budget struct {
	limit   int64
	sem     *semaphore.Weighted
	waiters atomic.Int32
}

// NewBudget returns a budget of limit bytes, or nil (no bound) when limit is 0 or less.
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		return nil
	}
	return &Budget{limit: limit, sem: semaphore.NewWeighted(limit)}
}

// Limit is the budget's size in bytes (0: no bound).
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// TryAcquire reserves n bytes if they are free now, without waiting.
func (b *Budget) TryAcquire(n int64) bool {
	return b == nil || b.sem.TryAcquire(n)
}

// Wait reserves n bytes, waiting for them: it counts as a waiter from the start (so buffers
// given back meanwhile are freed, Put), calls makeRoom (if not nil) for the caller to free
// what it holds and the idle buffers (Trim), then waits its turn. It fails with ctx.Err() if
// ctx ends first, having reserved nothing.
func (b *Budget) Wait(ctx context.Context, n int64, makeRoom func()) error {
	if b == nil {
		return nil
	}
	b.waiters.Add(1)
	defer b.waiters.Add(-1)
	if makeRoom != nil {
		makeRoom()
	}
	return b.sem.Acquire(ctx, n)
}

// Waiting reports whether someone waits for memory.
func (b *Budget) Waiting() bool { return b != nil && b.waiters.Load() > 0 }

// Release gives back n reserved bytes (nothing when n is 0 or less).
func (b *Budget) Release(n int64) {
	if b != nil && n > 0 {
		b.sem.Release(n)
	}
}

// Free frees buf's memory and gives it back to the budget.
func (b *Budget) Free(buf *Buffer) error {
	n := int64(buf.Allocated())
	err := buf.Free()
	b.Release(n)
	return err
}

// Put returns buf to its pool, freeing it first when someone waits for memory.
func (b *Budget) Put(p *Pool[*Buffer], buf *Buffer) error {
	var err error
	if b.Waiting() {
		err = b.Free(buf)
	}
	p.Put(buf)
	return err
}

// Trim frees the buffers idle in the pools (they stay in their pools, empty), giving their
// memory back to the budget: for a waiter's makeRoom.
func (b *Budget) Trim(pools ...*Pool[*Buffer]) error {
	var errs []error
	for _, p := range pools {
		idle := p.Drain()
		for _, buf := range idle {
			errs = append(errs, b.Free(buf))
		}
		for _, buf := range idle {
			p.Put(buf)
		}
	}
	return errors.Join(errs...)
}
