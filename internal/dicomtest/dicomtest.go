// Package dicomtest writes DICOM files for tests: the one test writer of io/dicom, the
// pipeline, the watch service and the CLI. Image describes one MR image file (any transfer
// syntax io/dicom reads: implicit or explicit VR, little or big endian, deflated, RLE; single-
// or multi-frame); Series writes a small series of them; Enc writes elements one by one, for
// broken files; DeflatedBomb makes deflate bombs. Written by hand, as io/dicom is: no Go
// DICOM library is available to the project. It imports nothing of the project, so that
// io/dicom's own tests may use it.
package dicomtest

import (
	"fmt"
	"os"
	"path/filepath"
)

// Axial is the orientation of axial slices.
var Axial = [6]float64{1, 0, 0, 0, 1, 0}

// Series describes a series of axial slices, 2 mm apart along z.
type Series struct {
	StudyUID, SeriesUID string
	Number              int // SeriesNumber
	Rows, Columns       int
	Description         string
	PatientID           string
}

// Slice returns the Part 10 file of slice i (0-based: InstanceNumber i+1, at z = 2i mm),
// signed 16-bit pixels in a pattern that varies by slice.
func (s Series) Slice(i int) []byte {
	px := make([]uint32, s.Rows*s.Columns)
	for y := range s.Rows {
		for x := range s.Columns {
			px[y*s.Columns+x] = uint32(100 + 40*((x/4+y/4+i)%3) + x + y)
		}
	}
	return Image{
		IDs: IDs{
			StudyUID: s.StudyUID, SeriesUID: s.SeriesUID, SOPUID: fmt.Sprintf("%s.%d", s.SeriesUID, i+1),
			Number: s.Number, Instance: i + 1, StudyDate: "20240102", Description: s.Description, PatientID: s.PatientID,
		},
		Geometry: Geometry{
			Rows: s.Rows, Columns: s.Columns, Position: [3]float64{-12, -10, float64(2 * i)},
			Orientation: Axial, Spacing: [2]float64{1, 1}, Thickness: 2,
		},
		Pixels: Pixels{Signed: true, Values: px},
	}.File()
}

// FileName is slice i's file name: IM0001, IM0002... (no extension, as scanners write them).
func FileName(i int) string { return fmt.Sprintf("IM%04d", i+1) }

// Write writes slices [from, to) into dir as FileName(i) and returns their paths.
func (s Series) Write(dir string, from, to int) ([]string, error) {
	var paths []string
	for i := from; i < to; i++ {
		p := filepath.Join(dir, FileName(i))
		if err := os.WriteFile(p, s.Slice(i), 0o644); err != nil {
			return nil, fmt.Errorf("dicomtest: %w", err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}
