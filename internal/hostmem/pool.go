package hostmem

import "context"

// Pool is a bounded pool: a channel pre-filled with every item there will ever be. Get blocks
// until an item is free, so the number of items alive never depends on how much work there is.
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

// Drain takes every idle item out of the pool (all of them, once every user is done).
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
