package dicomseg

import (
	"bytes"
	"errors"
	"testing"

	"voxpipe/internal/dicomtest"
)

// FuzzReadSEG feeds arbitrary bytes to the reader: nothing may panic, every error must wrap
// ErrNotSEG, and a SEG it accepts unpacks every frame. Seeds: SEGs built byte by byte
// (explicit and implicit VR, frames across byte boundaries) and one the writer wrote.
func FuzzReadSEG(f *testing.F) {
	f.Add(odd37x29("").file())
	f.Add(odd37x29(dicomtest.ImplicitVRLittleEndian).file())
	small := testSEG{rows: 3, cols: 3, segments: []int{1}, frames: []testFrame{{seg: 1, pos: []float64{1, 2, 3}, px: patternFrame(3, 3, 1)}}}
	f.Add(small.file())
	_, s := writeSeries(f, geometries[2])
	var buf bytes.Buffer
	if _, err := Write(&buf, s, testMask(s, 1), Options{Segments: testSegments(1), Now: fixedNow}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		seg, err := readBytes(b)
		if err != nil {
			if !errors.Is(err, ErrNotSEG) {
				t.Fatalf("error wraps no ErrNotSEG: %v", err)
			}
			return
		}
		dst := make([]byte, seg.Rows*seg.Columns)
		for i := range seg.Frames {
			if err := seg.Frame(i, dst); err != nil {
				t.Fatalf("frame %d of an accepted SEG: %v", i, err)
			}
		}
	})
}
