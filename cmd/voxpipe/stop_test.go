package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/urfave/cli/v2"

	"voxpipe/session"
	"voxpipe/store/claim"
	"voxpipe/store/records"
)

// syncBuffer is a log sink safe for the shutdown handler's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A run that does not stop after the signal is ended by force, with the signal's exit code,
// once the grace period is over.
func TestRunForcedAfterGrace(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		sigs := make(chan os.Signal, 2)
		sd := session.New(context.Background(), sigs, runStages(slog.New(slog.NewTextHandler(&logs, nil))))
		defer sd.Close()
		sent := time.Now()
		sigs <- syscall.SIGTERM
		<-sd.Drained().Done() // the run is asked to stop, and (here) never does
		<-sd.Forced()
		if took := time.Since(sent); took != signalGrace {
			t.Errorf("forced after %v, want the %v grace", took, signalGrace)
		}
		if code := session.ExitCode(sd.Signal()); code != exitSIGTERM {
			t.Errorf("forced exit code %d, want %d", code, exitSIGTERM)
		}
		if l := logs.String(); !strings.Contains(l, "stopping: removing temporaries") || !strings.Contains(l, "did not stop in time") {
			t.Errorf("log:\n%s", l)
		}
	})
}

// A second signal ends a run at once, with the first signal's exit code.
func TestRunForcedBySecondSignal(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		sigs := make(chan os.Signal, 2)
		sd := session.New(context.Background(), sigs, runStages(slog.New(slog.NewTextHandler(&logs, nil))))
		defer sd.Close()
		sigs <- syscall.SIGINT
		<-sd.Drained().Done()
		sent := time.Now()
		sigs <- syscall.SIGTERM
		<-sd.Forced()
		if took := time.Since(sent); took != 0 {
			t.Errorf("forced %v after the second signal, want at once", took)
		}
		if code := session.ExitCode(sd.Signal()); code != exitSIGINT {
			t.Errorf("exit code %d, want %d (the first signal's)", code, exitSIGINT)
		}
		if l := logs.String(); !strings.Contains(l, "exiting at once") {
			t.Errorf("log:\n%s", l)
		}
	})
}

// A watch finishes its volumes in flight for --grace, then abandons them, and is ended by
// force signalGrace later if even that does not end the work.
func TestWatchStages(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		const grace = 30 * time.Second
		sigs := make(chan os.Signal, 2)
		sd := session.New(context.Background(), sigs, watchStages(grace, slog.New(slog.NewTextHandler(&logs, nil))))
		defer sd.Close()
		sent := time.Now()
		sigs <- syscall.SIGTERM
		<-sd.Drained().Done()
		if sd.Aborted().Err() != nil {
			t.Fatal("volumes in flight abandoned at the first signal")
		}
		<-sd.Aborted().Done()
		if took := time.Since(sent); took != grace {
			t.Errorf("abandoned %v after the signal, want the grace, %v", took, grace)
		}
		<-sd.Forced()
		if took := time.Since(sent); took != grace+signalGrace {
			t.Errorf("forced %v after the signal, want %v", took, grace+signalGrace)
		}
		l := logs.String()
		if !strings.Contains(l, "no new volumes") || !strings.Contains(l, "abandoning the volumes in flight") || !strings.Contains(l, "signal=terminated") {
			t.Errorf("log:\n%s", l)
		}
	})
}

// A forced stop releases the claims, closes the records and returns the signal's exit code,
// with no message.
func TestForcedStop(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	claims, err := claim.NewManager(out, claim.Options{RunID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := records.Create(out, "r")
	if err != nil {
		t.Fatal(err)
	}
	mask := filepath.Join(out, "a_mask.nii.gz")
	if _, err := claims.Acquire(mask); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(out, ".a_mask.nii.gz.tmp-1")
	if err := os.WriteFile(tmp, []byte("part"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = forcedStop(claims, rec, syscall.SIGINT)
	var ec cli.ExitCoder
	if !errors.As(err, &ec) || ec.ExitCode() != exitSIGINT || ec.Error() != "" {
		t.Fatalf("forcedStop: %v, want an exit code %d with no message", err, exitSIGINT)
	}
	if len(claims.Held()) != 0 {
		t.Errorf("claims still held: %d", len(claims.Held()))
	}
	if _, err := os.Stat(claim.Path(mask)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("claim file left: %v", err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("temporary left: %v", err)
	}
}

// closers close last added first, and not at all after a forced stop.
func TestClosers(t *testing.T) {
	t.Parallel()
	var order []int
	var c closers
	c.add(func() { order = append(order, 1) })
	c.add(func() { order = append(order, 2) })
	c.close()
	if len(order) != 2 || order[0] != 2 || order[1] != 1 {
		t.Errorf("closed in order %v, want [2 1]", order)
	}
	order = nil
	f := closers{forced: true}
	f.add(func() { order = append(order, 1) })
	f.close()
	if len(order) != 0 {
		t.Errorf("forced: closed %v, want none", order)
	}
}
