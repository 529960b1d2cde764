package main

// The CLI acceptance suite: the scripts in testdata/script/*.txtar (testscript format) run
// the voxpipe command as a user would and check exit codes, files and the key words of its
// messages. Run it with
//
//	go test ./cmd/voxpipe -run TestScript
//	go test ./cmd/voxpipe -run TestScript/run_rerun_skips   (one script)
//
// Each script has a deadline (scriptLimit from its start, never past the test binary's own):
// every voxpipe it starts, in the foreground or in the background, exits with code 124 and a
// goroutine dump once the deadline has passed, and the harness commands that wait
// (waitfor) give up at it, so no script can hang. A failed script prints its log;
// VOXPIPE_SCRIPT_CONTINUE=1 makes scripts go on after a failed command, to list every failure.
//
// Commands the scripts have besides testscript's own (see the functions below):
//
//	exec voxpipe ARGS...         the voxpipe command (this test binary, run as voxpipe)
//	exitcode N PROG ARGS...      run PROG as exec does and check that it exits with status N
//	waitfor GLOB [TIMEOUT]       wait until a file matches GLOB (default 30s; at most the deadline)
//	deadline DURATION            bring the script's deadline closer: at most DURATION from now
//	                             (for commands that must end at once, e.g. on a FIFO)
//	terminate                    send SIGTERM to the background commands (then: wait)
//	globcount N GLOB             exactly N files match GLOB
//	jsonlines stdout|stderr|FILE every non-empty line is a JSON object
//	mkfifo PATH                  make a named pipe
//	truncate FILE BYTES          cut FILE to BYTES bytes
//	dicomseries [-uid UID] [-number N] [-prefix P] IN.nii[.gz] DIR
//	                             write IN as a DICOM series, one file per slice
//	nii pair IN OUT.hdr          rewrite IN as a NIfTI-1 .hdr/.img pair
//	nii stack OUT IN...          stack 3D volumes of one size into a 4D file
//	nii slope FILE VALUE         rewrite FILE with scl_slope VALUE (NaN, Inf, 0, 2.5...)
//	transcode IN OUT TOOL ARG... every file of IN through a DICOM encoder into OUT

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"voxpipe/internal/dicomtest"
	"voxpipe/internal/testexec"
	"voxpipe/io/nifti"
)

// TestMain lets this test binary run as the voxpipe command of the scripts: testscript puts a
// copy named voxpipe on their PATH, and run as voxpipe it calls run, as main does. Every other
// test of the package runs as before.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"voxpipe": scriptVoxpipe, relayName: relayPeakRSS})
}

const (
	// scriptLimit bounds one script, from its start.
	scriptLimit = time.Minute
	// scriptMargin is left before the test binary's deadline for the failure to be reported.
	scriptMargin = 15 * time.Second
	// deadlineEnv carries a script's deadline (Unix nanoseconds) to the voxpipe it starts.
	deadlineEnv = "VOXPIPE_SCRIPT_DEADLINE"
	// exitDeadline is the exit status of a voxpipe ended by its script's deadline.
	exitDeadline = 124
	// continueEnv, set non-empty, lets a script go on after a failed command, so that one run
	// shows every failure of a script rather than the first.
	continueEnv = "VOXPIPE_SCRIPT_CONTINUE"
)

// scriptVoxpipe is main under the script's deadline: past it, the process dumps its
// goroutines to stderr (where the script's log shows them) and exits with exitDeadline.
func scriptVoxpipe() {
	if v := os.Getenv(deadlineEnv); v != "" {
		ns, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "voxpipe (test): bad %s %q\n", deadlineEnv, v)
			os.Exit(exitDeadline)
		}
		time.AfterFunc(time.Until(time.Unix(0, ns)), func() {
			fmt.Fprintf(os.Stderr, "voxpipe (test): killed at the script's deadline; goroutines:\n")
			pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
			os.Exit(exitDeadline)
		})
	}
	os.Exit(run(os.Args))
}

func TestScript(t *testing.T) {
	t.Parallel()
	testDeadline, hasDeadline := t.Deadline()
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		ContinueOnError:     os.Getenv(continueEnv) != "",
		Setup: func(env *testscript.Env) error {
			deadline := time.Now().Add(scriptLimit)
			if hasDeadline && testDeadline.Add(-scriptMargin).Before(deadline) {
				deadline = testDeadline.Add(-scriptMargin)
			}
			env.Setenv(deadlineEnv, strconv.FormatInt(deadline.UnixNano(), 10))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode":    cmdExitcode,
			"waitfor":     cmdWaitfor,
			"deadline":    cmdDeadline,
			"terminate":   cmdTerminate,
			"globcount":   cmdGlobcount,
			"jsonlines":   cmdJSONLines,
			"mkfifo":      cmdMkfifo,
			"truncate":    cmdTruncate,
			"dicomseries": cmdDicomSeries,
			"nii":         cmdNii,
			"transcode":   cmdTranscode,
		},
	})
}

// scriptDeadline is the deadline of the running script.
func scriptDeadline(ts *testscript.TestScript) time.Time {
	ns, err := strconv.ParseInt(ts.Getenv(deadlineEnv), 10, 64)
	if err != nil {
		ts.Fatalf("no script deadline: %v", err)
	}
	return time.Unix(0, ns)
}

func noNeg(ts *testscript.TestScript, neg bool, name string) {
	if neg {
		ts.Fatalf("unsupported: ! %s", name)
	}
}

// exitcode N PROG ARGS...: runs PROG like exec (its stdout and stderr are then what stdout
// and stderr match) and fails unless it exits with status N.
func cmdExitcode(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "exitcode")
	if len(args) < 2 {
		ts.Fatalf("usage: exitcode N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: %q is no exit status", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		got = ee.ExitCode()
	default:
		ts.Fatalf("%s: %v (want exit status %d)", args[1], err, want)
	}
	ts.Logf("[exit status %d]", got)
	if got == exitDeadline && want != exitDeadline {
		ts.Fatalf("%s passed the script's deadline", args[1])
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// deadline DURATION: the script's deadline becomes at most DURATION from now, for the
// voxpipe commands started from here on.
func cmdDeadline(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "deadline")
	if len(args) != 1 {
		ts.Fatalf("usage: deadline duration")
	}
	d, err := time.ParseDuration(args[0])
	if err != nil || d <= 0 {
		ts.Fatalf("deadline: %q is no positive duration", args[0])
	}
	if dl := time.Now().Add(d); dl.Before(scriptDeadline(ts)) {
		ts.Setenv(deadlineEnv, strconv.FormatInt(dl.UnixNano(), 10))
	}
}

// waitfor GLOB [TIMEOUT]: waits until a file matches GLOB, for at most TIMEOUT (default 30s)
// and never past the script's deadline. It gives up early when background commands were
// started and all of them have exited (a watch that stopped on an error writes nothing more).
func cmdWaitfor(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "waitfor")
	if len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: waitfor glob [timeout]")
	}
	timeout := 30 * time.Second
	if len(args) == 2 {
		d, err := time.ParseDuration(args[1])
		if err != nil {
			ts.Fatalf("waitfor: %v", err)
		}
		timeout = d
	}
	end := time.Now().Add(timeout)
	if dl := scriptDeadline(ts); dl.Before(end) {
		end = dl
	}
	pattern := ts.MkAbs(args[0])
	start := time.Now()
	ended := false
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		m, err := filepath.Glob(pattern)
		if err != nil {
			ts.Fatalf("waitfor: %v", err)
		}
		if len(m) > 0 {
			ts.Logf("waitfor %s: %d file(s) after %.1fs", args[0], len(m), time.Since(start).Seconds())
			return
		}
		if ended {
			ts.Fatalf("waitfor %s: no such file, and the background commands have exited (%.1fs)", args[0], time.Since(start).Seconds())
		}
		if time.Now().After(end) {
			ts.Fatalf("waitfor %s: no such file after %.1fs", args[0], time.Since(start).Seconds())
		}
		<-tick.C
		// Checked before the next look, so that a file written just before the exit is seen.
		ended = backgroundEnded(ts)
	}
}

// backgroundEnded reports whether background commands were started and have all exited
// (testscript reaps each as it exits; signal 0 then reports os.ErrProcessDone).
func backgroundEnded(ts *testscript.TestScript) bool {
	cmds := ts.BackgroundCmds()
	for _, c := range cmds {
		if err := c.Process.Signal(syscall.Signal(0)); !errors.Is(err, os.ErrProcessDone) {
			return false
		}
	}
	return len(cmds) > 0
}

// terminate sends SIGTERM to the background commands started since the last wait; wait then
// collects their output and exit status. (testscript's kill sends only INT or KILL, and its
// stop ends the script.)
func cmdTerminate(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "terminate")
	if len(args) != 0 {
		ts.Fatalf("usage: terminate")
	}
	cmds := ts.BackgroundCmds()
	if len(cmds) == 0 {
		ts.Fatalf("terminate: no background command")
	}
	for _, c := range cmds {
		if err := c.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			ts.Fatalf("terminate: %v", err)
		}
	}
}

// globcount N GLOB: exactly N files match GLOB.
func cmdGlobcount(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "globcount")
	if len(args) != 2 {
		ts.Fatalf("usage: globcount N glob")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("globcount: %q is no count", args[0])
	}
	m, err := filepath.Glob(ts.MkAbs(args[1]))
	if err != nil {
		ts.Fatalf("globcount: %v", err)
	}
	if len(m) != want {
		ts.Fatalf("globcount %s: %d files match, want %d: %q", args[1], len(m), want, m)
	}
}

// jsonlines stdout|stderr|FILE: every non-empty line is a JSON object.
func cmdJSONLines(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "jsonlines")
	if len(args) != 1 {
		ts.Fatalf("usage: jsonlines stdout|stderr|file")
	}
	text := ts.ReadFile(args[0])
	n := 0
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			ts.Fatalf("jsonlines %s: not a JSON object: %q", args[0], line)
		}
		n++
	}
	if n == 0 {
		ts.Fatalf("jsonlines %s: no line", args[0])
	}
}

// dicomseries [-uid UID] [-number N] [-prefix P] IN.nii[.gz] DIR: writes the int16 volume IN
// as a DICOM MR series in DIR: one Explicit VR Little Endian file per slice (P0001.dcm...),
// axial, spaced as IN's voxels, each with its own SOP Instance UID.
func cmdDicomSeries(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "dicomseries")
	fs := flag.NewFlagSet("dicomseries", flag.ContinueOnError)
	uid := fs.String("uid", "1.2.826.0.1.3680043.10.543.1", "SeriesInstanceUID")
	number := fs.Int("number", 7, "SeriesNumber")
	prefix := fs.String("prefix", "IM", "file name prefix")
	var usage bytes.Buffer
	fs.SetOutput(&usage)
	if err := fs.Parse(args); err != nil || fs.NArg() != 2 {
		ts.Fatalf("usage: dicomseries [-uid UID] [-number N] [-prefix P] in.nii[.gz] dir\n%s", usage.String())
	}
	h, data := readNifti(ts, ts.MkAbs(fs.Arg(0)))
	if h.Datatype != nifti.Int16 || h.Dim[0] != 3 {
		ts.Fatalf("dicomseries: %s is not a 3D int16 volume", fs.Arg(0))
	}
	nx, ny, nz := int(h.Dim[1]), int(h.Dim[2]), int(h.Dim[3])
	dir := ts.MkAbs(fs.Arg(1))
	ts.Check(os.MkdirAll(dir, 0o777))
	slice := 2 * nx * ny
	for z := range nz {
		img := dicomtest.Image{
			FullMeta: true,
			IDs: dicomtest.IDs{
				StudyUID: "1.2.826.0.1.3680043.10.543.99", SeriesUID: *uid, SOPUID: fmt.Sprintf("%s.%d", *uid, z+1),
				Number: *number, Instance: z + 1, StudyDate: "20240102", Description: "T1 axial",
				PatientName: "Test^Patient", PatientID: "PID42",
			},
			Geometry: dicomtest.Geometry{
				Rows: ny, Columns: nx, Position: [3]float64{0, 0, float64(z) * h.PixDim[3]}, Orientation: dicomtest.Axial,
				Spacing: [2]float64{h.PixDim[2], h.PixDim[1]}, Thickness: h.PixDim[3],
			},
			Pixels: dicomtest.Pixels{Signed: true, Raw: data[z*slice : (z+1)*slice]},
		}
		name := filepath.Join(dir, fmt.Sprintf("%s%04d.dcm", *prefix, z+1))
		ts.Check(os.WriteFile(name, img.File(), 0o666))
	}
}

// The harness's deadline ends a voxpipe that would run forever (a watch nobody stops): it
// exits with exitDeadline soon after the deadline, its goroutines on stderr.
func TestHarnessDeadlineEndsVoxpipe(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	inbox := filepath.Join(dir, "inbox")
	if err := os.Mkdir(inbox, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := testexec.CmdWithin(t, time.Minute, exe, "watch", "-o", filepath.Join(dir, "out"), inbox)
	cmd.Args[0] = "voxpipe" // testscript.Main runs the command named by argv[0]
	cmd.Env = append(os.Environ(), deadlineEnv+"="+strconv.FormatInt(time.Now().Add(time.Second).UnixNano(), 10))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitDeadline {
		t.Fatalf("watch under a 1s deadline: %v, want exit status %d\n%s", err, exitDeadline, stderr.String())
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %v", d)
	}
	if !strings.Contains(stderr.String(), "deadline") || !strings.Contains(stderr.String(), "goroutine") {
		t.Errorf("stderr does not name the deadline or show the goroutines:\n%s", stderr.String())
	}
}
