package session

import (
	"context"
	"os"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// notes records the stage callbacks of a Shutdown.
type notes struct {
	mu       sync.Mutex
	draining []os.Signal
	aborting []os.Signal
}

func (n *notes) stages(grace, hard time.Duration) Stages {
	return Stages{Grace: grace, Hard: hard,
		Draining: func(s os.Signal) { n.mu.Lock(); n.draining = append(n.draining, s); n.mu.Unlock() },
		Aborting: func(s os.Signal) { n.mu.Lock(); n.aborting = append(n.aborting, s); n.mu.Unlock() },
	}
}

func (n *notes) get() (draining, aborting []os.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]os.Signal(nil), n.draining...), append([]os.Signal(nil), n.aborting...)
}

func done(ctx context.Context) bool { return ctx.Err() != nil }

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// The first signal drains and nothing more; a second one aborts at once, and the stop is
// forced Hard later.
func TestFirstDrainsSecondAborts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n notes
		sigs := make(chan os.Signal, 2)
		s := New(context.Background(), sigs, n.stages(time.Minute, 2*time.Second))
		defer s.Close()
		synctest.Wait()
		if done(s.Drained()) || s.Signal() != nil {
			t.Fatal("drained before any signal")
		}

		sigs <- syscall.SIGTERM
		synctest.Wait()
		if !done(s.Drained()) || done(s.Aborted()) || s.WasAborted() {
			t.Fatalf("after one signal: drained %v aborted %v", done(s.Drained()), done(s.Aborted()))
		}
		if s.Signal() != syscall.SIGTERM {
			t.Errorf("Signal() = %v, want SIGTERM", s.Signal())
		}
		time.Sleep(30 * time.Second) // within the grace: still only drained
		synctest.Wait()
		if done(s.Aborted()) {
			t.Fatal("aborted within the grace without a second signal")
		}

		start := time.Now()
		sigs <- syscall.SIGINT
		synctest.Wait()
		if !done(s.Aborted()) || !s.WasAborted() || closed(s.Forced()) {
			t.Fatalf("after a second signal: aborted %v, forced %v", done(s.Aborted()), closed(s.Forced()))
		}
		<-s.Forced()
		if took := time.Since(start); took != 2*time.Second {
			t.Errorf("forced %v after the abort, want Hard = 2s", took)
		}
		if s.Signal() != syscall.SIGTERM {
			t.Errorf("Signal() = %v after a second one, want the first, SIGTERM", s.Signal())
		}
		dr, ab := n.get()
		if len(dr) != 1 || dr[0] != syscall.SIGTERM || len(ab) != 1 || ab[0] != syscall.SIGINT {
			t.Errorf("Draining got %v, Aborting got %v; want [SIGTERM], [SIGINT]", dr, ab)
		}
	})
}

// Without a second signal the abort comes Grace after the first, with a nil signal.
func TestGraceRunsOut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n notes
		sigs := make(chan os.Signal, 2)
		s := New(context.Background(), sigs, n.stages(1500*time.Millisecond, 0))
		defer s.Close()
		start := time.Now()
		sigs <- syscall.SIGINT
		<-s.Aborted().Done()
		if took := time.Since(start); took != 1500*time.Millisecond {
			t.Errorf("aborted %v after the signal, want the grace, 1.5s", took)
		}
		<-s.Forced()
		if took := time.Since(start); took != 1500*time.Millisecond {
			t.Errorf("forced %v after the signal, want at the abort (Hard 0)", took)
		}
		dr, ab := n.get()
		if len(dr) != 1 || dr[0] != syscall.SIGINT || len(ab) != 1 || ab[0] != nil {
			t.Errorf("Draining got %v, Aborting got %v; want [SIGINT], [<nil>]", dr, ab)
		}
	})
}

// Close before any signal ends the handler: the contexts are cancelled (the work is over),
// but no stage was reached and later signals are not read.
func TestCloseBeforeSignal(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n notes
		sigs := make(chan os.Signal, 2)
		s := New(context.Background(), sigs, n.stages(time.Second, time.Second))
		s.Close()
		if !done(s.Drained()) || !done(s.Aborted()) {
			t.Error("contexts not cancelled by Close")
		}
		sigs <- syscall.SIGTERM
		time.Sleep(time.Hour)
		synctest.Wait()
		if s.Signal() != nil || s.WasAborted() || closed(s.Forced()) {
			t.Errorf("after Close: signal %v, aborted %v, forced %v", s.Signal(), s.WasAborted(), closed(s.Forced()))
		}
		if dr, ab := n.get(); len(dr)+len(ab) > 0 {
			t.Errorf("callbacks after Close: %v %v", dr, ab)
		}
		s.Close() // twice is fine
	})
}

// Close while draining (the work finished within the grace) stops the timer: no abort, no
// forced stop later.
func TestCloseWhileDraining(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n notes
		sigs := make(chan os.Signal, 2)
		s := New(context.Background(), sigs, n.stages(time.Second, time.Second))
		sigs <- syscall.SIGTERM
		synctest.Wait()
		s.Close()
		time.Sleep(time.Hour)
		synctest.Wait()
		if s.WasAborted() || closed(s.Forced()) {
			t.Errorf("after Close: aborted %v, forced %v", s.WasAborted(), closed(s.Forced()))
		}
		if _, ab := n.get(); len(ab) > 0 {
			t.Errorf("Aborting called after Close: %v", ab)
		}
	})
}

// Drained and Aborted follow the parent.
func TestParentCancels(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		s := New(parent, make(chan os.Signal), Stages{Grace: time.Second})
		defer s.Close()
		cancel()
		if !done(s.Drained()) || !done(s.Aborted()) {
			t.Error("parent's cancel not passed on")
		}
		if s.Signal() != nil || s.WasAborted() {
			t.Error("a stage reached without a signal")
		}
	})
}

// Wait returns when the work does, or when the stop is forced while the work hangs.
func TestWait(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sigs := make(chan os.Signal, 2)
		s := New(context.Background(), sigs, Stages{Grace: time.Second, Hard: 300 * time.Millisecond})
		defer s.Close()
		ran := false
		if s.Wait(func() { ran = true }) || !ran {
			t.Fatalf("Wait on work that returns: forced, or work not run (ran %v)", ran)
		}
		hang := make(chan struct{})
		defer close(hang)
		start := time.Now()
		sigs <- syscall.SIGTERM
		if !s.Wait(func() { <-hang }) {
			t.Fatal("Wait on hung work: not forced")
		}
		if took := time.Since(start); took != 1300*time.Millisecond {
			t.Errorf("forced after %v, want Grace+Hard = 1.3s", took)
		}
	})
}

func TestBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		if !Bounded(time.Second, func() { time.Sleep(999 * time.Millisecond) }) {
			t.Error("work within the limit reported late")
		}
		hang := make(chan struct{})
		defer close(hang)
		start := time.Now()
		if Bounded(300*time.Millisecond, func() { <-hang }) {
			t.Error("hung work reported done")
		}
		if took := time.Since(start); took != 300*time.Millisecond {
			t.Errorf("gave up after %v, want 300ms", took)
		}
	})
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	for sig, want := range map[os.Signal]int{syscall.SIGINT: 130, syscall.SIGTERM: 143, nil: 143} {
		if got := ExitCode(sig); got != want {
			t.Errorf("ExitCode(%v) = %d, want %d", sig, got, want)
		}
	}
}
