package jpegls

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// smallStreams are tiny encoder outputs (lossless with runs, near-lossless, restarts, LSE),
// the seeds of the hostile and fuzz tests.
func smallStreams() [][]byte {
	var out [][]byte
	for _, c := range []encCase{
		{p: picture{w: 12, h: 9, allocated: 8, stored: 8, noise: 3, seed: 61}, o: encOpts{precision: 8}},
		{p: picture{w: 11, h: 7, allocated: 16, stored: 12, noise: 40, seed: 62}, o: encOpts{precision: 12, near: 2, restart: 3}},
		{p: picture{w: 9, h: 8, allocated: 16, stored: 16, fullRangeNoise: true, seed: 63}, o: encOpts{precision: 16, t1: 9, t2: 99, t3: 999, reset: 5}},
		{p: picture{w: 10, h: 6, allocated: 8, stored: 4, noise: 1, seed: 64}, o: encOpts{precision: 4, near: 1, app: true, padEOI: true}},
	} {
		out = append(out, encode(c.values(), c.p.w, c.p.h, c.o))
	}
	return out
}

// decodeAny decodes a stream at the size and sample width its header declares (small ones
// only), with Decode and the reference; it fails the test where they disagree and returns
// Decode's error.
func decodeAny(t *testing.T, stream []byte) error {
	t.Helper()
	info, err := ReadInfo(stream)
	if err != nil || info.Width*info.Height > 1<<16 || info.Width > 4096 || info.Height > 4096 {
		return err
	}
	sb := 1
	if info.Precision > 8 {
		sb = 2
	}
	fast, ref := make([]byte, info.Width*info.Height*sb), make([]byte, info.Width*info.Height*sb)
	errF := Decode(fast, stream, info.Width, info.Height, sb)
	errR := decodeReference(ref, stream, info.Width, info.Height, sb)
	switch {
	case (errF == nil) != (errR == nil):
		t.Fatalf("Decode: %v; reference: %v", errF, errR)
	case errF == nil && !bytes.Equal(fast, ref):
		t.Fatalf("Decode and the reference differ at byte %d", firstDiff(fast, ref))
	case errF != nil && !isOurs(errF), errR != nil && !isOurs(errR):
		t.Fatalf("an error outside the sentinels: %v / %v", errF, errR)
	}
	return errF
}

func isOurs(err error) bool {
	for _, s := range []error{ErrCorrupt, ErrTruncated, ErrUnsupported, ErrMismatch} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// TestTruncated cuts small streams at every position: each cut fails ErrTruncated or
// ErrCorrupt, in both decoders.
func TestTruncated(t *testing.T) {
	t.Parallel()
	for _, s := range smallStreams() {
		if err := decodeAny(t, s); err != nil {
			t.Fatalf("whole stream: %v", err)
		}
		info, _ := ReadInfo(s)
		for i := range len(s) - 1 { // the last byte is EOI's code
			cut := s[:i]
			sb := 1 + min(1, info.Precision/9)
			dst := make([]byte, info.Width*info.Height*sb)
			err := Decode(dst, cut, info.Width, info.Height, sb)
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("cut at %d of %d: %v", i, len(s), err)
			}
			if errR := decodeReference(dst, cut, info.Width, info.Height, sb); errR == nil {
				t.Fatalf("cut at %d of %d: the reference succeeded", i, len(s))
			}
		}
	}
}

// segmentAt returns the offset of the first marker segment with code in a stream.
func segmentAt(s []byte, code byte) int {
	return bytes.Index(s, []byte{0xFF, code})
}

// patched is a copy of s with b written at off.
func patched(s []byte, off int, b ...byte) []byte {
	c := bytes.Clone(s)
	copy(c[off:], b)
	return c
}

// TestHostileHeaders feeds lying lengths and absurd or out-of-range parameters.
func TestHostileHeaders(t *testing.T) {
	t.Parallel()
	plain := encode(make([]int, 8*6), 8, 6, encOpts{precision: 8})
	lse := encode(make([]int, 8*6), 8, 6, encOpts{precision: 8, t1: 3, t2: 7, t3: 21, reset: 64})
	sof, lseAt, sos := segmentAt(plain, markerSOF55), segmentAt(lse, markerLSE), segmentAt(plain, markerSOS)
	u16 := func(v int) []byte { return binary.BigEndian.AppendUint16(nil, uint16(v)) }
	cases := []struct {
		name   string
		stream []byte
		want   error
	}{
		{"empty", nil, ErrTruncated},
		{"no SOI", []byte{0xFF, 0xD9}, ErrCorrupt},
		{"SOF length past the end", patched(plain, sof+2, 0xFF, 0xF0), ErrTruncated},
		{"SOF length short", patched(plain, sof+2, 0, 5), ErrCorrupt},
		{"SOF length 1", patched(plain, sof+2, 0, 1), ErrCorrupt},
		{"precision 1", patched(plain, sof+4, 1), ErrCorrupt},
		{"precision 17", patched(plain, sof+4, 17), ErrCorrupt},
		{"height 0 (DNL)", patched(plain, sof+5, 0, 0), ErrUnsupported},
		{"width 0", patched(plain, sof+7, 0, 0), ErrCorrupt},
		{"SOS length lies", patched(plain, sos+2, 0, 9), ErrCorrupt},
		{"NEAR over MAXVAL/2", patched(plain, sos+7, 128), ErrCorrupt},
		{"interleave 3", patched(plain, sos+8, 3), ErrCorrupt},
		{"point transform", patched(plain, sos+9, 1), ErrUnsupported},
		{"mapping table", patched(plain, sos+6, 1), ErrUnsupported},
		{"thresholds out of order", patched(lse, lseAt+7, append(u16(8), u16(7)...)...), ErrCorrupt},
		{"T3 over MAXVAL", patched(lse, lseAt+11, u16(300)...), ErrCorrupt},
		{"T1 of 1 with NEAR 0 (valid)", patched(lse, lseAt+7, u16(1)...), nil},
		{"RESET 2", patched(lse, lseAt+13, u16(2)...), ErrCorrupt},
		{"MAXVAL over 2^P-1", patched(lse, lseAt+5, u16(256)...), ErrCorrupt},
		{"LSE id 2", patched(lse, lseAt+4, 2), ErrUnsupported},
		{"LSE id 4", patched(lse, lseAt+4, 4), ErrUnsupported},
		{"LSE id 9", patched(lse, lseAt+4, 9), ErrCorrupt},
		{"LSE length lies", patched(lse, lseAt+2, 0, 12), ErrCorrupt},
		{"baseline JPEG", patched(plain, sof+1, 0xC0), ErrUnsupported},
		{"EOI before the scan", patched(plain, sof+1, markerEOI), ErrCorrupt},
		{"three components", threeComponents(), ErrUnsupported},
	}
	for _, c := range cases {
		err := decodeAny(t, c.stream)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// threeComponents is a frame header of three components (and a scan of one).
func threeComponents() []byte {
	s := []byte{0xFF, markerSOI, 0xFF, markerSOF55, 0, 17, 8, 0, 2, 0, 2, 3, 1, 0x11, 0, 2, 0x11, 0, 3, 0x11, 0}
	return append(s, 0xFF, markerSOS, 0, 8, 1, 1, 0, 0, 0, 0, 0, 0xFF, markerEOI)
}

// TestMismatch checks the caller's frame against the header before any decoding.
func TestMismatch(t *testing.T) {
	t.Parallel()
	s := encode(make([]int, 8*6), 8, 6, encOpts{precision: 12})
	for _, c := range []struct{ w, h, sb, dst int }{
		{6, 8, 2, 96}, {8, 5, 2, 96}, {8, 6, 1, 48}, {8, 6, 3, 144}, {8, 6, 2, 95}, {0, 6, 2, 96},
	} {
		if err := Decode(make([]byte, c.dst), s, c.w, c.h, c.sb); !errors.Is(err, ErrMismatch) {
			t.Errorf("%+v: %v, want ErrMismatch", c, err)
		}
	}
	three := threeComponents()
	err := Decode(make([]byte, 8), three, 2, 2, 2)
	if !errors.Is(err, ErrMismatch) || !errors.Is(err, ErrUnsupported) {
		t.Errorf("three components: %v, want ErrMismatch and ErrUnsupported", err)
	}
}

// TestCorruptData flips bytes of the scan data: never a panic, both decoders agree.
func TestCorruptData(t *testing.T) {
	t.Parallel()
	for _, s := range smallStreams() {
		h, _ := parseHeaders(s)
		for i := h.scanAt; i < len(s)-2; i++ {
			for _, b := range []byte{0x00, 0xFF, s[i] ^ 0x55, 0x80} {
				_ = decodeAny(t, patched(s, i, b))
			}
		}
	}
}

// FuzzDecode: no panic; Decode and the reference agree on success and on the samples.
func FuzzDecode(f *testing.F) {
	for _, s := range smallStreams() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s []byte) { _ = decodeAny(t, s) })
}
