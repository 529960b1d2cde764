package dicomseg

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"voxpipe/internal/dicomtest"
	"voxpipe/io/dicom"
)

// geom is a source series to write a SEG over: its image size, orientation (row then column
// direction cosines), slice count, and whether its files number the slices against the
// normal (reversed order).
type geom struct {
	name         string
	rows, cols   int
	orient       [6]float64
	slices       int
	reversed     bool
	segments     int
	spacing      [2]float64
	sliceSpacing float64
}

// geometries: axial, sagittal, coronal, oblique, reversed order, odd size, 1 and 3 segments.
var geometries = []geom{
	{name: "axial", rows: 16, cols: 20, orient: [6]float64{1, 0, 0, 0, 1, 0}, slices: 6, segments: 3},
	{name: "sagittal", rows: 18, cols: 14, orient: [6]float64{0, 1, 0, 0, 0, -1}, slices: 5, segments: 3},
	{name: "coronal", rows: 12, cols: 22, orient: [6]float64{1, 0, 0, 0, 0, -1}, slices: 7, segments: 1},
	{name: "oblique", rows: 20, cols: 20, orient: oblique(), slices: 6, segments: 3},
	{name: "reversed", rows: 16, cols: 16, orient: [6]float64{1, 0, 0, 0, 1, 0}, slices: 6, reversed: true, segments: 3},
	{name: "odd37x29", rows: 29, cols: 37, orient: [6]float64{1, 0, 0, 0, 1, 0}, slices: 5, segments: 1},
}

// oblique is an axial plane turned 20 degrees about z, then 10 about x.
func oblique() [6]float64 {
	a, b := 20*math.Pi/180, 10*math.Pi/180
	row := [3]float64{math.Cos(a), math.Sin(a), 0}
	col := [3]float64{-math.Sin(a), math.Cos(a), 0}
	rot := func(v [3]float64) [3]float64 {
		return [3]float64{v[0], v[1]*math.Cos(b) - v[2]*math.Sin(b), v[1]*math.Sin(b) + v[2]*math.Cos(b)}
	}
	r, c := rot(row), rot(col)
	return [6]float64{r[0], r[1], r[2], c[0], c[1], c[2]}
}

// writeSeries writes g's series into a new folder and reads it back as io/dicom assembles it.
func writeSeries(t testing.TB, g geom) (string, *dicom.Series) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), g.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	spacing := g.spacing
	if spacing == ([2]float64{}) {
		spacing = [2]float64{0.8, 0.9}
	}
	step := g.sliceSpacing
	if step == 0 {
		step = 2.5
	}
	o := g.orient
	n := [3]float64{o[1]*o[5] - o[2]*o[4], o[2]*o[3] - o[0]*o[5], o[0]*o[4] - o[1]*o[3]}
	study, series := "1.2.826.0.1.3680043.10.1011.1", "1.2.826.0.1.3680043.10.1011.1."+fmt.Sprint(len(g.name))+"1"
	for i := range g.slices {
		k := i
		if g.reversed {
			k = g.slices - 1 - i
		}
		pos := [3]float64{-30.25 + n[0]*step*float64(k), 12.5 + n[1]*step*float64(k), 40 + n[2]*step*float64(k)}
		px := make([]uint32, g.rows*g.cols)
		for j := range px {
			px[j] = uint32(100 + (j*7+i*13)%50)
		}
		img := dicomtest.Image{
			IDs: dicomtest.IDs{StudyUID: study, SeriesUID: series, SOPUID: fmt.Sprintf("%s.%d", series, i+1),
				Number: 3, Instance: i + 1, StudyDate: "20240102", Description: g.name, PatientName: "Test^Patient",
				PatientID: "P-" + g.name, FrameOfReference: "1.2.826.0.1.3680043.10.1011.2", Complete: true},
			Geometry: dicomtest.Geometry{Rows: g.rows, Columns: g.cols, Position: pos, Orientation: o,
				Spacing: spacing, Thickness: step},
			Pixels: dicomtest.Pixels{Values: px},
		}
		if err := os.WriteFile(filepath.Join(dir, dicomtest.FileName(i)), img.File(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	scan, err := dicom.ScanPaths([]string{dir}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(scan.Series) != 1 || scan.Series[0].Err != nil {
		t.Fatalf("%s: want one readable series, got %d (%v)", g.name, len(scan.Series), scan.Series)
	}
	return dir, scan.Series[0]
}

// testMask is a label mask on s's grid: segments labels in blobs, with some slices left
// empty of every label and some of one label only.
func testMask(s *dicom.Series, segments int) []byte {
	nx, ny, nz := s.Columns, s.Rows, len(s.Slices)
	m := make([]byte, nx*ny*nz)
	for z := 1; z < nz; z++ { // slice 0 stays empty
		for y := range ny {
			for x := range nx {
				l := 0
				switch {
				case x < nx/2 && y < ny/2+z%3:
					l = 1
				case x >= nx/2 && y < ny/3 && z%2 == 0:
					l = 2
				case x > nx/3 && y > 2*ny/3 && z >= 2:
					l = 3
				}
				if l > segments {
					l = 0
				}
				m[x+nx*(y+ny*z)] = byte(l)
			}
		}
	}
	return m
}

// testSegments describes labels 1..n.
func testSegments(n int) []Segment {
	all := []Segment{
		{Number: 1, Label: "tissue", Category: Code{"SCT", "91723000", "Anatomical Structure"}, Type: Code{"SCT", "85756007", "Tissue"}, Algorithm: "voxpipe-test", AlgorithmVersion: "0123456789abcdef"},
		{Number: 2, Label: "fluid", Category: Code{"SCT", "91723000", "Anatomical Structure"}, Type: Code{"SCT", "35764002", "Cerebral ventricle"}, Algorithm: "voxpipe-test", AlgorithmVersion: "0123456789abcdef"},
		{Number: 3, Label: "lesion", Category: Code{"SCT", "49755003", "Morphologically Altered Structure"}, Type: Code{"SCT", "52988006", "Lesion"}, Algorithm: "voxpipe-test", AlgorithmVersion: "0123456789abcdef"},
	}
	return all[:n]
}
