// Package session owns the lifetime of a run or a watch: the one handler of the process's
// SIGINT and SIGTERM, and the two-stage stop they ask for. The first signal drains (take no
// new work; a run abandons its volumes in flight), a second signal or the grace's end aborts,
// and a bounded time after the abort the stop is forced: the caller cleans up what it holds
// and returns the signal's exit code, leaving any hung work to the process's exit.
package session

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// Stages are the times and the notes of a shutdown.
type Stages struct {
	Grace time.Duration // from the first signal to the abort, unless a second signal comes first
	Hard  time.Duration // from the abort to the forced stop
	// Draining, when set, is called with the first signal, before Drained is cancelled.
	Draining func(first os.Signal)
	// Aborting, when set, is called before Aborted is cancelled: with the second signal, or
	// with nil when the grace ran out.
	Aborting func(second os.Signal)
}

// Shutdown is the two-stage stop of a run or a watch. Drained is cancelled at the first
// signal, Aborted at the second (or Grace after the first), and Forced is closed Hard after
// the abort. It reads its signals from a channel, so that it runs alike on the process's
// signals (Start) and in tests (New).
type Shutdown struct {
	stages  Stages
	drained context.Context
	aborted context.Context
	drain   context.CancelFunc
	abort   context.CancelFunc
	forced  chan struct{}
	closing chan struct{}
	ended   chan struct{}
	once    sync.Once
	stop    func() // stops relaying the process's signals

	mu      sync.Mutex
	first   os.Signal
	reached bool // the abort stage
}

// New starts the handler on sigs; Close ends it. Drained and Aborted derive from parent.
func New(parent context.Context, sigs <-chan os.Signal, st Stages) *Shutdown {
	s := &Shutdown{stages: st, forced: make(chan struct{}), closing: make(chan struct{}),
		ended: make(chan struct{}), stop: func() {}}
	s.drained, s.drain = context.WithCancel(parent)
	s.aborted, s.abort = context.WithCancel(parent)
	go s.handle(sigs)
	return s
}

// Start is New on the process's SIGINT and SIGTERM, relayed until Close.
func Start(parent context.Context, st Stages) *Shutdown {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	s := New(parent, ch, st)
	s.stop = func() { signal.Stop(ch) }
	return s
}

func (s *Shutdown) handle(sigs <-chan os.Signal) {
	defer close(s.ended)
	first, ok := s.await(sigs, nil)
	if !ok {
		return
	}
	s.mu.Lock()
	s.first = first
	s.mu.Unlock()
	if s.stages.Draining != nil {
		s.stages.Draining(first)
	}
	s.drain()

	grace := time.NewTimer(s.stages.Grace)
	defer grace.Stop()
	second, ok := s.await(sigs, grace.C)
	if !ok {
		return
	}
	s.mu.Lock()
	s.reached = true
	s.mu.Unlock()
	if s.stages.Aborting != nil {
		s.stages.Aborting(second)
	}
	s.abort()

	hard := time.NewTimer(s.stages.Hard)
	defer hard.Stop()
	select {
	case <-hard.C:
		close(s.forced)
	case <-s.closing:
	}
}

// await waits for a signal (returned), or for timeout (nil), or for Close (false).
func (s *Shutdown) await(sigs <-chan os.Signal, timeout <-chan time.Time) (os.Signal, bool) {
	select {
	case sig := <-sigs:
		return sig, true
	case <-timeout:
		return nil, true
	case <-s.closing:
		return nil, false
	}
}

// Drained is cancelled at the first signal.
func (s *Shutdown) Drained() context.Context { return s.drained }

// Aborted is cancelled at the second signal, or Grace after the first.
func (s *Shutdown) Aborted() context.Context { return s.aborted }

// Forced is closed Hard after the abort.
func (s *Shutdown) Forced() <-chan struct{} { return s.forced }

// Signal is the first signal received, or nil.
func (s *Shutdown) Signal() os.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first
}

// WasAborted reports whether the abort stage was reached.
func (s *Shutdown) WasAborted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reached
}

// Wait runs work in a goroutine and waits for it to return, or for the stop to be forced
// (forced: then work may still be running, and the caller should clean up and return).
func (s *Shutdown) Wait(work func()) (forced bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		work()
	}()
	select {
	case <-done:
		return false
	case <-s.forced:
		return true
	}
}

// Close ends the handler, waits for it, and stops relaying the process's signals; later
// signals are not read. The contexts are cancelled.
func (s *Shutdown) Close() {
	s.once.Do(func() {
		close(s.closing)
		s.stop()
	})
	<-s.ended
	s.abort()
	s.drain()
}

// Bounded runs f and waits for it at most limit: the clean-up of a forced stop, which a lock
// held by a stopped process or a hung file system must not keep from ending. It reports
// whether f returned in time.
func Bounded(limit time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// ExitCode is the exit status shells report for a death by sig: 130 for SIGINT, 143 for
// SIGTERM (and any other signal).
func ExitCode(sig os.Signal) int {
	if sig == syscall.SIGINT {
		return ExitSIGINT
	}
	return ExitSIGTERM
}

// Exit codes of a process stopped by a signal.
const (
	ExitSIGINT  = 130
	ExitSIGTERM = 143
)
