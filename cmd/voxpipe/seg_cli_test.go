package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"voxpipe/internal/dicomtest"
	"voxpipe/io/dicom"
	"voxpipe/io/dicomseg"
	"voxpipe/io/nifti"
)

// segFixture is a DICOM series, a label mask on its grid and the SEG the writer makes of it.
type segFixture struct {
	dir, seg string
	series   *dicom.Series
	mask     []byte
}

// newSEGFixture writes a 23x17x5 axial series (PatientID "PAT-SECRET-9") into its own folder
// and the SEG of a two-segment mask beside the folder.
func newSEGFixture(t *testing.T, seriesUID string) segFixture {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "series")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := dicomtest.Series{StudyUID: "1.2.826.0.1.3680043.10.1011.9", SeriesUID: seriesUID, Number: 4, Rows: 17, Columns: 23, PatientID: "PAT-SECRET-9"}
	if _, err := src.Write(dir, 0, 5); err != nil {
		t.Fatal(err)
	}
	scan, err := dicom.ScanPaths([]string{dir}, 1)
	if err != nil || len(scan.Series) != 1 {
		t.Fatalf("scan: %v, %d series", err, len(scan.Series))
	}
	s := scan.Series[0]
	mask := make([]byte, s.Voxels())
	for i := range mask {
		x, y, z := i%23, i/23%17, i/(23*17)
		switch {
		case z > 0 && x < 9 && y < 12:
			mask[i] = 1
		case z > 1 && x > 14 && y > 3:
			mask[i] = 2
		}
	}
	seg := filepath.Join(root, "mask.seg.dcm")
	segs := []dicomseg.Segment{{Number: 1, Label: "tissue", Algorithm: "voxpipe-test"}, {Number: 2, Label: "lesion", Category: dicomseg.Code{Scheme: "SCT", Value: "49755003", Meaning: "Morphologically Altered Structure"}, Type: dicomseg.Code{Scheme: "SCT", Value: "52988006", Meaning: "Lesion"}}}
	if _, err := dicomseg.WriteFile(seg, s, mask, dicomseg.Options{Segments: segs}); err != nil {
		t.Fatal(err)
	}
	return segFixture{dir: dir, seg: seg, series: s, mask: mask}
}

// TestInfoSEG: info on a SEG prints its UIDs, size, frames, segments and referenced series,
// no patient data; a SEG cut short fails with exit 1.
func TestInfoSEG(t *testing.T) {
	t.Parallel()
	fx := newSEGFixture(t, "1.2.826.0.1.3680043.10.1011.9.1")
	seg, err := dicomseg.ReadFile(fx.seg)
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := captureRun(t, "info", fx.seg)
	if code != 0 {
		t.Fatalf("info: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"DICOM Segmentation (BINARY)", seg.SOPInstanceUID, seg.SeriesInstanceUID, "study       1.2.826.0.1.3680043.10.1011.9\n", "17 x 23 (rows x columns)",
		`segment 1  "tissue": 4 frames`, `segment 2  "lesion": 3 frames`, `"Lesion" (SCT 52988006)`, `"Tissue" (SCT 85756007)`, `AUTOMATIC "voxpipe-test"`, "MANUAL",
		"series 1.2.826.0.1.3680043.10.1011.9.1: 4 instances", "frames      7 of"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("info does not show %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout+stderr, "PAT-SECRET-9") {
		t.Errorf("info shows the PatientID:\n%s", stdout)
	}
	b, err := os.ReadFile(fx.seg)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.dcm")
	if err := os.WriteFile(cut, b[:len(b)-100], 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := captureRun(t, "info", cut); code != exitFailed || !strings.Contains(stderr, "cut.dcm") {
		t.Errorf("info on a SEG cut short: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestConvertSEG: convert turns a SEG back into the mask it was made of, with the series'
// NIfTI geometry; the reference folder may hold several series when --series picks one.
func TestConvertSEG(t *testing.T) {
	t.Parallel()
	fx := newSEGFixture(t, "1.2.826.0.1.3680043.10.1011.9.2")
	out := filepath.Join(t.TempDir(), "back.nii.gz")
	code, _, stderr := captureRun(t, "convert", fx.seg, "--reference", fx.dir, "-o", out)
	if code != 0 {
		t.Fatalf("convert: exit %d\n%s", code, stderr)
	}
	h, labels, err := nifti.ReadLabels(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(labels, fx.mask) {
		t.Fatal("the mask read back differs from the one the SEG was made of")
	}
	want := fx.series.Header(nifti.Uint8)
	if h.Affine() != want.Affine() || h.Dim != want.Dim || h.IntentCode != nifti.IntentLabel || h.Datatype != nifti.Uint8 {
		t.Errorf("header: affine %v dims %v intent %d datatype %v; want the series' %v %v", h.Affine(), h.Dim, h.IntentCode, h.Datatype, want.Affine(), want.Dim)
	}
	if strings.Contains(stderr, "PAT-SECRET-9") {
		t.Errorf("stderr shows the PatientID:\n%s", stderr)
	}

	// a second series beside the first: --series picks the SEG's
	other := dicomtest.Series{StudyUID: "1.2.826.0.1.3680043.10.1011.9", SeriesUID: "1.2.826.0.1.3680043.10.1011.9.77", Number: 5, Rows: 17, Columns: 23}
	for i := range 5 {
		if err := os.WriteFile(filepath.Join(fx.dir, "B"+dicomtest.FileName(i)), other.Slice(i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out2 := filepath.Join(t.TempDir(), "picked.nii")
	code, _, stderr = captureRun(t, "convert", fx.seg, "--reference", fx.dir, "--series", fx.series.UID, "-o", out2)
	if code != 0 {
		t.Fatalf("convert --series: exit %d\n%s", code, stderr)
	}
	if _, labels, err := nifti.ReadLabels(out2); err != nil || !bytes.Equal(labels, fx.mask) {
		t.Fatalf("convert --series: %v, mask equal %v", err, bytes.Equal(labels, fx.mask))
	}
}

// TestConvertSEGErrors: every refusal exits non-zero and leaves no output file: several
// series without --series (the error lists their UIDs), the wrong series, a folder without
// series, a damaged SEG, and usage errors (exit 2).
func TestConvertSEGErrors(t *testing.T) {
	t.Parallel()
	fx := newSEGFixture(t, "1.2.826.0.1.3680043.10.1011.9.3")
	two := newSEGFixture(t, "1.2.826.0.1.3680043.10.1011.9.4") // another series of the same size
	both := t.TempDir()
	for _, d := range []string{fx.dir, two.dir} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(d, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(both, filepath.Base(d)+filepath.Base(filepath.Dir(d))+e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, err := os.ReadFile(fx.seg)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.dcm")
	if err := os.WriteFile(cut, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	cases := []struct {
		name string
		args []string
		code int
		says []string
	}{
		{"several series", []string{fx.seg, "--reference", both}, exitFailed, []string{"--series", fx.series.UID, two.series.UID}},
		{"wrong series", []string{fx.seg, "--reference", two.dir}, exitFailed, []string{"not in series"}},
		{"no series", []string{fx.seg, "--reference", empty}, exitFailed, []string{"no DICOM image series"}},
		{"no such --series", []string{fx.seg, "--reference", fx.dir, "--series", "1.2.3"}, exitFailed, []string{fx.series.UID}},
		{"damaged SEG", []string{cut, "--reference", fx.dir}, exitFailed, []string{"cut.dcm"}},
		{"no --reference", []string{fx.seg}, exitUsage, []string{"--reference"}},
		{"--format", []string{fx.seg, "--reference", fx.dir, "--format", "nii"}, exitUsage, []string{"--format"}},
		{"two SEGs", []string{fx.seg, two.seg, "--reference", fx.dir}, exitUsage, []string{"one DICOM SEG"}},
	}
	for _, c := range cases {
		out := filepath.Join(t.TempDir(), "out.nii.gz")
		code, _, stderr := captureRun(t, append(append([]string{"convert"}, c.args...), "-o", out)...)
		if code != c.code {
			t.Errorf("%s: exit %d, want %d\n%s", c.name, code, c.code, stderr)
		}
		for _, s := range c.says {
			if !strings.Contains(stderr, s) {
				t.Errorf("%s: stderr does not say %q:\n%s", c.name, s, stderr)
			}
		}
		if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 0 {
			t.Errorf("%s: left %d files in the output folder", c.name, len(ents))
		}
	}
	// -o naming a folder, or a name that is not NIfTI: usage errors, nothing written
	folder := t.TempDir()
	for _, out := range []string{folder, filepath.Join(folder, "mask.dcm"), filepath.Join(folder, "missing", "m.nii")} {
		if code, _, _ := captureRun(t, "convert", fx.seg, "--reference", fx.dir, "-o", out); code != exitUsage {
			t.Errorf("-o %s: exit %d, want %d", out, code, exitUsage)
		}
	}
	if ents, _ := os.ReadDir(folder); len(ents) != 0 {
		t.Errorf("-o: usage errors left %d files", len(ents))
	}
}
