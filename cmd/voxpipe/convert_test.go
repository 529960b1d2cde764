package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"voxpipe/io/nifti"
	"voxpipe/store/provenance"
)

// pydicomSeries is a 5-slice CT series pydicom ships (python3-pydicom).
const pydicomSeries = "/usr/lib/python3/dist-packages/pydicom/data/test_files/dicomdirtests/98892001/CT5N"

// TestConvertAndInfoDICOM converts a real CT series and lists it: one 16x16x5 volume whose
// header carries an sform and qform of 5 slices 2.5 mm apart; no patient data on stderr; info
// shows the series; usage errors exit 2.
func TestConvertAndInfoDICOM(t *testing.T) {
	t.Parallel()
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

// TestRunDICOM: run takes a DICOM folder as one job per series: the mask (named by
// --dicom-name) equals, labels and affine, the mask run gives on convert's NIfTI of the series
// (scripts/dicom-test.sh checks that NIfTI against dcm2niix's, and run against dcm2niix's
// NIfTI); the provenance records the UIDs and the series' files; a rerun skips it; records
// name it by number and ID, not by patient data; a series that cannot be read fails alone.
func TestRunDICOM(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(pydicomSeries); err != nil {
		t.Skipf("pydicom's test files are not installed: %v", err)
	}
	nii := t.TempDir()
	if code, _, stderr := captureRun(t, "convert", "-q", pydicomSeries, "-o", nii, "--dicom-name", "ct"); code != 0 {
		t.Fatalf("convert: exit %d\n%s", code, stderr)
	}
	fromNIfTI, fromDICOM := t.TempDir(), t.TempDir()
	if code, _, stderr := captureRun(t, "run", "--quiet", nii, "-o", fromNIfTI); code != 0 {
		t.Fatalf("run on NIfTI: exit %d\n%s", code, stderr)
	}
	code, _, stderr := captureRun(t, "run", pydicomSeries, "-o", fromDICOM, "--dicom-name", "ct", "--run-id", "dicom")
	if code != 0 {
		t.Fatalf("run on DICOM: exit %d\n%s", code, stderr)
	}
	a, la, err := nifti.ReadUint8(filepath.Join(fromNIfTI, "ct_mask.nii.gz"))
	if err != nil {
		t.Fatal(err)
	}
	b, lb, err := nifti.ReadUint8(filepath.Join(fromDICOM, "ct_mask.nii.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Affine() != b.Affine() || string(la) != string(lb) {
		t.Errorf("masks differ: affine %v vs %v, labels equal %v", a.Affine(), b.Affine(), string(la) == string(lb))
	}
	_, rec, err := provenance.Read(filepath.Join(fromDICOM, "ct_mask.nii.gz"))
	if err != nil || rec.Input.DICOM == nil || rec.Input.DICOM.SeriesInstanceUID == "" || rec.Input.DICOM.StudyInstanceUID == "" || len(rec.Input.Files) != 5 {
		t.Errorf("provenance %+v, %v", rec.Input, err)
	}
	summary, _ := os.ReadFile(filepath.Join(fromDICOM, "runs", "dicom", "summary.csv"))
	if !strings.Contains(string(summary), ",series_5_") || strings.Contains(string(summary)+stderr, "98890234") {
		t.Errorf("summary or log: want series_5_<id>, no PatientID:\n%s\n%s", summary, stderr)
	}
	if code, _, stderr := captureRun(t, "run", pydicomSeries, "-o", fromDICOM, "--dicom-name", "ct"); code != 0 || !strings.Contains(stderr, "up to date") {
		t.Errorf("rerun: exit %d\n%s", code, stderr)
	}
	bad := filepath.Join(filepath.Dir(pydicomSeries), "..", "77654033", "CT2") // spacing varies
	if code, _, stderr := captureRun(t, "run", "--quiet", bad, pydicomSeries, "-o", t.TempDir()); code != exitFailed || !strings.Contains(stderr, "spacing varies") {
		t.Errorf("irregular series: exit %d\n%s", code, stderr)
	}
}
