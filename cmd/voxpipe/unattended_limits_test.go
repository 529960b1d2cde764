package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"voxpipe/internal/gzbomb"
	"voxpipe/internal/testexec"
	"voxpipe/io/nifti"
	"voxpipe/store/records"
	"voxpipe/telemetry/timing"
)

// Unattended runs at their limits: gzip bombs, full disks, huge headers, SIGTERM mid-slab.

// A 4 MB .nii.gz whose stream inflates to 4 GiB more than its header implies, its trailer
// consistent, fails alone, quickly, in little memory.
func TestRunGzipBombFailsAlone(t *testing.T) {
	t.Parallel()
	bin := testBinary(t)
	modelPath, _ := testModel(t)
	in := smallVolumes(t, 2, "nii.gz")
	plain := filepath.Join(t.TempDir(), "v.nii")
	h := &nifti.Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: nifti.Int16, BitPix: 16,
		Dim: [8]int64{3, 64, 64, 64, 1, 1, 1, 1}, PixDim: [8]float64{1, 1, 1, 1}, SclSlope: 1, Magic: "n+1"}
	if err := nifti.Write(plain, h, make([]byte, 2*64*64*64), nifti.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	prefix, _ := os.ReadFile(plain)
	bomb := gzbomb.Zeros(prefix, 4096)
	os.WriteFile(filepath.Join(in, "bomb.nii.gz"), bomb, 0o644)
	out := t.TempDir()
	// One reader: the volume gets both cores, so the parallel inflate takes it.
	assertFailsAlone(t, out, "r", "bomb", "more than",
		measuredCmd(t, bin, "run", "-q", "--engine", "cpu", "--model", modelPath, "--readers", "1", "--run-id", "r", in, "-o", out))
}

// assertFailsAlone runs cmd (a run with id over the two phantoms of smallVolumes and a hostile
// volume bad, into out) and checks that bad alone failed, its error containing errFrag, and
// that the process stayed below 400 MiB.
func assertFailsAlone(t *testing.T, out, id, bad, errFrag string, cmd *measured) {
	t.Helper()
	start := time.Now()
	if b, _ := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != exitFailed {
		t.Fatalf("exit %d, want %d\n%s", cmd.ProcessState.ExitCode(), exitFailed, b)
	}
	rss := cmd.peakRSS(t)
	t.Logf("%s: run took %v, peak RSS %d KiB", bad, time.Since(start), rss)
	s := statusByVolume(runSummary(t, out, id))
	if s[bad].Status != timing.StatusFailed || !strings.Contains(s[bad].Error, errFrag) {
		t.Errorf("%s: %s %q", bad, s[bad].Status, s[bad].Error)
	}
	if s["phantom_000"].Status != timing.StatusOK || s["phantom_001"].Status != timing.StatusOK {
		t.Errorf("the other volumes: %v %v", s["phantom_000"].Status, s["phantom_001"].Status)
	}
	if rss > 400<<10 {
		t.Errorf("peak RSS %d KiB", rss)
	}
}

// A file system too small for the estimated masks gets a warning before the work.
func TestRunWarnsWhenTheDiskLooksFull(t *testing.T) {
	t.Parallel()
	bin := testBinary(t)
	modelPath, _ := testModel(t)
	dir := t.TempDir()
	genRun(t, "--out", dir, "--dims", "64x64x48", "--count", "2", "--seed", "1")
	small := t.TempDir()
	if err := syscall.Mount("tmpfs", small, "tmpfs", 0, "size=64k"); err != nil {
		t.Skip("cannot mount a small tmpfs here:", err)
	}
	defer syscall.Unmount(small, 0)
	cmd := testexec.Cmd(t, bin, "run", "--log-format", "json", "--engine", "cpu", "--model", modelPath, filepath.Join(dir, "volumes"), "-o", small)
	b, _ := cmd.CombinedOutput()
	if !strings.Contains(string(b), "may be too full") {
		t.Errorf("no disk-space warning:\n%s", b)
	}
	// The warning comes before any volume is done.
	if i, j := strings.Index(string(b), "may be too full"), strings.Index(string(b), "volume done"); j >= 0 && j < i {
		t.Errorf("warning after the work:\n%s", b)
	}
}

// A header that declares far more than the budget (a sparse file: nothing stored) fails alone,
// before anything is allocated; the process stays small.
func TestRunSparseHugeHeaderFailsAlone(t *testing.T) {
	t.Parallel()
	bin := testBinary(t)
	modelPath, _ := testModel(t)
	in := smallVolumes(t, 2, "nii.gz")
	// sparse writes a 1x1x1 volume, then declares n^3 in its header (NIfTI-1 dim[1..3] at byte
	// 42) and extends the file with a hole to the size that declares.
	sparse := func(name string, dt nifti.DataType, bitpix int16, n int64) {
		h := &nifti.Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: dt, BitPix: bitpix,
			Dim: [8]int64{3, 1, 1, 1, 1, 1, 1, 1}, PixDim: [8]float64{1, 1, 1, 1}, SclSlope: 1, Magic: "n+1"}
		p := filepath.Join(in, name)
		if err := nifti.Write(p, h, make([]byte, bitpix/8), nifti.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var dims [6]byte
		for i := range 3 {
			binary.LittleEndian.PutUint16(dims[2*i:], uint16(n))
		}
		f.WriteAt(dims[:], 42)
		if err := f.Truncate(352 + n*n*n*int64(bitpix/8)); err != nil {
			t.Fatal(err)
		}
	}
	sparse("huge.nii", nifti.Int16, 16, 1024) // 2 GiB of int16 + 1 GiB of mask
	out := t.TempDir()
	assertFailsAlone(t, out, "r", "huge", "--max-memory",
		measuredCmd(t, bin, "run", "-q", "--engine", "cpu", "--model", modelPath, "--max-memory", "1G", "--run-id", "r", in, "-o", out))

	// The default budget (half the memory) refuses a header that needs ~80 GiB.
	total, err := usableMemory()
	if err != nil || total/2 >= 80<<30 {
		t.Skipf("this machine's memory (%d bytes) admits 80 GiB", total)
	}
	os.Remove(filepath.Join(in, "huge.nii"))
	sparse("huger.nii", nifti.Float32, 32, 2048) // 32 GiB of float32 + 8 GiB of mask...
	cmd := testexec.Cmd(t, bin, "run", "-q", "--engine", "cpu", "--model", modelPath, "--run-id", "r2", in, "-o", out)
	if b, err := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != exitFailed {
		t.Fatalf("default budget: exit %v\n%s", err, b)
	}
	if s := statusByVolume(runSummary(t, out, "r2"))["huger"]; s.Status != timing.StatusFailed || !strings.Contains(s.Error, "budget") {
		t.Errorf("huger: %s %q", s.Status, s.Error)
	}
}

// After SIGTERM the process exits with 143 within 2 s, leaving no temporaries or claims, even
// while the CPU engine is in the middle of a long slab.
func TestRunSIGTERMWithinTwoSeconds(t *testing.T) {
	t.Parallel()
	bin := testBinary(t)
	dir := t.TempDir()
	// Enough volumes that the run is still working when the signal comes on a fast machine (two
	// were done within the half second on CI's).
	genRun(t, "--out", dir, "--dims", "160x160x64", "--count", "8", "--seed", "2")
	out := filepath.Join(dir, "out")
	cmd := testexec.Cmd(t, bin, "run", "-q", "--workers", "1", "--slab", "64", "--run-id", "r", filepath.Join(dir, "volumes"), "-o", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the first volume is claimed and being segmented.
	waitForFile(t, cmd, &stderr, filepath.Join(out, ".*.claim"))
	time.Sleep(100 * time.Millisecond)
	sent := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	took := time.Since(sent)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitSIGTERM {
		t.Fatalf("exit %v, want %d\n%s", err, exitSIGTERM, stderr.String())
	}
	if took > 2*time.Second {
		t.Errorf("exited %v after SIGTERM, want within 2 s", took)
	}
	assertNoTemps(t, out)
	if c, _ := filepath.Glob(filepath.Join(out, ".*.claim*")); len(c) > 0 {
		t.Errorf("claims left: %v", c)
	}
	if _, err := timing.ReadSummaries(filepath.Join(records.RunDir(out, "r"), records.SummaryName)); err != nil {
		t.Errorf("summary.csv: %v", err)
	}
}

func statusByVolume(s []timing.Summary) map[string]timing.Summary {
	m := map[string]timing.Summary{}
	for _, r := range s {
		m[r.Volume] = r
	}
	return m
}

// waitForFile waits up to two minutes for a file matching pattern, while cmd runs.
func waitForFile(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer, pattern string) {
	t.Helper()
	found := poll(time.Now().Add(2*time.Minute), func() bool {
		m, _ := filepath.Glob(pattern)
		return len(m) > 0
	})
	if !found {
		cmd.Process.Kill()
		t.Fatalf("no %s after 2 minutes:\n%s", pattern, stderr.String())
	}
}
