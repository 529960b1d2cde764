package dicom

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"voxpipe/internal/dicomtest"
)

var axial = [6]float64{1, 0, 0, 0, 1, 0}

func testPixels(n int, signed bool) []uint16 {
	px := make([]uint16, n)
	for i := range px {
		v := (i*37)%200 + i/7 // some runs and some noise, for RLE
		if signed {
			px[i] = uint16(int16(v - 100))
		} else {
			px[i] = uint16(v * 150)
		}
	}
	return px
}

// TestParseSyntaxes parses the same image in each supported syntax (with private tags and an
// undefined-length private sequence in front) and checks the attributes and decoded pixels.
func TestParseSyntaxes(t *testing.T) {
	t.Parallel()
	px := testPixels(6*5, true)
	for _, ts := range []TransferSyntax{ImplicitVRLittleEndian, ExplicitVRLittleEndian, ExplicitVRBigEndian, DeflatedExplicitVRLE, RLELossless} {
		sp := sliceSpec{syntax: ts, uid: "1.2.3.4", instance: 3, pos: [3]float64{-10.5, 20, 7.25}, orient: axial,
			rows: 5, cols: 6, bitsStored: 16, signed: true, slope: 2, inter: -3, pixels: px, privateJunk: true}
		b := sp.file()
		f, err := Parse(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("%v: %v", ts, err)
		}
		fr := f.Frames[0]
		if f.Syntax != ts || f.SeriesInstanceUID != "1.2.3.4" || f.InstanceNumber != 3 || f.Rows != 5 || f.Columns != 6 ||
			f.SeriesDescription != "T1 / axial" || f.PatientID != "PID 42" || fr.Position != [3]float64{-10.5, 20, 7.25} ||
			fr.Orientation != axial || fr.PixelSpacing != [2]float64{0.5, 0.75} || fr.Slope != 2 || fr.Intercept != -3 || f.PixelRepresentation != 1 {
			t.Errorf("%v: parsed %+v, frame %+v", ts, f, fr)
		}
		got := make([]byte, 2*len(px))
		if err := f.readFrames(nil, got); err != nil {
			t.Fatalf("%v: pixels: %v", ts, err)
		}
		for i, v := range px {
			if g := hostOrder.Uint16(got[2*i:]); g != v {
				t.Fatalf("%v: pixel %d = %d, want %d", ts, i, g, v)
			}
		}
	}
}

// TestParseRefusesEncapsulated: a JPEG file parses (attributes, fragments) but its pixels are
// refused with an error naming the syntax.
func TestParseRefusesEncapsulated(t *testing.T) {
	t.Parallel()
	sp := sliceSpec{syntax: RLELossless, declare: "1.2.840.10008.1.2.4.91", uid: "1", rows: 2, cols: 2, bitsStored: 16, orient: axial, pixels: make([]uint16, 4)}
	b := sp.file()
	f, err := Parse(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	err = f.readFrames(nil, make([]byte, 8))
	if !errors.Is(err, ErrUnsupported) || !bytes.Contains([]byte(err.Error()), []byte("JPEG 2000 Image Compression (1.2.840.10008.1.2.4.91)")) {
		t.Errorf("got %v, want ErrUnsupported naming JPEG 2000", err)
	}
}

// TestParseHostile: lengths past the end, deep nesting, bad item tags and deflate bombs fail
// with the right sentinel, without allocating what the lengths claim.
func TestParseHostile(t *testing.T) {
	good := sliceSpec{syntax: ExplicitVRLittleEndian, uid: "1", rows: 2, cols: 2, bitsStored: 16, orient: axial, pixels: make([]uint16, 4)}.file()
	cases := map[string]struct {
		b    []byte
		want error
	}{
		"empty":       {nil, ErrNotDICOM},
		"text":        {[]byte("hello, this is not DICOM at all, not even close........"), ErrNotDICOM},
		"cut pixels":  {good[:len(good)-3], ErrTruncated},
		"cut header":  {good[:140], ErrTruncated},
		"huge length": {append(dicomtest.Part10(dicomtest.ExplicitVRLittleEndian, nil, false), dicomtest.NewEnc(dicomtest.ExplicitVRLittleEndian).Elem(0x00091010, "OB", nil).Bytes()[:8]...), ErrTruncated},
	}
	// An element declaring 4 GiB - 2 in a 200-byte file.
	e := dicomtest.NewEnc(dicomtest.ExplicitVRLittleEndian).Header(0x00091010, "OB", 0xFFFFFFFE)
	cases["4 GiB element"] = struct {
		b    []byte
		want error
	}{dicomtest.Part10(dicomtest.ExplicitVRLittleEndian, e.Bytes(), false), ErrTruncated}
	deep := dicomtest.NewEnc(dicomtest.ExplicitVRLittleEndian)
	for range maxDepth + 2 {
		deep.SeqStart(0x00091001, "SQ")
	}
	cases["deep nesting"] = struct {
		b    []byte
		want error
	}{dicomtest.Part10(dicomtest.ExplicitVRLittleEndian, deep.Bytes(), false), ErrCorrupt}
	bad := dicomtest.NewEnc(dicomtest.ExplicitVRLittleEndian).Header(0x00091001, "SQ", undefinedLength)
	bad.Tag(0x00100010).U32(0) // not an item
	cases["bad item"] = struct {
		b    []byte
		want error
	}{dicomtest.Part10(dicomtest.ExplicitVRLittleEndian, bad.Bytes(), false), ErrCorrupt}
	for name, c := range cases {
		_, err := Parse(bytes.NewReader(c.b), int64(len(c.b)))
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
	}

	old := maxInflated
	maxInflated = 1 << 20
	defer func() { maxInflated = old }()
	var z bytes.Buffer
	w, _ := flate.NewWriter(&z, flate.BestCompression)
	w.Write(make([]byte, 4<<20))
	w.Close()
	meta := dicomtest.Part10(dicomtest.DeflatedExplicitVRLE, nil, false)
	bomb := append(meta[:len(meta):len(meta)], z.Bytes()...)
	if _, err := Parse(bytes.NewReader(bomb), int64(len(bomb))); !errors.Is(err, ErrTooLarge) {
		t.Errorf("deflate bomb: got %v, want ErrTooLarge", err)
	}
}

// TestRLE decodes a frame with literal, replicate and no-op runs, and refuses ones that
// overflow or end early.
func TestRLE(t *testing.T) {
	t.Parallel()
	px := []uint16{0x0102, 0x0102, 0x0102, 0x0102, 0xFF00, 0x1234, 0x8000, 0x0001}
	frame := dicomtest.EncodeRLE16(px)
	got := make([]byte, 16)
	if err := decodeRLE(got, frame, 2); err != nil {
		t.Fatal(err)
	}
	for i, v := range px {
		if hostOrder.Uint16(got[2*i:]) != v {
			t.Fatalf("sample %d = %#x, want %#x", i, hostOrder.Uint16(got[2*i:]), v)
		}
	}
	short := bytes.Clone(frame[:len(frame)-4])
	if err := decodeRLE(got, short, 2); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short segment: %v", err)
	}
	over := bytes.Clone(frame)
	binary.LittleEndian.PutUint32(over[8:], uint32(len(over)+10))
	if err := decodeRLE(got, over, 2); !errors.Is(err, ErrCorrupt) {
		t.Errorf("segment past the end: %v", err)
	}
	if err := decodeRLE(got, frame, 1); !errors.Is(err, ErrCorrupt) {
		t.Errorf("segment count: %v", err)
	}
}

// TestDataSetValues decodes numbers as the VR says, in both byte orders.
func TestDataSetValues(t *testing.T) {
	t.Parallel()
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		us := make([]byte, 2)
		order.PutUint16(us, 512)
		fd := make([]byte, 8)
		order.PutUint64(fd, math.Float64bits(-2.5))
		d := &DataSet{order: order, elems: map[Tag]*value{
			tagEffectiveEchoTime: {vr: "FD", raw: fd},
			tagRows:              {vr: "US", raw: us},
			tagImagePosition:     {vr: "DS", raw: []byte(` -1.5\2e1\ 3 `)},
			tagSeriesNumber:      {vr: "IS", raw: []byte("12 ")},
		}}
		if d.float(tagEffectiveEchoTime, 0) != -2.5 || d.integer(tagRows, 0) != 512 || d.integer(tagSeriesNumber, 0) != 12 {
			t.Errorf("%v: %v %v %v", order, d.float(tagEffectiveEchoTime, 0), d.integer(tagRows, 0), d.integer(tagSeriesNumber, 0))
		}
		if p := d.floats(tagImagePosition); len(p) != 3 || p[0] != -1.5 || p[1] != 20 || p[2] != 3 {
			t.Errorf("DS: %v", p)
		}
	}
}
