package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"voxpipe/internal/dicomtest"
	"voxpipe/io/dicom"
	"voxpipe/io/dicomseg"
	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/store/provenance"
	"voxpipe/store/records"
	"voxpipe/telemetry/timing"
)

// maskDims is the dims of the mask at path, or zero when it cannot be read (not there yet).
func maskDims(path string) [3]int {
	h, err := nifti.ReadHeader(path)
	if err != nil {
		return [3]int{}
	}
	return [3]int{h.NX(), h.NY(), h.NZ()}
}

// A DICOM series copied into the inbox file by file is segmented once, a settle time after
// its last file, with every file; an instance that arrives after it was segmented is reported
// (a warning, and the redo's reason in the records) and the mask made again from the whole
// series. A file that is neither a volume nor DICOM is logged once. Not parallel: the tests of
// this package share the built binary and the process's stdout.
func TestWatchDICOMSeries(t *testing.T) {
	t.Parallel()
	inbox, out := t.TempDir(), t.TempDir()
	const settle = 2500 * time.Millisecond
	w := startWatch(t, inbox, out, "wd", "--settle", settle.String(), "--dicom-name", "s%s")
	s := dicomtest.Series{StudyUID: "1.2.826.0.1.3680043.2", SeriesUID: "1.2.826.0.1.3680043.2.5", Number: 5,
		Rows: 20, Columns: 24, Description: "T1 axial", PatientID: "PID42"}
	mask := filepath.Join(out, "s5_mask.nii.gz")
	if err := os.WriteFile(filepath.Join(inbox, "notes.txt"), []byte("not an image\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Copied in file by file, each file written in two parts, a file every 400 ms: less than
	// the settle time.
	const slices = 6
	var last time.Time
	for i := range slices {
		data := s.Slice(i)
		f, err := os.Create(filepath.Join(inbox, dicomtest.FileName(i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Write(data[:len(data)/2])
		pace(100 * time.Millisecond)
		f.Write(data[len(data)/2:])
		f.Close()
		last = time.Now()
		pace(300 * time.Millisecond)
		if exists(mask) {
			t.Fatalf("segmented after %d of %d files, while the series was still arriving\n%s", i+1, slices, w.stderr.String())
		}
	}
	waitFor(t, func() bool { return exists(mask) }, &w.stderr)
	if took := time.Since(last); took < settle*3/4 {
		t.Errorf("segmented %v after the last file, before the %v settle", took, settle)
	}
	if got := maskDims(mask); got != [3]int{s.Columns, s.Rows, slices} {
		t.Fatalf("mask dims %v, want %dx%dx%d", got, s.Columns, s.Rows, slices)
	}
	_, rec, err := provenance.Read(mask)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Input.Files) != slices || rec.Input.DICOM == nil || rec.Input.DICOM.SeriesInstanceUID != s.SeriesUID {
		t.Fatalf("provenance input: %+v", rec.Input)
	}
	// the watch service writes the series' DICOM SEG too, before the mask appears
	if seg := records.SEGPath(mask); rec.SEG != filepath.Base(seg) || !dicomseg.IsSEG(seg) {
		t.Errorf("watch: no DICOM SEG beside the mask (provenance seg %q)", rec.SEG)
	}

	// An instance that arrives after the series was segmented.
	if _, err := s.Write(inbox, slices, slices+1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return maskDims(mask) == [3]int{s.Columns, s.Rows, slices + 1} }, &w.stderr)
	// The row follows the mask.
	waitFor(t, func() bool {
		rows, _ := timing.ReadSummaries(filepath.Join(records.RunDir(out, "wd"), records.SummaryName))
		return len(rows) == 2
	}, &w.stderr)
	if code, _ := w.stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0\n%s", code, w.stderr.String())
	}

	name := checkDICOMSeriesRecords(t, inbox, out)
	checkDICOMSeriesLog(t, w.stderr.String(), name)
}

// checkDICOMSeriesRecords checks TestWatchDICOMSeries' records: a row per segmentation of the
// series, the second saying it grew, and one row in volumes.csv. It returns the series' name.
func checkDICOMSeriesRecords(t *testing.T, inbox, out string) string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(inbox, "IM*"))
	scan := dicom.ScanFiles(paths, 1)
	if len(scan.Series) != 1 {
		t.Fatalf("%d series in the inbox", len(scan.Series))
	}
	name := jobs.DICOMJobName(scan.Series[0])
	rows := runSummary(t, out, "wd")
	if len(rows) != 2 {
		t.Fatalf("summary rows: %+v", rows)
	}
	for i, r := range rows {
		if r.Volume != name || r.Status != timing.StatusOK || r.Dims != "24x20x"+[]string{"6", "7"}[i] {
			t.Errorf("row %d: %s %s %s %q, want %s ok", i, r.Volume, r.Status, r.Dims, r.Error, name)
		}
	}
	if rows[0].Reason != "new" || !strings.Contains(rows[1].Reason, "the DICOM series grew from 6 to 7 files; new: IM0007") {
		t.Errorf("reasons %q, %q: the second does not say the series grew", rows[0].Reason, rows[1].Reason)
	}
	vols, err := timing.ReadSummaries(filepath.Join(out, records.VolumesName))
	if err != nil || len(vols) != 1 || vols[0].Volume != name || vols[0].Status != timing.StatusOK {
		t.Errorf("volumes.csv: %+v %v", vols, err)
	}

	return name
}

// checkDICOMSeriesLog checks TestWatchDICOMSeries' JSON log: one warning that the series grew,
// one note on the file that is not an image, and no patient data.
func checkDICOMSeriesLog(t *testing.T, stderr, name string) {
	t.Helper()
	var grew, notes int
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("not a JSON line: %q", line)
			continue
		}
		msg, _ := m["msg"].(string)
		switch {
		case strings.Contains(msg, "grew or changed after it was handed out"):
			grew++
			if m["level"] != "WARN" || m["series"] != name || m["new_files"] != "IM0007" {
				t.Errorf("growth warning: %s", line)
			}
		case strings.Contains(msg, "not a volume or DICOM file"):
			notes++
			if !strings.HasSuffix(m["file"].(string), "notes.txt") {
				t.Errorf("left out: %s", line)
			}
		}
		if strings.Contains(line, "PID42") {
			t.Errorf("patient data in the log: %s", line)
		}
	}
	if grew != 1 || notes != 1 {
		t.Errorf("%d growth warnings, %d notes on notes.txt; want 1 and 1\n%s", grew, notes, stderr)
	}
}
