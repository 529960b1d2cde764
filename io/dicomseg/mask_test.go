package dicomseg

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"voxpipe/io/dicom"
)

// TestRoundTrip: for every geometry (axial, sagittal, coronal, oblique, files in reversed
// order, 37x29), the SEG the writer makes of a mask reads back (ReadFile) as that mask, with
// its segments, frames, references and UIDs; with empty frames written too, the same.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, g := range geometries {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			_, s := writeSeries(t, g)
			mask := testMask(s, g.segments)
			for _, empty := range []bool{false, true} {
				path := filepath.Join(t.TempDir(), "seg.dcm")
				sum, err := WriteFile(path, s, mask, Options{Segments: testSegments(g.segments), EmptyFrames: empty, Now: fixedNow})
				if err != nil {
					t.Fatal(err)
				}
				seg, err := ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				checkRead(t, seg, sum, s, g.segments)
				got, info, err := seg.Mask(s)
				if err != nil {
					t.Fatal(err)
				}
				if info.Overlapping != 0 || info.ByPosition != 0 {
					t.Errorf("empty frames %v: %+v, want no overlap and every frame placed by its source", empty, info)
				}
				if i := firstDiff(got, mask); i >= 0 {
					t.Fatalf("empty frames %v: voxel %d (x %d, y %d, z %d) is %d, the mask's %d", empty, i, i%s.Columns, i/s.Columns%s.Rows, i/(s.Columns*s.Rows), got[i], mask[i])
				}
			}
		})
	}
}

// checkRead compares what ReadFile read with what the writer says it wrote.
func checkRead(t *testing.T, seg *SEG, sum *Summary, s *dicom.Series, segments int) {
	t.Helper()
	if seg.SOPInstanceUID != sum.SOPInstanceUID || seg.SeriesInstanceUID != sum.SeriesInstanceUID || seg.StudyInstanceUID != s.StudyUID ||
		seg.FrameOfReferenceUID != s.Slices[0].File.Context.FrameOfReferenceUID || seg.FrameOfReferenceUID == "" {
		t.Errorf("UIDs read as %s %s %s %s", seg.SOPInstanceUID, seg.SeriesInstanceUID, seg.StudyInstanceUID, seg.FrameOfReferenceUID)
	}
	if len(seg.Frames) != sum.Frames || seg.Rows != s.Rows || seg.Columns != s.Columns {
		t.Errorf("%d frames of %dx%d, the writer wrote %d of %dx%d", len(seg.Frames), seg.Rows, seg.Columns, sum.Frames, s.Rows, s.Columns)
	}
	want := testSegments(segments)
	if len(seg.Segments) != len(want) {
		t.Fatalf("%d segments, want %d", len(seg.Segments), len(want))
	}
	for i, sg := range seg.Segments {
		w := want[i]
		if sg.Number != w.Number || sg.Label != w.Label || sg.Category != w.Category || sg.Type != w.Type || seg.AlgorithmTypes[i] != "AUTOMATIC" ||
			sg.Algorithm != w.Algorithm || sg.AlgorithmVersion != w.AlgorithmVersion {
			t.Errorf("segment %d read as %+v (%s), written as %+v", i+1, sg, seg.AlgorithmTypes[i], w)
		}
		if n := seg.SegmentFrames(sg.Number); n != sum.FramesOf[sg.Number] {
			t.Errorf("segment %d: %d frames read, %d written", sg.Number, n, sum.FramesOf[sg.Number])
		}
	}
	if len(seg.ReferencedSeries) != 1 || seg.ReferencedSeries[0].UID != s.UID {
		t.Errorf("referenced series %+v, want %s", seg.ReferencedSeries, s.UID)
	}
	fr := s.Slices[0].File.Frames[0]
	near := func(a, b []float64) bool {
		for i := range a {
			if math.Abs(a[i]-b[i]) > 1e-9 {
				return false
			}
		}
		return true
	}
	if !near(seg.Orientation[:], fr.Orientation[:]) || !near(seg.PixelSpacing[:], fr.PixelSpacing[:]) { // DS: 16 characters
		t.Errorf("geometry read as %v %v, the series' %v %v", seg.Orientation, seg.PixelSpacing, fr.Orientation, fr.PixelSpacing)
	}
}

func firstDiff(a, b []byte) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// writtenSEG writes and reads back the SEG of g's test mask.
func writtenSEG(t *testing.T, g geom) (*SEG, *dicom.Series, []byte) {
	t.Helper()
	_, s := writeSeries(t, g)
	mask := testMask(s, g.segments)
	b, _ := writeSEG(t, s, mask, Options{Segments: testSegments(g.segments)})
	seg, err := readBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return seg, s, mask
}

// TestMaskByPosition: frames without a source reference (or a multi-frame source without
// the frame number) are placed by their position; a position on no slice, or beside the
// grid, fails with ErrReference.
func TestMaskByPosition(t *testing.T) {
	t.Parallel()
	seg, s, mask := writtenSEG(t, geometries[4]) // reversed file order
	for i := range seg.Frames {
		seg.Frames[i].SourceSOPInstanceUID = ""
	}
	got, info, err := seg.Mask(s)
	if err != nil {
		t.Fatal(err)
	}
	if info.ByPosition != len(seg.Frames) || !bytes.Equal(got, mask) {
		t.Fatalf("by position: %d of %d frames placed, mask equal: %v", info.ByPosition, len(seg.Frames), bytes.Equal(got, mask))
	}
	off := *seg
	off.Frames = append([]FrameInfo(nil), seg.Frames...)
	off.Frames[1].Position[2] += 1.25 // between two slices 2.5 mm apart
	if _, _, err := off.Mask(s); !errors.Is(err, ErrReference) {
		t.Errorf("a frame between slices: error %v, want ErrReference", err)
	}
	off.Frames[1] = seg.Frames[1]
	off.Frames[1].Position[0] += 0.4 // on a slice's plane, beside the grid
	if _, _, err := off.Mask(s); !errors.Is(err, ErrReference) {
		t.Errorf("a frame beside the grid: error %v, want ErrReference", err)
	}
	off.Frames[1] = seg.Frames[1]
	off.Frames[1].HasPosition = false
	if _, _, err := off.Mask(s); !errors.Is(err, ErrReference) {
		t.Errorf("a frame with neither source nor position: error %v, want ErrReference", err)
	}
}

// TestMaskRefusesAnotherSeries: a frame whose source is not in the series, another frame of
// reference, another image size, a frame lying a slice away from its source, a series that
// failed, each fail with ErrReference.
func TestMaskRefusesAnotherSeries(t *testing.T) {
	t.Parallel()
	seg, s, _ := writtenSEG(t, geometries[3]) // oblique
	_, other := writeSeries(t, geometries[5])
	cases := map[string]func(x *SEG) *dicom.Series{
		"unknown source":     func(x *SEG) *dicom.Series { x.Frames[2].SourceSOPInstanceUID = "1.2.3.999"; return s },
		"no such frame":      func(x *SEG) *dicom.Series { x.Frames[2].SourceFrame = 2; return s },
		"frame of reference": func(x *SEG) *dicom.Series { x.FrameOfReferenceUID = "1.2.3.998"; return s },
		"image size":         func(*SEG) *dicom.Series { return other },
		"failed series": func(*SEG) *dicom.Series {
			bad := *s
			bad.Err = fmt.Errorf("%w: test", dicom.ErrGeometry)
			return &bad
		},
		"moved frame": func(x *SEG) *dicom.Series {
			p := s.Slices[len(s.Slices)-1].Position // the last slice's position, on another slice's frame
			x.Frames[0].Position = p
			return s
		},
	}
	for name, change := range cases {
		x := *seg
		x.Frames = append([]FrameInfo(nil), seg.Frames...)
		if _, _, err := x.Mask(change(&x)); !errors.Is(err, ErrReference) {
			t.Errorf("%s: error %v, want ErrReference", name, err)
		}
	}
}

// TestMaskOverlap: BINARY segments may overlap: the higher number wins, and the overlapping
// voxels are counted once each, however many segments meet there.
func TestMaskOverlap(t *testing.T) {
	t.Parallel()
	_, s := writeSeries(t, geometries[0]) // 16 rows x 20 columns, 6 slices
	rows, cols := s.Rows, s.Columns
	px := func(set ...int) []byte {
		p := make([]byte, rows*cols)
		for _, k := range set {
			p[k] = 1
		}
		return p
	}
	src := s.Slices[2].File.SOPInstanceUID
	b := testSEG{rows: rows, cols: cols, segments: []int{1, 2, 3}, forUID: s.Slices[0].File.Context.FrameOfReferenceUID, frames: []testFrame{
		{seg: 3, src: src, px: px(0, 1)},
		{seg: 1, src: src, px: px(0, 1, 2, 3)},
		{seg: 2, src: src, px: px(1, 3, 4)},
	}}
	seg, err := readBytes(b.file())
	if err != nil {
		t.Fatal(err)
	}
	got, info, err := seg.Mask(s)
	if err != nil {
		t.Fatal(err)
	}
	// row 0 of the frame is y = rows-1 on slice 2
	base := 2*rows*cols + (rows-1)*cols
	want := []byte{3, 3, 1, 2, 2}
	if !bytes.Equal(got[base:base+5], want) || info.Overlapping != 3 {
		t.Fatalf("overlap: %v with %d overlapping voxels, want %v with 3", got[base:base+5], info.Overlapping, want)
	}
	if n := bytes.Count(got, []byte{0}); n != len(got)-5 {
		t.Fatalf("%d voxels set, want 5", len(got)-n)
	}
}
