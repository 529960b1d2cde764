package dicomtest

import (
	"testing"

	"voxpipe/io/dicom"
)

// The files make one series that io/dicom reads: its dims, and every slice in order.
func TestWriteReadsAsOneSeries(t *testing.T) {
	t.Parallel()
	s := Series{StudyUID: "1.2.3", SeriesUID: "1.2.3.4", Number: 7, Rows: 10, Columns: 12, Description: "T1", PatientID: "P1"}
	paths, err := s.Write(t.TempDir(), 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	scan := dicom.ScanFiles(paths, 1)
	if len(scan.Skipped) != 0 || len(scan.Series) != 1 {
		t.Fatalf("skipped %v, %d series", scan.Skipped, len(scan.Series))
	}
	got := scan.Series[0]
	if got.Err != nil || got.Dims() != [3]int{12, 10, 4} || got.UID != s.SeriesUID || got.Number != 7 {
		t.Fatalf("series %+v: %v", got.Dims(), got.Err)
	}
	buf := make([]byte, 2*12*10*4)
	if _, err := got.ReadRaw(buf, 1); err != nil {
		t.Fatal(err)
	}
}
