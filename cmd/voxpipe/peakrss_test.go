package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"voxpipe/internal/testexec"
)

// relayName is this test binary run as a small parent for measuring a child's peak RSS
// (TestMain puts it on PATH).
const relayName = "voxpipe-peakrss"

// measured is a command whose own peak RSS a test reads after it ran. os/exec starts children
// with CLONE_VM, so a child's ru_maxrss begins at the peak RSS of the process that started it:
// a voxpipe started by this test binary reports at least the test binary's own peak (480 MiB
// under the race detector, where a 400 MiB bound failed). It is therefore started through
// relayName, a fresh exec of this binary (a few MiB), which writes the child's rusage.
type measured struct {
	*exec.Cmd
	rssFile string
}

// measuredCmd is testexec.Cmd(t, name, args...) run through the relay; its exit status is
// the child's.
func measuredCmd(t *testing.T, name string, args ...string) *measured {
	t.Helper()
	f := filepath.Join(t.TempDir(), "peak-rss")
	return &measured{testexec.Cmd(t, relayName, append([]string{f, name}, args...)...), f}
}

// peakRSS is the child's peak RSS in KiB, once the command has run.
func (m *measured) peakRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(m.rssFile)
	if err != nil {
		t.Fatalf("%s wrote no peak RSS: %v", relayName, err)
	}
	kib, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return kib
}

// relayPeakRSS is relayName's main: relayName FILE NAME ARGS... runs NAME ARGS... (stdio
// passed through, killed when the relay dies), writes its peak RSS in KiB to FILE and exits
// with its status.
func relayPeakRSS() {
	ctx, cancel := context.WithTimeout(context.Background(), testexec.Limit) // the relay's own parent has the test's deadline
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[2], os.Args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		os.Stderr.WriteString(relayName + ": " + err.Error() + "\n")
		os.Exit(127)
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
	if err := os.WriteFile(os.Args[1], []byte(strconv.FormatInt(rss, 10)), 0o644); err != nil {
		os.Stderr.WriteString(relayName + ": " + err.Error() + "\n")
		os.Exit(127)
	}
	os.Exit(max(cmd.ProcessState.ExitCode(), 0))
}

// TestPeakRSSIsTheChilds: a small child measured through the relay reports its own few MiB,
// not this test binary's peak, which is made large first.
func TestPeakRSSIsTheChilds(t *testing.T) {
	ballast := make([]byte, 300<<20)
	for i := range ballast {
		ballast[i] = 1
	}
	plain := testexec.Cmd(t, "/bin/true")
	if err := plain.Run(); err != nil {
		t.Fatal(err)
	}
	m := measuredCmd(t, "/bin/true")
	if err := m.Run(); err != nil {
		t.Fatal(err)
	}
	inherited := plain.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
	own := m.peakRSS(t)
	t.Logf("/bin/true: %d KiB started here, %d KiB through %s", inherited, own, relayName)
	if own > 100<<10 || own >= inherited {
		t.Errorf("through the relay %d KiB, started directly %d KiB: the relay does not isolate the child", own, inherited)
	}
	_ = ballast[len(ballast)-1]
}
