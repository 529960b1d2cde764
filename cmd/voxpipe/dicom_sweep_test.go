package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"voxpipe/internal/dicomtest"
	"voxpipe/io/dicom"
)

// sweepSeries writes n axial 16x12 slices of one series (sweepImage: explicit VR little
// endian Part 10 files, or deflated) as dir/IM<k>. It returns the paths.
func sweepSeries(t *testing.T, dir, uid string, n int, deflated bool) []string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for k := range n {
		img := sweepImage(uid, k, 12, 16)
		if deflated {
			img.Syntax = dicomtest.DeflatedExplicitVRLE
		}
		p := filepath.Join(dir, fmt.Sprintf("IM%d", k))
		if err := os.WriteFile(p, img.File(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// sweepImage is slice k of series uid, 2 mm apart (PatientID "PID-0042", StudyDate 20240102,
// description "Doe head"): a smooth image of rows x cols 16-bit pixels.
func sweepImage(uid string, k, rows, cols int) dicomtest.Image {
	px := make([]uint32, rows*cols)
	for i := range px {
		px[i] = uint32(uint16(500 + 300*((i%cols+k)%5) + 40*(i/cols)))
	}
	return dicomtest.Image{
		IDs: dicomtest.IDs{
			StudyUID: "1.2.3", SeriesUID: uid, SOPUID: fmt.Sprintf("%s.%d", uid, k+1), Number: 7, Instance: k + 1,
			StudyDate: "20240102", Description: "Doe head", PatientID: "PID-0042",
		},
		Geometry: dicomtest.Geometry{
			Rows: rows, Columns: cols, Position: [3]float64{-5, 7, float64(10 + 2*k)},
			Orientation: dicomtest.Axial, Spacing: [2]float64{1, 1},
		},
		Pixels: dicomtest.Pixels{Values: px},
	}
}

// TestDICOMSweepBrokenMember: run fails a series whose first or last file is cut short (exit
// 1, the file named), and segments the other series of the run.
func TestDICOMSweepBrokenMember(t *testing.T) {
	for _, broken := range []int{0, 4} {
		dir := t.TempDir()
		a := sweepSeries(t, filepath.Join(dir, "a"), "1.1", 5, false)
		sweepSeries(t, filepath.Join(dir, "b"), "2.2", 5, false)
		b, _ := os.ReadFile(a[broken])
		os.WriteFile(a[broken], b[:len(b)-9], 0o644)
		out := t.TempDir()
		code, _, stderr := captureRun(t, "run", "-q", filepath.Join(dir, "a"), filepath.Join(dir, "b"), "-o", out)
		if code != exitFailed || !strings.Contains(stderr, a[broken]) || !strings.Contains(stderr, "truncated") {
			t.Errorf("file %d cut short: exit %d, want %d naming %s\n%s", broken, code, exitFailed, a[broken], stderr)
		}
		masks, _ := filepath.Glob(filepath.Join(out, "*_mask.nii.gz"))
		if len(masks) != 1 {
			t.Errorf("file %d cut short: masks %v, want the other series' only", broken, masks)
		}
	}
}

// TestDICOMSweepDuplicate: an exact copy of a file under another name is left out (exit 0);
// a different file with the same SOP Instance UID fails the series naming both.
func TestDICOMSweepDuplicate(t *testing.T) {
	dir := t.TempDir()
	a := sweepSeries(t, dir, "1.1", 5, false)
	b, _ := os.ReadFile(a[2])
	os.WriteFile(filepath.Join(dir, "IM2.copy"), b, 0o644)
	if code, _, stderr := captureRun(t, "run", "-q", dir, "-o", t.TempDir()); code != 0 {
		t.Errorf("exact duplicate: exit %d, want 0\n%s", code, stderr)
	}
	if code, _, stderr := captureRun(t, "convert", dir, "-o", t.TempDir()); code != 0 || !strings.Contains(stderr, "IM2.copy") {
		t.Errorf("convert with an exact duplicate: exit %d, want 0 and a note naming it\n%s", code, stderr)
	}
	other := bytes.Clone(b)
	other[len(other)-1] ^= 0xFF // one pixel differs
	os.WriteFile(filepath.Join(dir, "IM2.copy"), other, 0o644)
	code, _, stderr := captureRun(t, "run", "-q", dir, "-o", t.TempDir())
	if code != exitFailed || !strings.Contains(stderr, a[2]) || !strings.Contains(stderr, filepath.Join(dir, "IM2.copy")) {
		t.Errorf("two files with one SOP Instance UID: exit %d, want %d naming both\n%s", code, exitFailed, stderr)
	}
}

// TestDICOMSweepDefaultNamesNoPHI: by default a series' mask, statistics and preview are named
// series_<number>_<ID>, the name logs and records give it; no file name under the output holds
// the PatientID, the StudyDate or the description. A template still asks for fields.
func TestDICOMSweepDefaultNamesNoPHI(t *testing.T) {
	dir := t.TempDir()
	paths := sweepSeries(t, dir, "1.1", 5, false)
	out := t.TempDir()
	code, _, stderr := captureRun(t, "run", "-q", "--statistics", "--preview", dir, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	scan := dicom.ScanFiles(paths, 1)
	name := "series_7_" + scan.Series[0].ID()
	for _, p := range []string{name + "_mask.nii.gz", filepath.Join("previews", name+".png"), filepath.Join("statistics", name+".json")} {
		if _, err := os.Stat(filepath.Join(out, p)); err != nil {
			t.Errorf("%v", err)
		}
	}
	filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		for _, phi := range []string{"PID", "0042", "20240102", "Doe"} {
			if strings.Contains(d.Name(), phi) {
				t.Errorf("%s: patient data in a file name", p)
			}
		}
		return nil
	})
	out = t.TempDir()
	if code, _, stderr := captureRun(t, "run", "-q", "--dicom-name", "%i_%t", dir, "-o", out); code != 0 {
		t.Fatalf("--dicom-name %%i_%%t: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "PID-0042_20240102_mask.nii.gz")); err != nil {
		t.Errorf("an explicit template: %v", err)
	}
}

// TestDICOMSweepVolume: --volume 3 fails a DICOM series (one volume), as it fails a 3D NIfTI
// file; --volume 0 reads it.
func TestDICOMSweepVolume(t *testing.T) {
	dir := t.TempDir()
	sweepSeries(t, dir, "1.1", 5, false)
	if code, _, stderr := captureRun(t, "run", "-q", "--volume", "3", dir, "-o", t.TempDir()); code != exitFailed || !strings.Contains(stderr, "volume 3") {
		t.Errorf("--volume 3: exit %d, want %d\n%s", code, exitFailed, stderr)
	}
	if code, _, stderr := captureRun(t, "run", "-q", "--volume", "0", dir, "-o", t.TempDir()); code != 0 {
		t.Errorf("--volume 0: exit %d, want 0\n%s", code, stderr)
	}
}

// TestDICOMSweepInfo: info describes a folder of NIfTI files (not "0 DICOM series") and a
// single DICOM file, as run accepts one.
func TestDICOMSweepInfo(t *testing.T) {
	fixtures, _ := filepath.Glob("../../fixtures/volumes/*.nii.gz")
	if len(fixtures) < 2 {
		t.Fatal("no fixtures")
	}
	dir := t.TempDir()
	for _, f := range fixtures[:2] {
		b, _ := os.ReadFile(f)
		os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644)
	}
	code, stdout, stderr := captureRun(t, "info", dir)
	if code != 0 || !strings.Contains(stdout, "2 NIfTI volumes") || strings.Contains(stdout, "DICOM series") ||
		!strings.Contains(stdout, filepath.Base(fixtures[0])) || !strings.Contains(stdout, filepath.Base(fixtures[1])) || !strings.Contains(stdout, "values") {
		t.Errorf("info on a NIfTI folder: exit %d\n%s\n%s", code, stdout, stderr)
	}

	paths := sweepSeries(t, filepath.Join(dir, "dcm"), "1.1", 3, false)
	code, stdout, stderr = captureRun(t, "info", paths[1])
	if code != 0 || !strings.Contains(stdout, "1 DICOM series") || !strings.Contains(stdout, "16 x 12 x 1") {
		t.Errorf("info on a DICOM file: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// Both: the volumes, then the series.
	code, stdout, stderr = captureRun(t, "info", dir)
	if code != 0 || !strings.Contains(stdout, "2 NIfTI volumes") || !strings.Contains(stdout, "1 DICOM series") || !strings.Contains(stdout, "16 x 12 x 3") {
		t.Errorf("info on a folder of both: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// Cut 140 bytes into the data set: after the series UID, before the pixels.
	b, _ := os.ReadFile(paths[1])
	os.WriteFile(paths[1], b[:len(b)-len(sweepImage("1.1", 1, 12, 16).Dataset())+140], 0o644)
	if code, stdout, _ = captureRun(t, "info", dir); code != exitFailed || !strings.Contains(stdout, paths[1]) {
		t.Errorf("info on a folder with a broken DICOM file: exit %d, want %d naming it\n%s", code, exitFailed, stdout)
	}
}

// TestDICOMSweepConvertUsage: convert's usage errors exit 2 and name the flag or input: an
// output that is a file (or under one), a negative --workers, an input that does not exist.
// Nothing is written.
func TestDICOMSweepConvertUsage(t *testing.T) {
	dir := t.TempDir()
	sweepSeries(t, filepath.Join(dir, "in"), "1.1", 3, false)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"convert", filepath.Join(dir, "in"), "-o", file}, "--out"},
		{[]string{"convert", filepath.Join(dir, "in"), "-o", filepath.Join(file, "sub")}, "--out"},
		{[]string{"convert", filepath.Join(dir, "in"), "-o", filepath.Join(dir, "o1"), "--workers", "-1"}, "--workers"},
		{[]string{"convert", filepath.Join(dir, "missing"), "-o", filepath.Join(dir, "o2")}, "missing"},
		{[]string{"convert", filepath.Join(dir, "in"), "-o", filepath.Join(dir, "o3"), "--format", "zip"}, "--format"},
		{[]string{"convert", filepath.Join(dir, "in"), "-o", filepath.Join(dir, "o4"), "--dicom-name", "%n"}, "--dicom-name"},
		{[]string{"convert", filepath.Join(dir, "in")}, "--out"},
	} {
		code, _, stderr := captureRun(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, want %d naming %s\n%s", tc.args[1:], code, exitUsage, tc.want, stderr)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "x" {
		t.Error("the file given as output was changed")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "o*")); len(m) != 0 {
		t.Errorf("usage errors left %v", m)
	}
}

// TestDICOMSweepDeflateBombs: deflated files of about 1 MiB that inflate to 1 GiB fail their
// series (exit 1, each named) within seconds, in a process whose peak RSS stays far below
// what they inflate to (before: 2.1 GB for one, 12.8 GB for eight); a good deflated series in
// the same run is segmented.
func TestDICOMSweepDeflateBombs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("maxrss is read from Linux rusage")
	}
	bin := testBinary(t)
	dir := t.TempDir()
	var bombs []string
	for i := range 8 {
		p := filepath.Join(dir, fmt.Sprintf("bomb%d", i), "IM0")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, dicomtest.DeflatedBomb(sweepImage(fmt.Sprintf("6.%d", i), 0, 12, 16).Dataset(), 1024, nil), 0o644)
		bombs = append(bombs, p)
	}
	sweepSeries(t, filepath.Join(dir, "good"), "1.1", 5, true)
	out := t.TempDir()
	args := []string{"run", "-q", "--max-memory", "1G", "-o", out, filepath.Join(dir, "good")}
	for _, b := range bombs {
		args = append(args, filepath.Dir(b))
	}
	start := time.Now()
	cmd := measuredCmd(t, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Run()
	took := time.Since(start)
	rss := cmd.peakRSS(t) // KiB
	t.Logf("8 bombs and a series: exit %d in %v, peak RSS %d MiB", cmd.ProcessState.ExitCode(), took, rss>>10)
	if code := cmd.ProcessState.ExitCode(); code != exitFailed {
		t.Errorf("exit %d, want %d\n%s", code, exitFailed, stderr.String())
	}
	for _, b := range bombs {
		if !strings.Contains(stderr.String(), b) {
			t.Errorf("no error names %s", b)
		}
	}
	if !strings.Contains(stderr.String(), "too large") {
		t.Errorf("the errors do not say why:\n%s", stderr.String())
	}
	if masks, _ := filepath.Glob(filepath.Join(out, "*_mask.nii.gz")); len(masks) != 1 {
		t.Errorf("masks %v: want the good series'", masks)
	}
	if rss > 400<<10 {
		t.Errorf("peak RSS %d MiB", rss>>10)
	}
}
