package dicomseg

import (
	"fmt"
	"io"
	"testing"

	"voxpipe/internal/benchvol"
	"voxpipe/io/dicom"
)

// syntheticSeries is an axial series of nx x ny x nz in memory (no files): what Write reads of
// a series, for benchmarks at sizes too large to write as files each time.
func syntheticSeries(nx, ny, nz int) *dicom.Series {
	s := &dicom.Series{UID: "1.2.826.0.1.3680043.10.1011.9", StudyUID: "1.2.826.0.1.3680043.10.1011.8", Number: 1,
		Rows: ny, Columns: nx, Spacing: [3]float64{0.47, 0.47, 0.56}}
	for z := range nz {
		pos := [3]float64{-120, -120, 0.56 * float64(z)}
		f := &dicom.File{SOPClassUID: "1.2.840.10008.5.1.4.1.1.4", SOPInstanceUID: fmt.Sprintf("%s.%d", s.UID, z+1),
			NumberOfFrames: 1, Rows: ny, Columns: nx,
			Frames: []dicom.Frame{{Position: pos, HasPosition: true, Orientation: [6]float64{1, 0, 0, 0, 1, 0},
				HasOrientation: true, PixelSpacing: [2]float64{0.47, 0.47}, SliceThickness: 0.56}}}
		s.Files = append(s.Files, f)
		s.Slices = append(s.Slices, dicom.Slice{File: f, Position: pos})
	}
	return s
}

// BenchmarkWrite writes the SEG of a phantom's truth mask (3 labels), 128x128x100 unless
// VOXPIPE_SEG_DIMS says otherwise, to io.Discard:
//
//	VOXPIPE_SEG_DIMS=512x512x1000 go test ./io/dicomseg -run '^$' -bench Write -benchtime 3x
func BenchmarkWrite(b *testing.B) {
	ph, _ := benchvol.Phantom(b, "VOXPIPE_SEG_DIMS", "128x128x100")
	s := syntheticSeries(ph.Header.NX(), ph.Header.NY(), ph.Header.NZ())
	o := Options{Segments: testSegments(3), Digest: "bench"}
	b.SetBytes(int64(len(ph.Truth)))
	var sum *Summary
	var err error
	for b.Loop() {
		if sum, err = Write(io.Discard, s, ph.Truth, o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/SEG")
	b.Logf("%d frames, %d bytes", sum.Frames, sum.Bytes)
}
