package jpeg

import (
	"bytes"
	"testing"

	"voxpipe/internal/dicomtest"
	"voxpipe/internal/testexec"
)

// requireTool returns the path of an encoder or decoder (testexec.Tool).
func requireTool(t testing.TB, name string) string {
	t.Helper()
	return testexec.Tool(t, name, "dcmtk, libgdcm-tools")
}

// image is a test picture to hand to the encoders.
type image struct {
	w, h, frames      int
	allocated, stored int
	signed            bool
	values            []uint32 // frame after frame
	syntax            string   // "": native
	encapsulated      [][]byte // frames' streams, where syntax is set
}

// file writes the image as a Part 10 file.
func (im image) file() []byte {
	px := dicomtest.Pixels{BitsAllocated: im.allocated, BitsStored: im.stored, Signed: im.signed, Values: im.values}
	if im.encapsulated != nil {
		px.Values = nil
		px.Encapsulated = dicomtest.Encapsulate(im.encapsulated, 1, true, false)
	}
	frames := 0
	if im.frames > 1 {
		frames = im.frames
	}
	return dicomtest.Image{
		Syntax:   im.syntax,
		IDs:      dicomtest.IDs{StudyUID: "1.2.3", SeriesUID: "1.2.3.4", SOPUID: "1.2.3.4.5", Number: 1, Instance: 1},
		Geometry: dicomtest.Geometry{Rows: im.h, Columns: im.w, Frames: frames, Orientation: [6]float64{1, 0, 0, 0, 1, 0}, Spacing: [2]float64{1, 1}},
		Pixels:   px,
	}.File()
}

// convert runs tool on file (dicomtest.Transcode) and returns the output file.
func convert(t *testing.T, file []byte, tool string, args ...string) []byte {
	t.Helper()
	return dicomtest.Transcode(t, file, tool, args...)
}

// frameStreams returns each frame's JPEG stream of an encapsulated file: a frame's fragments
// joined, frames told apart by the basic offset table, or where it is empty by the SOI marker
// that starts a frame's first fragment.
func frameStreams(t *testing.T, encoded []byte) [][]byte {
	t.Helper()
	offsets, frags, err := dicomtest.Fragments(encoded)
	if err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	pos := uint32(0)
	for _, f := range frags {
		starts := len(frames) == 0 || len(offsets) == 0 && bytes.HasPrefix(f, []byte{0xFF, 0xD8}) ||
			len(frames) < len(offsets) && pos == offsets[len(frames)]
		if starts {
			frames = append(frames, nil)
		}
		frames[len(frames)-1] = append(frames[len(frames)-1], f...)
		pos += 8 + uint32(len(f))
	}
	return frames
}

// nativePixels returns the native pixel data of a decoder's output file.
func nativePixels(t *testing.T, file []byte) []byte {
	t.Helper()
	px, ok := dicomtest.NativePixels(file)
	if !ok {
		t.Fatal("no native pixel data in the decoded file")
	}
	return px
}
