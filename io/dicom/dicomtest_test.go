package dicom

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"voxpipe/internal/dicomtest"
)

// dicomtest.Series's files make one series that io/dicom reads: its dims, and every slice in order.
func TestWriteReadsAsOneSeries(t *testing.T) {
	t.Parallel()
	s := dicomtest.Series{StudyUID: "1.2.3", SeriesUID: "1.2.3.4", Number: 7, Rows: 10, Columns: 12, Description: "T1", PatientID: "P1"}
	paths, err := s.Write(t.TempDir(), 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	scan := ScanFiles(paths, 1)
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

// A dicomtest.Image in every transfer syntax the writer knows reads back through io/dicom as the
// series it describes, with the pixels it holds.
func TestImageSyntaxesRead(t *testing.T) {
	t.Parallel()
	syntaxes := []string{dicomtest.ImplicitVRLittleEndian, dicomtest.ExplicitVRLittleEndian, dicomtest.DeflatedExplicitVRLE, dicomtest.ExplicitVRBigEndian, dicomtest.RLELossless}
	for _, syntax := range syntaxes {
		t.Run(syntax, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var paths []string
			var want []uint16
			for k := range 2 {
				px := make([]uint32, 3*4)
				for i := range px {
					px[i] = uint32(1000*k + 7*i%5 + 300*(i/4))
					want = append(want, uint16(px[i]))
				}
				img := dicomtest.Image{
					Syntax:   syntax,
					IDs:      dicomtest.IDs{StudyUID: "1.2", SeriesUID: "1.2.9", SOPUID: fmt.Sprintf("1.2.9.%d", k), Number: 3, Instance: k + 1},
					Geometry: dicomtest.Geometry{Rows: 3, Columns: 4, Position: [3]float64{0, 0, float64(k)}, Orientation: dicomtest.Axial, Spacing: [2]float64{1, 1}},
					Pixels:   dicomtest.Pixels{Values: px},
				}
				p := filepath.Join(dir, dicomtest.FileName(k))
				if err := os.WriteFile(p, img.File(), 0o644); err != nil {
					t.Fatal(err)
				}
				paths = append(paths, p)
			}
			scan := ScanFiles(paths, 1)
			if len(scan.Skipped) != 0 || len(scan.Series) != 1 || scan.Series[0].Err != nil {
				t.Fatalf("skipped %v, series %v", scan.Skipped, scan.Series)
			}
			s := scan.Series[0]
			if s.Dims() != [3]int{4, 3, 2} || string(s.Syntax) != syntax {
				t.Fatalf("dims %v, syntax %s", s.Dims(), s.Syntax)
			}
			buf := make([]byte, 2*len(want))
			if _, err := s.ReadRaw(buf, 1); err != nil {
				t.Fatal(err)
			}
			got := make([]uint16, len(want))
			for i := range got {
				got[i] = binary.LittleEndian.Uint16(buf[2*i:])
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("pixels %v, want %v (in any order)", got, want)
			}
		})
	}
}
