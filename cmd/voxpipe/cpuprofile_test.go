package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// VOXPIPE_CPU_PROFILE's profile is a gzipped pprof file once stopped; a path that cannot be
// made is said, and nothing else changes. (Not parallel: one CPU profile a process.)
func TestCPUProfile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cpu.prof")
	var stderr bytes.Buffer
	stop := cpuProfile(p, &stderr)
	stop()
	b, err := os.ReadFile(p)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("profile: %d bytes, %v; want a gzipped pprof file", len(b), err)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr: %s", stderr.String())
	}
	stop = cpuProfile(filepath.Join(t.TempDir(), "no", "such", "dir", "cpu.prof"), &stderr)
	stop()
	if !strings.Contains(stderr.String(), "VOXPIPE_CPU_PROFILE") {
		t.Errorf("an unusable path: stderr %q", stderr.String())
	}
	cpuProfile("", &stderr)()
}
