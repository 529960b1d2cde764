package jpegls

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"voxpipe/internal/dicomtest"
	"voxpipe/internal/testexec"
)

// requireTool returns the path of an encoder or decoder (testexec.Tool).
func requireTool(t testing.TB, name string) string {
	t.Helper()
	return testexec.Tool(t, name, "dcmtk, libgdcm-tools")
}

// picture describes a test image: an MR-like smooth object with noise inside an ellipse,
// on a flat background (which exercises run mode).
type picture struct {
	w, h           int
	allocated      int // 8 or 16
	stored         int
	signed         bool
	noise          int // uniform noise amplitude inside the object
	background     int // the flat background's value
	seed           uint64
	fullRangeNoise bool // noise over the whole range instead (hard for the coder)
}

// values are the picture's samples as stored values (two's complement in stored bits where
// signed), as dicomtest writes them.
func (p picture) values() []uint32 {
	r := rand.New(rand.NewPCG(p.seed, 7))
	top := 1<<p.stored - 1
	lo, hi := 0, top
	if p.signed {
		lo, hi = -(top+1)/2, top/2
	}
	v := make([]uint32, p.w*p.h)
	for y := range p.h {
		for x := range p.w {
			s := p.sample(r, x, y, lo, hi)
			v[y*p.w+x] = uint32(s) & uint32(top)
		}
	}
	return v
}

func (p picture) sample(r *rand.Rand, x, y, lo, hi int) int {
	if p.fullRangeNoise {
		return lo + r.IntN(hi-lo+1)
	}
	dx := float64(x-p.w/2) / float64(p.w)
	dy := float64(y-p.h/2) / float64(p.h)
	if dx*dx+dy*dy > 0.16 {
		return min(max(p.background, lo), hi)
	}
	span := float64(hi - lo)
	s := float64(lo) + span*(0.45+0.3*math.Sin(float64(x)/11)*math.Cos(float64(y)/7))
	n := 0
	if p.noise > 0 {
		n = r.IntN(2*p.noise+1) - p.noise
	}
	return min(max(int(s)+n, lo), hi)
}

// file is the picture as an uncompressed Part 10 file.
func (p picture) file(v []uint32) []byte {
	return dicomtest.Image{
		IDs:      dicomtest.IDs{StudyUID: "1.2.3", SeriesUID: "1.2.3.4", SOPUID: "1.2.3.4.5", Number: 1, Instance: 1},
		Geometry: dicomtest.Geometry{Rows: p.h, Columns: p.w, Orientation: [6]float64{1, 0, 0, 0, 1, 0}, Spacing: [2]float64{1, 1}},
		Pixels:   dicomtest.Pixels{BitsAllocated: p.allocated, BitsStored: p.stored, Signed: p.signed, Values: v},
	}.File()
}

// dcmtkEncode encodes the file with dcmcjpls and the given options and returns the
// JPEG-LS stream of its one frame and the encoded file.
func dcmtkEncode(t testing.TB, file []byte, opts ...string) (stream, encoded []byte) {
	t.Helper()
	encoded = dicomtest.Transcode(t, file, "dcmcjpls", opts...)
	return frameStream(t, encoded), encoded
}

// frameStream concatenates the fragments of a one-frame encapsulated file.
func frameStream(t testing.TB, encoded []byte) []byte {
	t.Helper()
	_, frags, err := dicomtest.Fragments(encoded)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Join(frags, nil)
}

// dcmtkDecode decodes an encapsulated JPEG-LS file with dcmdjpls and returns its pixel data.
func dcmtkDecode(t testing.TB, encoded []byte) []byte {
	return toolDecode(t, encoded, "dcmdjpls", "+te")
}

// gdcmDecode decodes an encapsulated JPEG-LS file with gdcmconv (CharLS 2) and returns its
// pixel data.
func gdcmDecode(t testing.TB, encoded []byte) []byte {
	return toolDecode(t, encoded, "gdcmconv", "--raw")
}

// toolDecode decodes an encapsulated file with a tool and returns the native pixel data.
func toolDecode(t testing.TB, encoded []byte, tool string, opts ...string) []byte {
	t.Helper()
	px, ok := pixelData(dicomtest.Transcode(t, encoded, tool, opts...))
	if !ok {
		t.Fatalf("no native pixel data in %s's output", tool)
	}
	return px
}

// pixelData returns the native pixel data of a decoder's output file.
func pixelData(file []byte) ([]byte, bool) { return dicomtest.NativePixels(file) }

// samples reads n samples of sb bytes in little endian (DICOM's) order.
func samples(b []byte, n, sb int) []int { return samplesIn(binary.LittleEndian, b, n, sb) }

// samplesIn reads n samples of sb bytes in the given order.
func samplesIn(order binary.ByteOrder, b []byte, n, sb int) []int {
	s := make([]int, n)
	for i := range s {
		if sb == 1 {
			s[i] = int(b[i])
		} else {
			s[i] = int(order.Uint16(b[2*i:]))
		}
	}
	return s
}

// decodeBoth decodes the stream with Decode and with the reference decoder, fails the test
// where either fails or they differ, and returns the samples.
func decodeBoth(t *testing.T, stream []byte, w, h, sb int) []int {
	t.Helper()
	fast, ref := make([]byte, w*h*sb), make([]byte, w*h*sb)
	if err := Decode(fast, stream, w, h, sb); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if err := decodeReference(ref, stream, w, h, sb); err != nil {
		t.Fatalf("reference: %v", err)
	}
	if !bytes.Equal(fast, ref) {
		t.Fatalf("Decode and the reference differ at byte %d", firstDiff(fast, ref))
	}
	return samplesIn(binary.NativeEndian, fast, w*h, sb)
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
