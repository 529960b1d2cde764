package main

// How run and watch stop on SIGINT/SIGTERM: the stages of their session.Shutdown, and the
// clean-up of a stop that had to be forced.

import (
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"voxpipe/io/nifti"
	"voxpipe/session"
	"voxpipe/store/claim"
	"voxpipe/store/records"
)

// Exit codes of an interrupted run, as shells report a death by that signal.
const (
	exitSIGINT  = session.ExitSIGINT
	exitSIGTERM = session.ExitSIGTERM
)

// signalGrace is how long a signalled run may take to stop cleanly before it removes its
// temporaries, releases its claims and exits anyway (a CPU slab, a hung file system); and how
// long a watch may take after it abandoned its volumes in flight.
const signalGrace = 1500 * time.Millisecond

// forceCleanup bounds the clean-up of a run or watch ended by force.
const forceCleanup = 300 * time.Millisecond

// runStages are the stages of a run's shutdown: the first signal cancels the run (it removes
// its temporaries and releases its claims); a second signal, or signalGrace later, forces the
// stop at once.
func runStages(log *slog.Logger) session.Stages {
	return session.Stages{
		Grace: signalGrace,
		Hard:  0,
		Draining: func(first os.Signal) {
			log.Warn("stopping: removing temporaries and releasing claims (signal again to exit at once)", "signal", first.String())
		},
		Aborting: func(second os.Signal) {
			if second != nil {
				log.Error("exiting at once", "signal", second.String())
				return
			}
			log.Error("the run did not stop in time; exiting", "grace", signalGrace.String())
		},
	}
}

// forcedStop ends a run or watch that did not stop in time: it removes the temporaries of its
// claimed volumes, releases the claims and closes the records, and returns the exit code of
// sig (with no message: the log said why). The clean-up is bounded too: a lock held by a
// stopped process or a hung file system must not keep the process alive; main's exit ends
// the work still running.
func forcedStop(claims *claim.Manager, rec *records.Run, sig os.Signal) error {
	session.Bounded(forceCleanup, func() {
		removeClaimed(claims)
		rec.Close()
	})
	return cli.Exit("", session.ExitCode(sig))
}

// removeClaimed removes the temporaries of the volumes this process has claimed and releases
// the claims: what a run stopped by force leaves behind otherwise.
func removeClaimed(m *claim.Manager) {
	for _, c := range m.Held() {
		if tmps, err := filepath.Glob(nifti.TempPattern(c.Mask())); err == nil {
			for _, t := range tmps {
				os.Remove(t)
			}
		}
		c.Release()
	}
}

// closers are what an action closes when it returns, last added first; none when its stop
// was forced: then the process exits, and an engine in a hung slab or a hung file system must
// not keep it alive.
type closers struct {
	fs     []func()
	forced bool
}

func (c *closers) add(f func()) { c.fs = append(c.fs, f) }

func (c *closers) close() {
	if c.forced {
		return
	}
	for i := len(c.fs) - 1; i >= 0; i-- {
		c.fs[i]()
	}
}
