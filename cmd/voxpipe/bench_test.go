package main

import (
	"bytes"
	"flag"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"voxpipe/engine/cpu"
	"voxpipe/engine/engine"

	"github.com/urfave/cli/v2"

	"voxpipe/model"
	"voxpipe/telemetry/timing"
)

func TestBenchCPU(t *testing.T) {
	out := t.TempDir()
	modelPath, _ := testModel(t)
	app := newApp()
	var stdout bytes.Buffer
	app.Writer = &stdout
	args := []string{"voxpipe", "bench", "-q", "--engine", "cpu", "--model", modelPath, "--dims", "24x20x12",
		"--runs", "3", "--warmup", "1", "--file-runs", "1", "--slab", "5", "-o", out}
	if err := app.Run(mustOrder(t, app.App, args)); err != nil {
		t.Fatal(err)
	}
	line := stdout.String()
	for _, want := range []string{"bench 24x20x12 cpu slab 5 n=3", "pinned-in to mask-out", "run file-to-file"} {
		if !strings.Contains(line, want) {
			t.Errorf("summary line lacks %q: %s", want, line)
		}
	}
	summary, err := timing.ReadSummaries(filepath.Join(out, "summary.csv"))
	if err != nil || len(summary) != 3 {
		t.Fatalf("summary.csv: %d rows, %v", len(summary), err)
	}
	rows, err := timing.ReadRows(filepath.Join(out, "timings.csv"))
	if err != nil {
		t.Fatal(err)
	}
	segments := 0
	for _, r := range rows {
		if r.Stage == "segment" && r.Slab >= 0 {
			segments++
		}
	}
	if segments != 3*3 { // 12 slices in slabs of 5: 3 slabs, 3 runs
		t.Errorf("%d per-slab segment rows, want 9", segments)
	}
}

func TestHiddenCopyFraction(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	events := []engine.Event{
		{Stage: "h2d", Start: 0, Duration: 10 * ms},          // hidden 0..5 behind nothing, 5..10 behind kernels 0
		{Stage: "kernels", Start: 5 * ms, Duration: 20 * ms}, //
		{Stage: "d2h", Start: 20 * ms, Duration: 10 * ms},    // 20..25 hidden
	}
	if got, want := hiddenCopyFraction(events), 10.0/20.0; got != want {
		t.Errorf("hidden fraction %v, want %v", got, want)
	}
	// The fp16 engine's kernels of slabs k and k+1 run on two streams and overlap: a copy under
	// both is hidden once (summing per-kernel overlaps, as bench did, gave 13 of 13 ms here).
	overlapping := []engine.Event{
		{Stage: "kernels", Slab: 0, Start: 0, Duration: 10 * ms},
		{Stage: "kernels", Slab: 1, Start: 5 * ms, Duration: 10 * ms},
		{Stage: "h2d", Slab: 2, Start: 5 * ms, Duration: 5 * ms},  // under both kernels: 5 hidden
		{Stage: "d2h", Slab: 0, Start: 12 * ms, Duration: 8 * ms}, // 12..15 hidden
	}
	if got, want := hiddenCopyFraction(overlapping), 8.0/13.0; got != want {
		t.Errorf("overlapping kernels: hidden fraction %v, want %v", got, want)
	}
	if hiddenCopyFraction(nil) != 0 {
		t.Error("no copies: want 0")
	}
}

func TestBenchReadOnly(t *testing.T) {
	app := newApp()
	var stdout bytes.Buffer
	app.Writer = &stdout
	args := []string{"voxpipe", "bench", "--read-only", "../../fixtures/volumes", "--readers", "3", "-o", t.TempDir()}
	if err := app.Run(mustOrder(t, app.App, args)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "4 volumes, 3 readers") {
		t.Errorf("read-only summary: %s", stdout.String())
	}
	args = []string{"voxpipe", "bench", "--read-only", "../../fixtures", "-o", t.TempDir()}
	if err := app.Run(mustOrder(t, app.App, args)); err == nil {
		t.Error("a folder without volumes gave no error")
	}
}

// benchCLI runs `voxpipe bench ARGS...` in process (captureRun).
func benchCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return captureRun(t, append([]string{"bench"}, args...)...)
}

// fakeGPU stands for a GPU engine: bench's defaults only ask whether the engine is the CPU one.
type fakeGPU struct{ engine.Engine }

func (fakeGPU) Name() string { return "cuda:0" }

func TestBenchSettingsFor(t *testing.T) {
	t.Parallel()
	var cmd *cli.Command
	for _, c := range newCommands() {
		if c.Name == "bench" {
			cmd = c
		}
	}
	parse := func(args ...string) *cli.Context {
		t.Helper()
		set := flag.NewFlagSet("bench", flag.ContinueOnError)
		for _, f := range cmd.Flags {
			if err := f.Apply(set); err != nil {
				t.Fatal(err)
			}
		}
		if err := set.Parse(args); err != nil {
			t.Fatal(err)
		}
		return cli.NewContext(newApp().App, set, nil)
	}
	cpu := cpu.New(model.RandomModel(8, 4, 7), 1)
	defer cpu.Close()
	gpu := fakeGPU{}

	if got := benchSettingsFor(parse(), gpu); got != (benchSettings{"512x512x1000", 10, 2, 3}) {
		t.Errorf("GPU defaults %+v, want 512x512x1000, 10 runs, 2 warmups, 3 file runs as before", got)
	}
	if got := benchSettingsFor(parse(), cpu); got != (benchSettings{"128x128x64", 3, 1, 1}) {
		t.Errorf("CPU defaults %+v, want 128x128x64, 3 runs, 1 warmup, 1 file run", got)
	}
	explicit := []string{"--dims", "40x30x20", "--runs", "5", "--warmup", "0", "--file-runs", "2"}
	for _, eng := range []engine.Engine{cpu, gpu} {
		if got := benchSettingsFor(parse(explicit...), eng); got != (benchSettings{"40x30x20", 5, 0, 2}) {
			t.Errorf("%s: explicit flags gave %+v", eng.Name(), got)
		}
	}
	// Flags not given keep the engine's defaults beside those given.
	if got := benchSettingsFor(parse("--dims", "512x512x1000"), cpu); got != (benchSettings{"512x512x1000", 3, 1, 1}) {
		t.Errorf("CPU with --dims alone: %+v", got)
	}
}

// Without --dims the CPU engine times the small default volume.
func TestBenchCPUDefaultDims(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	modelPath, _ := testModel(t)
	code, stdout, stderr := benchCLI(t, "--engine", "cpu", "--model", modelPath,
		"--runs", "1", "--warmup", "0", "--file-runs", "0", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := "bench 128x128x64 cpu slab 64 n=1:"; !strings.Contains(stdout, want) {
		t.Errorf("stdout lacks %q:\n%s", want, stdout)
	}
	summary, err := timing.ReadSummaries(filepath.Join(out, "summary.csv"))
	if err != nil || len(summary) != 1 || summary[0].Dims != "128x128x64" {
		t.Fatalf("summary.csv: %+v, %v", summary, err)
	}
}

// One line per engine run on stderr (explicit --dims kept, the CPU engine's default runs), none
// with --quiet.
func TestBenchProgressLines(t *testing.T) {
	t.Parallel()
	modelPath, _ := testModel(t)
	args := []string{"--engine", "cpu", "--model", modelPath, "--dims", "16x12x8", "--slab", "4"}
	code, stdout, stderr := benchCLI(t, append(args, "-o", t.TempDir())...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"bench 16x12x8 cpu slab 4 n=3:", "run file-to-file"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if n := strings.Count(stdout, "file run "); n != 1 {
		t.Errorf("%d file runs, want the CPU default 1:\n%s", n, stdout)
	}
	patterns := []string{
		`^bench: warmup 1/1: [0-9.]+ ms$`,
		`^bench: run 1/3: [0-9.]+ ms \(engine runs: about [0-9.]+ s left\)$`,
		`^bench: run 2/3: [0-9.]+ ms \(engine runs: about [0-9.]+ s left\)$`,
		`^bench: run 3/3: [0-9.]+ ms$`,
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != len(patterns) {
		t.Fatalf("stderr has %d lines, want %d:\n%s", len(lines), len(patterns), stderr)
	}
	for i, p := range patterns {
		if !regexp.MustCompile(p).MatchString(lines[i]) {
			t.Errorf("stderr line %d %q does not match %s", i+1, lines[i], p)
		}
	}

	code, stdout, stderr = benchCLI(t, append(args, "-q", "--runs", "2", "--file-runs", "0", "-o", t.TempDir())...)
	if code != 0 || stderr != "" || !strings.Contains(stdout, "n=2:") {
		t.Errorf("--quiet: exit %d, stderr %q, stdout %q", code, stderr, stdout)
	}
}

func TestBenchUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--runs", "0"}, {"--warmup", "-1"}, {"--slab", "0"}, {"--dims", "12x"}} {
		code, _, stderr := benchCLI(t, append([]string{"--engine", "cpu", "-o", t.TempDir()}, args...)...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, stderr)
		}
	}
}

// mustOrder is flagsFirst for arguments a test knows to be valid.
func mustOrder(t *testing.T, app *cli.App, args []string) []string {
	t.Helper()
	out, err := flagsFirst(app, args)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
