package pipeline

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"voxpipe/io/dicom"
	"voxpipe/io/dicomseg"
	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/store/provenance"
	"voxpipe/store/records"
	"voxpipe/telemetry/timing"
)

// TestRunDICOMWritesSEG: with Output.SEG a DICOM series' mask gets its SEG beside it, holding
// the mask's labels on the series (read back by the reader), its SOP Instance UID in the
// summary and its name in the mask's provenance; a NIfTI input gets none; the SEG step's time
// is not counted as kernel time; a rerun without the SEG file makes it again.
func TestRunDICOMWritesSEG(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	dcmSeries{uid: "1.2.3", n: 5, rows: 6, cols: 7, bits: 16, value: ramp}.write(t, in)
	os.MkdirAll(filepath.Join(dir, "nii"), 0o755)
	writeVolume(t, filepath.Join(dir, "nii", "vol.nii"), 5, 4, 4, 0)
	out := filepath.Join(dir, "out")
	withSEG := func(c *Config) {
		c.Output.SEG = &dicomseg.Options{Segments: []dicomseg.Segment{{Number: 1, Label: "low"}, {Number: 2, Label: "high"}}}
	}
	_, rows := runInputs(t, []string{in, filepath.Join(dir, "nii")}, out, withSEG)
	masks, _ := filepath.Glob(filepath.Join(out, "series_*_mask.nii.gz"))
	if len(masks) != 1 {
		t.Fatalf("want one DICOM mask, got %v", masks)
	}
	segPath := records.SEGPath(masks[0])
	seg, err := dicomseg.ReadFile(segPath)
	if err != nil {
		t.Fatal(err)
	}
	scan, err := dicom.ScanPaths([]string{in}, 1)
	if err != nil || len(scan.Series) != 1 {
		t.Fatalf("scan: %v", err)
	}
	got, _, err := seg.Mask(scan.Series[0])
	if err != nil {
		t.Fatal(err)
	}
	_, want, err := nifti.ReadUint8(masks[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the SEG read back differs from the mask")
	}
	for name, r := range rows {
		switch {
		case r.Status != timing.StatusOK:
			t.Errorf("%s: %s %s", name, r.Status, r.Error)
		case name == "vol" && r.SEG != "":
			t.Errorf("the NIfTI input got a SEG: %q", r.SEG)
		case name != "vol" && r.SEG != seg.SOPInstanceUID:
			t.Errorf("%s: seg column %q, the SEG is %s", name, r.SEG, seg.SOPInstanceUID)
		}
		if r.KernelsMS != 0 {
			t.Errorf("%s: kernels_ms %v from an engine without kernels", name, r.KernelsMS)
		}
	}
	if _, rec, err := provenance.Read(masks[0]); err != nil || rec.SEG != filepath.Base(segPath) {
		t.Errorf("provenance SEG %q (%v), want %s", rec.SEG, err, filepath.Base(segPath))
	}
	if _, err := os.Stat(filepath.Join(out, "vol_mask.seg.dcm")); err == nil {
		t.Error("a SEG beside the NIfTI input's mask")
	}

	os.Remove(segPath)
	_, rows = runInputs(t, []string{in}, out, withSEG)
	for name, r := range rows {
		if r.Status != timing.StatusOK || r.Reason != "mask up to date, but its DICOM SEG missing" {
			t.Errorf("rerun without the SEG: %s %s %q", name, r.Status, r.Reason)
		}
	}
	if _, err := os.Stat(segPath); err != nil {
		t.Errorf("the rerun did not make the SEG again: %v", err)
	}
}

// TestRunDICOMSEGConflict: a file voxpipe did not write at the SEG's path is a conflict (kept,
// neither mask nor SEG written) unless --overwrite, which replaces it with the SEG.
func TestRunDICOMSEGConflict(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	dcmSeries{uid: "1.2.4", n: 4, rows: 5, cols: 6, bits: 16, value: ramp}.write(t, in)
	out := filepath.Join(dir, "out")
	withSEG := func(c *Config) {
		c.Output.SEG = &dicomseg.Options{Segments: []dicomseg.Segment{{Number: 1}, {Number: 2}}}
	}
	found, err := jobs.Discover([]string{in}, false, out, "{name}_mask.nii.gz")
	if err != nil || len(found.Jobs) != 1 {
		t.Fatalf("discover: %v", err)
	}
	segPath := records.SEGPath(found.Jobs[0].Output)
	os.MkdirAll(out, 0o755)
	os.WriteFile(segPath, []byte("a radiologist's notes"), 0o644)
	_, rows := runInputs(t, []string{in}, out, withSEG)
	for name, r := range rows {
		if r.Status != timing.StatusConflict {
			t.Errorf("%s: %s %q, want a conflict", name, r.Status, r.Reason)
		}
	}
	if data, _ := os.ReadFile(segPath); string(data) != "a radiologist's notes" {
		t.Fatal("the file at the SEG's path was replaced")
	}
	if _, err := os.Stat(found.Jobs[0].Output); err == nil {
		t.Error("the mask was written beside a conflict")
	}
	_, rows = runInputs(t, []string{in}, out, func(c *Config) { withSEG(c); c.Output.Overwrite = true })
	for name, r := range rows {
		if r.Status != timing.StatusOK {
			t.Errorf("--overwrite: %s %s %q", name, r.Status, r.Error)
		}
	}
	if !dicomseg.WrittenHere(segPath) {
		t.Error("--overwrite did not put the SEG there")
	}
}
