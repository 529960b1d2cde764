package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Usage errors exit 2, name the bad flag, and are found before anything is written: the output
// folder is never made for a command line that cannot run.
func TestUsageErrorsWriteNothing(t *testing.T) {
	t.Parallel()
	in := "../../fixtures/volumes/phantom_000.nii.gz"
	for _, tc := range []struct {
		flags []string
		names string // what the message must name
	}{
		{[]string{"--devices", "3"}, "--devices"},
		{[]string{"--devices", "abc"}, "--devices"},
		{[]string{"--engine", "cpu", "--devices", "0"}, "--devices"},
		{[]string{"--workers", "-1"}, "--workers"},
		{[]string{"--progress-interval", "-1s"}, "--progress-interval"},
		{[]string{"--engine", "gpu"}, "--engine"},
		{[]string{"--precision", "fp8"}, "--precision"},
		{[]string{"--model", "/no/such/model.safetensors"}, "--model"},
		{[]string{"--trace", "/no/such/folder/trace.json"}, "--trace"},
		{[]string{"--timings", in}, "--timings"},
		{[]string{"--run-id", "a/b"}, "--run-id"},
		{[]string{"--slab", "0"}, "--slab"},
		{[]string{"--compression", "11"}, "--compression"},
		{[]string{"--mask-name", "x.nii"}, "--mask-name"},
		{[]string{"--max-memory", "lots"}, "--max-memory"},
		{[]string{"--resample", "sometimes"}, "--resample"},
		{[]string{"--volume", "-1"}, "--volume"},
		{[]string{"--shard", "3/2"}, "--shard"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		args := append([]string{"run", in, "-o", out}, tc.flags...)
		code, _, stderr := cliRun(t, args...)
		if code != exitUsage || !strings.Contains(stderr, tc.names) {
			t.Errorf("voxpipe %s: exit %d, stderr %q; want 2 naming %s", strings.Join(tc.flags, " "), code, stderr, tc.names)
		}
		if _, err := os.Lstat(out); err == nil {
			t.Errorf("voxpipe %s: left %s behind", strings.Join(tc.flags, " "), out)
		}
		for _, internal := range []string{"(<nil>)", "WithVolume"} {
			if strings.Contains(stderr, internal) {
				t.Errorf("voxpipe %s: internal name %q in %q", strings.Join(tc.flags, " "), internal, stderr)
			}
		}
	}
	// A run id already recorded is refused before the run writes anything new.
	out := t.TempDir()
	os.MkdirAll(filepath.Join(out, "runs", "used"), 0o755)
	if code, _, stderr := cliRun(t, "run", in, "-o", out, "--run-id", "used"); code != exitUsage || !strings.Contains(stderr, "--run-id") {
		t.Errorf("a used run id: exit %d, %q", code, stderr)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 1 {
		t.Errorf("a used run id left %d entries in the output folder", len(entries))
	}
	// watch: a file given as the inbox names it, without internal names.
	code, _, stderr := cliRun(t, "watch", in, "-o", filepath.Join(t.TempDir(), "w"))
	if code != exitUsage || !strings.Contains(stderr, "not a folder") || strings.Contains(stderr, "<nil>") {
		t.Errorf("watch FILE: exit %d, %q", code, stderr)
	}
}

// Help topics and subcommands that do not exist are usage errors (exit 2, not the report
// gate's 3); a command that only groups subcommands needs one.
func TestUnknownSubcommandsAndHelpTopics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		code    int
		message string
	}{
		{[]string{"model", "inf"}, exitUsage, `Did you mean "info"?`},
		{[]string{"help", "runn"}, exitUsage, `Did you mean "run"?`},
		{[]string{"model"}, exitUsage, "give a subcommand"},
		{[]string{"model", "info"}, 0, ""},
		{[]string{"help", "run"}, 0, ""},
		{[]string{"help"}, 0, ""},
	} {
		code, _, stderr := cliRun(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.message) {
			t.Errorf("voxpipe %s: exit %d, stderr %q; want %d and %q", strings.Join(tc.args, " "), code, stderr, tc.code, tc.message)
		}
	}
}

// The other commands' usage errors exit 2, name the flag, and leave their output folder
// unmade.
func TestOtherCommandsUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args  []string
		names string
	}{
		{[]string{"gen", "--dims", "0x2x3"}, "--dims"},
		{[]string{"gen", "--count", "-1"}, "--count"},
		{[]string{"bench", "--dims", "0x1x1"}, "--dims"},
		{[]string{"bench", "--input", "/no/such/volume.nii"}, "--input"},
		{[]string{"bench", "--devices", "abc"}, "--devices"},
		{[]string{"bench", "--workers", "-2"}, "--workers"},
		{[]string{"bench", "--runs", "0"}, "--runs"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		code, _, stderr := cliRun(t, append(tc.args, "-o", out)...)
		if code != exitUsage || !strings.Contains(stderr, tc.names) {
			t.Errorf("voxpipe %s: exit %d, stderr %q; want 2 naming %s", strings.Join(tc.args, " "), code, stderr, tc.names)
		}
		if _, err := os.Lstat(out); err == nil {
			t.Errorf("voxpipe %s: left %s behind", strings.Join(tc.args, " "), out)
		}
	}
	if code, _, stderr := cliRun(t, "version", "extra"); code != exitUsage {
		t.Errorf("version extra: exit %d, %q", code, stderr)
	}
}

// report names the flag whose input does not exist.
func TestReportNamesMissingInputs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, flag := range []string{"--run", "--baseline"} {
		args := []string{"report", "--run", dir, "--baseline", dir, "-o", filepath.Join(dir, "r")}
		for i := range args {
			if args[i] == flag {
				args[i+1] = filepath.Join(dir, "missing")
			}
		}
		if code, _, stderr := cliRun(t, args...); code != exitUsage || !strings.Contains(stderr, flag+":") {
			t.Errorf("report with a missing %s: exit %d, %q", flag, code, stderr)
		}
	}
}
