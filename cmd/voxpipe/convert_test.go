package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"voxpipe/io/nifti"
)

// pydicomSeries is a 5-slice CT series pydicom ships (python3-pydicom).
const pydicomSeries = "/usr/lib/python3/dist-packages/pydicom/data/test_files/dicomdirtests/98892001/CT5N"

// TestConvertAndInfoDICOM converts a real CT series and lists it: one 16x16x5 volume whose
// header carries an sform and qform of 5 slices 2.5 mm apart; no patient data on stderr; info
// shows the series; usage errors exit 2.
func TestConvertAndInfoDICOM(t *testing.T) {
	if _, err := os.Stat(pydicomSeries); err != nil {
		t.Skipf("pydicom's test files are not installed: %v", err)
	}
	out := t.TempDir()
	code, _, stderr := captureRun(t, "convert", pydicomSeries, "-o", out, "--dicom-name", "%s_%m")
	if code != 0 {
		t.Fatalf("convert: exit %d\n%s", code, stderr)
	}
	h, err := nifti.ReadHeader(filepath.Join(out, "5_CT.nii.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if h.NX() != 16 || h.NY() != 16 || h.NZ() != 5 || h.SformCode != 1 || h.QformCode != 1 || h.Affine().VoxelSizes()[2] != 2.5 {
		t.Errorf("header: %dx%dx%d sform %d qform %d sizes %v", h.NX(), h.NY(), h.NZ(), h.SformCode, h.QformCode, h.Affine().VoxelSizes())
	}
	if strings.Contains(stderr, "98890234") { // the PatientID of the series
		t.Errorf("stderr shows the PatientID:\n%s", stderr)
	}
	code, stdout, _ := captureRun(t, "info", pydicomSeries)
	if code != 0 || !strings.Contains(stdout, "1 DICOM series") || !strings.Contains(stdout, "16 x 16 x 5") || strings.Contains(stdout, "98890234") {
		t.Errorf("info: exit %d\n%s", code, stdout)
	}
	if code, _, _ := captureRun(t, "convert", pydicomSeries, "-o", out, "--dicom-name", "%n"); code != exitUsage {
		t.Errorf("--dicom-name %%n: exit %d, want %d", code, exitUsage)
	}
	if code, _, _ := captureRun(t, "convert", pydicomSeries); code != exitUsage {
		t.Errorf("no -o: exit %d, want %d", code, exitUsage)
	}
	if code, _, _ := captureRun(t, "convert", "--check", pydicomSeries); code != 0 {
		t.Errorf("--check: exit %d", code)
	}
}
