package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// reportCLI runs `voxpipe report ARGS... -o DIR` in-process, --run and --baseline naming
// folders of report/testdata, and returns its exit code, stderr and report.md.
func reportCLI(t *testing.T, args ...string) (code int, stderr, md string) {
	t.Helper()
	dir := t.TempDir()
	capture := func(name string) *os.File {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	args = slices.Clone(args)
	for i := 1; i < len(args); i++ {
		if args[i-1] == "--run" || args[i-1] == "--baseline" {
			args[i] = filepath.Join("..", "..", "report", "testdata", args[i])
		}
	}
	outF, errF := capture("stdout"), capture("stderr")
	code = runIO(append([]string{"voxpipe", "report", "-o", filepath.Join(dir, "out")}, args...), outF, errF)
	outF.Close()
	errF.Close()
	e, _ := os.ReadFile(filepath.Join(dir, "stderr"))
	m, _ := os.ReadFile(filepath.Join(dir, "out", "report.md"))
	return code, string(e), string(m)
}

// A and B pair on 4 volumes: below the default --min-volumes 10 the gate is not evaluated
// (exit 0, says so on stderr and in the report); --min-volumes 4 lets it decide.
func TestReportGateMinVolumes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		stderr, md string // substrings; "" checks nothing
	}{
		{"A faster, too few", []string{"--run", "A", "--baseline", "B", "--fail-if-slower", "10"}, 0,
			"voxpipe: gate not evaluated: too few volumes (n=4 < 10): end_to_end p50 A 130.0 ms vs B 350.0 ms",
			"**Gate not evaluated**: too few volumes (n=4 < 10)"},
		{"A slower, too few", []string{"--run", "B", "--baseline", "A", "--fail-if-slower", "10"}, 0,
			"gate not evaluated: too few volumes (n=4 < 10)", "**Gate not evaluated**"},
		{"A slower, --min-volumes 4", []string{"--run", "B", "--baseline", "A", "--fail-if-slower", "10", "--min-volumes", "4"}, 3,
			"gate FAILED: end_to_end p50", "**Gate FAILED**: end_to_end p50"},
		{"A faster, --min-volumes 4", []string{"--run", "A", "--baseline", "B", "--fail-if-slower", "10", "--min-volumes", "4"}, 0,
			"", "**Gate passed**: end_to_end p50"},
		{"gate on service", []string{"--run", "B", "--baseline", "A", "--fail-if-slower", "10", "--min-volumes", "4", "--gate-stage", "service"}, 3,
			"gate FAILED: service p50", "**Gate FAILED**: service p50"},
		// Q waits behind one engine: its turnaround is 123% above P's, its service below.
		{"service passes where turnaround fails", []string{"--run", "Q", "--baseline", "P", "--fail-if-slower", "10", "--min-volumes", "4", "--gate-stage", "service"}, 0,
			"", "**Gate passed**: service p50 A 5600.0 ms vs B 6050.0 ms"},
		{"turnaround of a queued run", []string{"--run", "Q", "--baseline", "P", "--fail-if-slower", "10", "--min-volumes", "4"}, 3,
			"gate FAILED: end_to_end p50 A 13500.0 ms vs B 6050.0 ms", ""},
		{"no gate", []string{"--run", "B", "--baseline", "A"}, 0, "", "too few volumes (< 10)"},
		{"--min-volumes 0", []string{"--run", "A", "--baseline", "B", "--min-volumes", "0"}, 2, "--min-volumes must be at least 1", ""},
		{"--min-volumes not a number", []string{"--run", "A", "--baseline", "B", "--min-volumes", "few"}, 2, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr, md := reportCLI(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			if !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr %q lacks %q", stderr, tc.stderr)
			}
			if !strings.Contains(md, tc.md) {
				t.Errorf("report.md lacks %q:\n%s", tc.md, md)
			}
			if tc.code == 0 && !strings.Contains(tc.name, "too few") && strings.Contains(stderr, "not evaluated") {
				t.Errorf("stderr says the gate was not evaluated: %s", stderr)
			}
		})
	}
}
