package jpegls

import (
	"bytes"
	"fmt"
	"testing"

	"voxpipe/internal/dicomtest"
)

// encCase is a picture coded by the test encoder with the given options.
type encCase struct {
	p picture
	o encOpts
	// unjudged: no tool here decodes it (gdcmconv refuses MAXVAL below 2^P-1), so only the
	// round trip and the reference check it.
	unjudged bool
}

// encCases exercise what dcmcjpls does not write: restart intervals (RST0..7 cycling, an
// interval of one line, one not dividing the height), LSE parameters of every kind, MAXVAL
// below 2^P-1, low precisions, fill bytes, APPn/COM and the padded EOI.
var encCases = []encCase{
	{picture{w: 40, h: 37, allocated: 8, stored: 8, noise: 3, seed: 41}, encOpts{precision: 8, restart: 4}, false},
	{picture{w: 23, h: 19, allocated: 16, stored: 12, noise: 30, seed: 42}, encOpts{precision: 12, restart: 1, app: true, fill: true}, false},
	{picture{w: 50, h: 30, allocated: 16, stored: 12, noise: 30, seed: 43}, encOpts{precision: 12, near: 3, restart: 7, padEOI: true}, false},
	{picture{w: 31, h: 29, allocated: 16, stored: 16, noise: 200, seed: 44}, encOpts{precision: 16, t1: 5, t2: 50, t3: 500, reset: 300}, false},
	{picture{w: 31, h: 29, allocated: 8, stored: 8, noise: 4, seed: 45}, encOpts{precision: 8, near: 2, t1: 4, t2: 9, t3: 30, reset: 7}, false},
	{picture{w: 30, h: 20, allocated: 8, stored: 6, noise: 2, seed: 46}, encOpts{precision: 6}, false},
	{picture{w: 30, h: 20, allocated: 8, stored: 2, noise: 1, seed: 47}, encOpts{precision: 2}, false},
	{picture{w: 30, h: 20, allocated: 8, stored: 3, fullRangeNoise: true, seed: 48}, encOpts{precision: 3, near: 1}, false},
	{picture{w: 30, h: 20, allocated: 8, stored: 8, noise: 2, seed: 49}, encOpts{precision: 8, maxval: 127, reset: 100}, true},
	{picture{w: 30, h: 20, allocated: 16, stored: 12, noise: 9, seed: 50}, encOpts{precision: 12, maxval: 1000, near: 5}, true},
}

// values are the case's samples, bounded by the MAXVAL it is coded with.
func (c encCase) values() []int {
	v := c.p.values()
	top := 1<<c.o.precision - 1
	if c.o.maxval != 0 {
		top = c.o.maxval
	}
	s := make([]int, len(v))
	for i := range v {
		s[i] = min(int(v[i]), top)
	}
	return s
}

// TestEncoded decodes the test encoder's streams: lossless ones equal to the original,
// near-lossless ones within NEAR; both equal to gdcmconv's decoding (CharLS 2.4; dcmtk's
// older CharLS refuses restart intervals, precisions below 4 and MAXVAL below 2^P-1), the
// independent judge of the encoder.
func TestEncoded(t *testing.T) {
	t.Parallel()
	for _, c := range encCases {
		t.Run(fmt.Sprintf("%v_%+v", c.p, c.o), func(t *testing.T) {
			t.Parallel()
			p := c.p
			px := c.values()
			stream := encode(px, p.w, p.h, c.o)
			got := decodeBoth(t, stream, p.w, p.h, p.allocated/8)
			for i := range px {
				if d := got[i] - px[i]; d < -c.o.near || d > c.o.near {
					t.Fatalf("sample %d = %d, original %d, NEAR %d", i, got[i], px[i], c.o.near)
				}
			}
			if c.unjudged {
				return
			}
			want := samples(gdcmDecode(t, wrap(p, stream, c.o.near)), p.w*p.h, p.allocated/8)
			for i := range px {
				if got[i] != want[i] {
					t.Fatalf("sample %d = %d, gdcmconv %d", i, got[i], want[i])
				}
			}
		})
	}
}

// wrap puts a stream in a Part 10 file of the lossless or near-lossless JPEG-LS syntax.
func wrap(p picture, stream []byte, near int) []byte {
	syntax := "1.2.840.10008.1.2.4.80"
	if near > 0 {
		syntax = "1.2.840.10008.1.2.4.81"
	}
	return dicomtest.Image{
		Syntax:   syntax,
		IDs:      dicomtest.IDs{StudyUID: "1.2.3", SeriesUID: "1.2.3.4", SOPUID: "1.2.3.4.5", Number: 1, Instance: 1},
		Geometry: dicomtest.Geometry{Rows: p.h, Columns: p.w, Orientation: [6]float64{1, 0, 0, 0, 1, 0}, Spacing: [2]float64{1, 1}},
		Pixels: dicomtest.Pixels{BitsAllocated: p.allocated, BitsStored: p.stored,
			Encapsulated: dicomtest.Encapsulate([][]byte{stream}, 1, true, false)},
	}.File()
}

// TestEncoderMatchesDcmcjpls checks the test encoder against dcmcjpls: the same picture
// and parameters give the same scan data.
func TestEncoderMatchesDcmcjpls(t *testing.T) {
	t.Parallel()
	p := picture{w: 64, h: 40, allocated: 16, stored: 12, noise: 25, seed: 51}
	v := p.values()
	px := make([]int, len(v))
	for i := range v {
		px[i] = int(v[i])
	}
	for _, near := range []int{0, 2} {
		opts := []string{"+el"}
		if near > 0 {
			opts = []string{"+en", "+md", fmt.Sprint(near)}
		}
		ref, _ := dcmtkEncode(t, p.file(v), opts...)
		h, err := parseHeaders(ref)
		if err != nil {
			t.Fatal(err)
		}
		ours := encode(px, p.w, p.h, encOpts{precision: h.Precision, near: near})
		ho, err := parseHeaders(ours)
		if err != nil {
			t.Fatal(err)
		}
		a, b := ref[h.scanAt:scanEnd(ref, h.scanAt)], ours[ho.scanAt:scanEnd(ours, ho.scanAt)]
		if !bytes.Equal(a, b) {
			t.Errorf("NEAR %d (%+v, ours %+v): scan data differs from dcmcjpls's at byte %d of %d/%d", near, h.Info, ho.Info, firstDiff(a, b), len(a), len(b))
		}
	}
}

// TestLSEDefaults decodes an LSE before the frame header whose zero fields leave MAXVAL and
// T2 to their defaults.
func TestLSEDefaults(t *testing.T) {
	t.Parallel()
	p := picture{w: 30, h: 20, allocated: 16, stored: 12, noise: 20, seed: 52}
	c := encCase{p: p, o: encOpts{precision: 12, t1: 5, t3: 100, reset: 32, lseFirst: true}}
	px := c.values()
	stream := encode(px, p.w, p.h, c.o)
	info, err := ReadInfo(stream)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Info{Width: 30, Height: 20, Components: 1, Precision: 12, MaxVal: 4095, T1: 5, T2: 67, T3: 100, Reset: 32}); info != want {
		t.Fatalf("ReadInfo = %+v, want %+v", info, want)
	}
	got := decodeBoth(t, stream, p.w, p.h, 2)
	for i := range px {
		if got[i] != px[i] {
			t.Fatalf("sample %d = %d, want %d", i, got[i], px[i])
		}
	}
}
