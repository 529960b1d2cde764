// Package testexec runs subprocesses from tests under a deadline, so that no test can hang
// on a child that never ends: the child is killed at the test's deadline (less a margin, so
// the failure is reported rather than the whole binary panicking) or after Limit, whichever
// comes first.
package testexec

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Limit bounds a subprocess of a test that has no deadline of its own (go test -timeout 0).
const Limit = 5 * time.Minute

// margin is left before the test binary's deadline for the test to report the failure.
const margin = 20 * time.Second

// waitDelay bounds how long Wait waits for the child's pipes to close after it was killed
// (a grandchild holding them must not hang the test either).
const waitDelay = 5 * time.Second

// Cmd is exec.Command under the test's deadline: the process is killed when it passes
// it. The context is cancelled when the test ends.
func Cmd(t testing.TB, name string, args ...string) *exec.Cmd {
	t.Helper()
	return CmdWithin(t, Limit, name, args...)
}

// CmdWithin is Cmd with a bound of its own: at most d, and never past the test's
// deadline.
func CmdWithin(t testing.TB, d time.Duration, name string, args ...string) *exec.Cmd {
	t.Helper()
	ctx, cancel := Context(t, d)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = waitDelay
	return cmd
}

// Context ends after d, or before the test's deadline, whichever comes first.
func Context(t testing.TB, d time.Duration) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(d)
	if td, ok := deadlineOf(t); ok && td.Add(-margin).Before(deadline) {
		deadline = td.Add(-margin)
	}
	return context.WithDeadline(context.Background(), deadline)
}

func deadlineOf(t testing.TB) (time.Time, bool) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}

// RequireToolsEnv, set to 1 (CI sets it), makes a missing external tool fail the tests that
// use it instead of skipping them.
const RequireToolsEnv = "VOXPIPE_REQUIRE_TOOLS"

// Tool returns the path of an external tool the test runs (an encoder, a validator). Where it
// is not installed the test skips, naming the Debian packages that have it, or fails where
// RequireToolsEnv is 1.
func Tool(t testing.TB, name, debian string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(RequireToolsEnv) == "1" {
			t.Fatalf("%s is not installed (Debian: %s)", name, debian)
		}
		t.Skipf("%s is not installed (Debian: %s)", name, debian)
	}
	return p
}
