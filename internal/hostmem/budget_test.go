package hostmem

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
)

// A nil budget is no bound: it grants everything, frees nothing early, and is never waited on.
func TestNilBudget(t *testing.T) {
	t.Parallel()
	var b *Budget
	if NewBudget(0) != nil || NewBudget(-1) != nil {
		t.Fatal("a budget of 0 or less bytes is not nil")
	}
	if !b.TryAcquire(1<<62) || b.Limit() != 0 || b.Waiting() {
		t.Error("nil budget bounds something")
	}
	called := false
	if err := b.Wait(context.Background(), 1<<62, func() { called = true }); err != nil || called {
		t.Errorf("nil budget: Wait %v, made room %v", err, called)
	}
	b.Release(5)
	buf := NewBuffer(nil, 0)
	buf.Ensure(10)
	p := NewPool(buf)
	p.Get(context.Background())
	if err := b.Put(p, buf); err != nil || buf.Allocated() != 10 {
		t.Errorf("nil budget: Put freed the buffer (%v)", err)
	}
	if err := b.Trim(p); err != nil {
		t.Error(err)
	}
}

// A waiter makes room first, is counted while it waits, gets its bytes once they are released,
// and meanwhile buffers given back are freed and their memory released to it.
func TestBudgetWaiterIsServedByFreedBuffers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(100)
		if b.Limit() != 100 || !b.TryAcquire(60) || b.TryAcquire(41) {
			t.Fatal("TryAcquire does not bound 100 bytes")
		}
		busy, idle := NewBuffer(nil, 0), NewBuffer(nil, 0)
		pool := NewPool(busy, idle)
		pool.Get(context.Background())
		busy.Ensure(60) // a user's buffer, its 60 bytes drawn from its reservation
		got := make(chan error, 1)
		roomMade := false
		go func() {
			got <- b.Wait(context.Background(), 80, func() {
				roomMade = true
				if err := b.Trim(pool); err != nil {
					t.Error(err)
				}
			})
		}()
		synctest.Wait()
		if !roomMade || !b.Waiting() {
			t.Fatalf("waiter: room made %v, counted %v", roomMade, b.Waiting())
		}
		select {
		case err := <-got:
			t.Fatalf("Wait returned (%v) with 60 of 100 bytes taken", err)
		default:
		}
		if err := b.Put(pool, busy); err != nil { // given back while someone waits: freed
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if busy.Allocated() != 0 || b.Waiting() {
			t.Errorf("after the wait: buffer holds %d bytes, waiting %v", busy.Allocated(), b.Waiting())
		}
		if len(pool.Drain()) != 2 {
			t.Error("Put or Trim lost a buffer")
		}
		if b.TryAcquire(21) || !b.TryAcquire(20) {
			t.Error("the waiter's 80 bytes are not counted")
		}
	})
}

// A waiter whose context ends reserves nothing; waiters are served in order, so a large one
// is not passed by a small one.
func TestBudgetWaitCancelAndOrder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(10)
		b.TryAcquire(10)
		ctx, cancel := context.WithCancel(context.Background())
		cancelled := make(chan error, 1)
		go func() { cancelled <- b.Wait(ctx, 5, nil) }()
		synctest.Wait()
		cancel()
		if err := <-cancelled; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Wait: %v", err)
		}
		order := make(chan int64, 2)
		go func() {
			b.Wait(context.Background(), 8, nil)
			order <- 8
		}()
		synctest.Wait()
		go func() {
			b.Wait(context.Background(), 2, nil)
			order <- 2
		}()
		synctest.Wait()
		b.Release(2) // enough for the small one, which must not pass the large one
		synctest.Wait()
		select {
		case n := <-order:
			t.Fatalf("the %d-byte waiter passed the 8-byte one", n)
		default:
		}
		b.Release(6) // 8 free: the large one's turn, and nothing left for the small one
		synctest.Wait()
		if n := len(order); n != 1 || <-order != 8 {
			t.Fatalf("%d waiters served, want the 8-byte one alone", n)
		}
		b.Release(8)
		if n := <-order; n != 2 {
			t.Errorf("served %d, want the 2-byte waiter", n)
		}
	})
}
