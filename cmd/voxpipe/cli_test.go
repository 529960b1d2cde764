package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"voxpipe/internal/testexec"
	"voxpipe/io/nifti"
	"voxpipe/store/provenance"
	"voxpipe/telemetry/timing"

	"github.com/urfave/cli/v2"
)

// captureRun runs "voxpipe ARGS..." in process through run, as main does (flags after the
// arguments, exit codes), its stdout and stderr captured in files.
func captureRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	outF, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	errF, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	code = runIO(append([]string{"voxpipe"}, args...), outF, errF)
	outF.Close()
	errF.Close()
	o, _ := os.ReadFile(outF.Name())
	e, _ := os.ReadFile(errF.Name())
	return code, string(o), string(e)
}

// cliRun runs the built voxpipe and returns its exit code, stdout and stderr.
func cliRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := testexec.Cmd(t, testBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

func TestBareCommandAndVersion(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := cliRun(t)
	if code != exitUsage || !strings.Contains(stderr, "USAGE") || stdout != "" {
		t.Errorf("bare voxpipe: exit %d, stdout %q, stderr %q; want 2 and the help on stderr", code, stdout, stderr)
	}
	_, want, _ := cliRun(t, "version")
	if !strings.HasPrefix(want, "voxpipe ") {
		t.Fatalf("voxpipe version printed %q", want)
	}
	for _, flag := range []string{"--version", "-v"} {
		if code, got, _ := cliRun(t, flag); code != 0 || got != want {
			t.Errorf("voxpipe %s: exit %d, %q; want 0 and %q", flag, code, got, want)
		}
	}
}

// A missing required flag is a usage error that names it, after the command's help when the
// command has no argument.
func TestRequiredFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args     []string
		flag     string
		wantHelp bool
	}{
		{[]string{"run"}, "output", true},
		{[]string{"run", "in"}, "output", false},
		{[]string{"watch", "inbox"}, "output", false},
		{[]string{"bench"}, "output", true},
		{[]string{"gen", "--count", "2"}, "out", true},
	} {
		code, stdout, stderr := cliRun(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, `required flag "`+tc.flag+`" not set`) {
			t.Errorf("voxpipe %v: exit %d, stderr %q; want 2 naming --%s", tc.args, code, stderr, tc.flag)
		}
		if help := strings.Contains(stdout, "OPTIONS:"); help != tc.wantHelp {
			t.Errorf("voxpipe %v: help printed %v, want %v:\n%s", tc.args, help, tc.wantHelp, stdout)
		}
	}
	// urfave/cli's own Required fails with an error only its text identifies: requireFlags
	// replaces it.
	for _, c := range newApp().Commands {
		for _, f := range c.Flags {
			if rf, ok := f.(cli.RequiredFlag); ok && rf.IsRequired() {
				t.Errorf("voxpipe %s: flag %s uses cli's Required; use requireFlags", c.Name, f.Names()[0])
			}
		}
	}
}

func TestTypoHints(t *testing.T) {
	t.Parallel()
	code, _, stderr := cliRun(t, "run", "--ovewrite", "in", "-o", "out")
	if code != exitUsage || !strings.Contains(stderr, "did you mean --overwrite?") {
		t.Errorf("mistyped flag: exit %d, %q", code, stderr)
	}
	code, _, stderr = cliRun(t, "rn", "in")
	if code != exitUsage || !strings.Contains(stderr, `Did you mean "run"?`) {
		t.Errorf("mistyped command: exit %d, %q", code, stderr)
	}
	// Flags in the --name=value form and help flags are known.
	if code, _, stderr := cliRun(t, "run", "--slab=0", "in", "-o", "out"); code != exitUsage || !strings.Contains(stderr, "--slab must be at least 1") {
		t.Errorf("--slab=0: exit %d, %q", code, stderr)
	}
	if code, stdout, _ := cliRun(t, "run", "--help"); code != 0 || !strings.Contains(stdout, "--volume") {
		t.Errorf("run --help: exit %d", code)
	}
}

// write4D writes a 3-volume int16 file whose volumes differ.
func write4D(t *testing.T, path string) {
	t.Helper()
	const nx, ny, nz, nt = 12, 10, 8, 3
	h := &nifti.Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: nifti.Int16, BitPix: 16,
		Dim: [8]int64{4, nx, ny, nz, nt, 1, 1, 1}, PixDim: [8]float64{1, 1, 1, 1, 1}, SclSlope: 1, Magic: "n+1"}
	data := make([]byte, 2*nx*ny*nz*nt)
	for i := 0; i < len(data)/2; i++ {
		binary.LittleEndian.PutUint16(data[2*i:], uint16((i*7+i/(nx*ny*nz)*300)%2000))
	}
	if err := nifti.Write(path, h, data, nifti.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// --volume picks a volume of a 4D input; without it a 4D input fails with a hint; the mask
// records the volume, and another volume is a reason to redo it.
func TestRunVolumeOf4D(t *testing.T) {
	t.Parallel()
	model, _ := testModel(t)
	in, out := t.TempDir(), t.TempDir()
	write4D(t, filepath.Join(in, "fmri.nii"))
	if code := run(runArgs(model, in, "-o", out, "--run-id", "none")); code != exitFailed {
		t.Fatalf("4D without --volume: exit %d, want %d", code, exitFailed)
	}
	if s := runSummary(t, out, "none")[0]; s.Status != timing.StatusFailed || !strings.Contains(s.Error, "--volume N") {
		t.Errorf("4D without --volume: %s %q", s.Status, s.Error)
	}
	if code := run(runArgs(model, in, "-o", out, "--volume", "1", "--run-id", "v1")); code != 0 {
		t.Fatalf("--volume 1: exit %d", code)
	}
	_, rec, err := provenance.Read(filepath.Join(out, "fmri_mask.nii.gz"))
	if err != nil || rec.Input.Volume == nil || *rec.Input.Volume != 1 {
		t.Fatalf("provenance of volume 1: %+v %v", rec.Input, err)
	}
	if code := run(runArgs(model, in, "-o", out, "--volume", "2", "--run-id", "v2")); code != 0 {
		t.Fatalf("--volume 2: exit %d", code)
	}
	if s := runSummary(t, out, "v2")[0]; s.Status != timing.StatusOK || !strings.Contains(s.Reason, "volume 1") {
		t.Errorf("another volume: %s %q", s.Status, s.Reason)
	}
	if code := run(runArgs(model, in, "-o", out, "--volume", "-1")); code != exitUsage {
		t.Errorf("--volume -1: exit %d, want %d", code, exitUsage)
	}
	if code := run(runArgs(model, in, "-o", out, "--volume", "3", "--run-id", "v3")); code != exitFailed {
		t.Errorf("--volume past the last: exit %d, want %d", code, exitFailed)
	}
}

// eval --volume compares one volume of 4D label files; without it a 4D file is refused with a
// hint.
func TestEvalVolumeOf4D(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 4
	h := &nifti.Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: nifti.Uint8, BitPix: 8,
		Dim: [8]int64{4, n, n, n, 2, 1, 1, 1}, PixDim: [8]float64{1, 1, 1, 1, 1}, SclSlope: 1, Magic: "n+1"}
	labels := make([]byte, 2*n*n*n)
	for i := n * n * n; i < len(labels); i++ {
		labels[i] = 1 // volume 1 all ones, volume 0 all zeros
	}
	pred, truth := filepath.Join(dir, "p.nii"), filepath.Join(dir, "t.nii")
	nifti.Write(pred, h, labels, nifti.WriteOptions{})
	h3 := *h
	h3.Dim = [8]int64{3, n, n, n, 1, 1, 1, 1}
	nifti.Write(truth, &h3, labels[n*n*n:], nifti.WriteOptions{}) // 3D: all ones
	if code, _, stderr := cliRun(t, "eval", pred, truth); code != exitFailed || !strings.Contains(stderr, "--volume N") {
		t.Errorf("4D without --volume: exit %d, %q", code, stderr)
	}
	code, stdout, stderr := cliRun(t, "eval", "--classes", "2", "--volume", "1", "--min-mean-dice", "1", pred, truth)
	if code != 0 {
		t.Errorf("--volume 1 (identical to the truth): exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, _ := cliRun(t, "eval", "--classes", "2", "--volume", "0", "--min-mean-dice", "0.5", pred, truth); code != exitFailed {
		t.Errorf("--volume 0 (all wrong): exit %d, want %d", code, exitFailed)
	}
}
