package testexec

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A child that would run for a minute is killed at the bound given.
func TestCmdWithinKills(t *testing.T) {
	t.Parallel()
	start := time.Now()
	cmd := CmdWithin(t, 300*time.Millisecond, "sleep", "60")
	err := cmd.Run()
	if err == nil {
		t.Fatal("sleep 60 ended without error")
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v", d)
	}
	if cmd.ProcessState == nil || cmd.ProcessState.Success() {
		t.Errorf("state %v", cmd.ProcessState)
	}
}

func TestContextHonoursTestDeadline(t *testing.T) {
	t.Parallel()
	ctx, cancel := Context(t, time.Hour)
	defer cancel()
	d, ok := ctx.Deadline()
	if !ok {
		t.Fatal("no deadline")
	}
	if td, has := t.Deadline(); has && d.After(td) {
		t.Errorf("context deadline %v after the test's %v", d, td)
	}
	if !has(t) && time.Until(d) > time.Hour {
		t.Errorf("deadline %v beyond the bound", d)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Error("already expired")
	}
}

func has(t *testing.T) bool { _, ok := t.Deadline(); return ok }
