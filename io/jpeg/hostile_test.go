package jpeg

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"
)

// smallStream is a small lossless stream with restart intervals, APPn/COM segments and fill
// bytes, and its image.
func smallStream(seed uint64) ([]byte, []uint16, encOpts) {
	rng := rand.New(rand.NewPCG(seed, 13))
	o := encOpts{w: 13, h: 9, precision: 12, predictor: 4, restartRows: 2, extras: true, randomTable: true}
	px := mrImage(o.w, o.h, o.precision, rng)
	return encodeLossless(px, o, rng), px, o
}

// segmentAt returns the offset of the first marker segment m before the scan data.
func segmentAt(t *testing.T, src []byte, m byte) int {
	t.Helper()
	end := bytes.Index(src, []byte{0xFF, 0xDA})
	i := bytes.Index(src[:end+2], []byte{0xFF, m})
	if i < 0 {
		t.Fatalf("no marker %02X", m)
	}
	return i
}

// TestTruncatedEverywhere cuts a stream at every position: each cut fails with ErrTruncated
// or ErrCorrupt in both paths, never succeeds; padding after EOI is ignored.
func TestTruncatedEverywhere(t *testing.T) {
	t.Parallel()
	src, px, o := smallStream(1)
	for k := range len(src) {
		_, err := decodeBoth(t, src[:k], o.w, o.h, 2)
		if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d of %d: %v", k, len(src), err)
		}
	}
	got, err := decodeBoth(t, append(bytes.Clone(src), 0, 0, 0xFF, 0x12), o.w, o.h, 2)
	if err != nil {
		t.Fatal(err)
	}
	wantLossless(t, got, px, 0, 2)
}

// TestCorruptTables checks Huffman tables whose codes do not fit, whose counts exceed 256,
// and scans naming tables never defined.
func TestCorruptTables(t *testing.T) {
	t.Parallel()
	src, _, o := smallStream(2)
	dht := segmentAt(t, src, 0xC4)
	for name, edit := range map[string]func(b []byte){
		"3 codes of 1 bit":  func(b []byte) { b[dht+5] = 3 },
		"counts over 256":   func(b []byte) { b[dht+5+15], b[dht+5+14] = 255, 255 },
		"undefined table":   func(b []byte) { b[dht+4] = 3 },
		"AC class only":     func(b []byte) { b[dht+4] = 0x10 },
		"table class 2":     func(b []byte) { b[dht+4] = 0x20 },
		"9 codes of 3 bits": func(b []byte) { copy(b[dht+5:], []byte{0, 0, 9}) },
	} {
		b := bytes.Clone(src)
		edit(b)
		if _, err := decodeBoth(t, b, o.w, o.h, 2); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// TestLyingLengths checks segments whose length runs past the data, is under 2, or does not
// match the content.
func TestLyingLengths(t *testing.T) {
	t.Parallel()
	src, _, o := smallStream(3)
	for _, c := range []struct {
		m      byte
		length int
		want   error
	}{
		{0xC4, 60000, ErrTruncated}, {0xC4, 1, ErrCorrupt}, {0xC4, 19, ErrCorrupt},
		{0xC3, 12, ErrCorrupt}, {0xC3, 10, ErrCorrupt}, {0xDA, 9, ErrCorrupt}, {0xDD, 5, ErrCorrupt},
		{0xFE, 65535, ErrTruncated}, {0xE0, 0, ErrCorrupt},
	} {
		b := bytes.Clone(src)
		at := segmentAt(t, b, c.m)
		b[at+2], b[at+3] = byte(c.length>>8), byte(c.length)
		if _, err := decodeBoth(t, b, o.w, o.h, 2); !errors.Is(err, c.want) {
			t.Errorf("marker %02X of length %d: %v, want %v", c.m, c.length, err, c.want)
		}
	}
}

// TestFrameHeaders checks frame and scan headers against the caller and the processes
// refused.
func TestFrameHeaders(t *testing.T) {
	t.Parallel()
	src, _, o := smallStream(4)
	sof := segmentAt(t, src, 0xC3)
	sos := segmentAt(t, src, 0xDA)
	edit := func(at int, v ...byte) []byte {
		b := bytes.Clone(src)
		copy(b[at:], v)
		return b
	}
	for _, c := range []struct {
		name string
		src  []byte
		sb   int
		want []error
	}{
		{"65535x65535", edit(sof+5, 0xFF, 0xFF, 0xFF, 0xFF), 2, []error{ErrMismatch}},
		{"width 0", edit(sof+7, 0, 0), 2, []error{ErrCorrupt}},
		{"precision 17", edit(sof+4, 17), 2, []error{ErrMismatch}},
		{"precision 12 in a byte", src, 1, []error{ErrMismatch}},
		{"precision 1", edit(sof+4, 1), 2, []error{ErrCorrupt}},
		{"3 bytes a sample", src, 3, []error{ErrMismatch}},
		{"predictor 0", edit(sos+7, 0), 2, []error{ErrCorrupt}},
		{"predictor 8", edit(sos+7, 8), 2, []error{ErrCorrupt}},
		{"point transform 12", edit(sos+9, 12), 2, []error{ErrCorrupt}},
		{"progressive", edit(sof+1, 0xC2), 2, []error{ErrUnsupported}},
		{"arithmetic", edit(sof+1, 0xCB), 2, []error{ErrUnsupported}},
		{"differential", edit(sof+1, 0xC7), 2, []error{ErrUnsupported}},
		{"2 components", twoComponents(src, sof), 2, []error{ErrUnsupported, ErrMismatch}},
		{"scan of another component", edit(sos+5, 9), 2, []error{ErrCorrupt}},
	} {
		dst := make([]byte, o.w*o.h*c.sb)
		err := Decode(dst, c.src, o.w, o.h, c.sb)
		for _, want := range c.want {
			if !errors.Is(err, want) {
				t.Errorf("%s: %v, want %v", c.name, err, want)
			}
		}
	}
	for name, dims := range map[string][3]int{"width": {o.w + 1, o.h, 2}, "height": {o.w, o.h - 1, 2}, "dst": {o.w, o.h, 2}} {
		dst := make([]byte, dims[0]*dims[1]*dims[2])
		if name == "dst" {
			dst = dst[1:]
		}
		if err := Decode(dst, src, dims[0], dims[1], dims[2]); !errors.Is(err, ErrMismatch) {
			t.Errorf("%s: %v, want ErrMismatch", name, err)
		}
	}
}

// twoComponents rewrites the frame header with a second component.
func twoComponents(src []byte, sof int) []byte {
	b := append(bytes.Clone(src[:sof+13]), 8, 0x11, 0)
	b[sof+3], b[sof+9] = 8+6, 2
	return append(b, src[sof+13:]...)
}

// TestRestartSequence swaps an RSTm for another number: ErrCorrupt; and drops one: a
// failure.
func TestRestartSequence(t *testing.T) {
	t.Parallel()
	src, _, o := smallStream(5)
	i := bytes.Index(src, []byte{0xFF, 0xD1})
	b := bytes.Clone(src)
	b[i+1] = 0xD2
	if _, err := decodeBoth(t, b, o.w, o.h, 2); !errors.Is(err, ErrCorrupt) {
		t.Errorf("RST2 for RST1: %v", err)
	}
	b = append(bytes.Clone(src[:i]), src[i+2:]...)
	if _, err := decodeBoth(t, b, o.w, o.h, 2); err == nil {
		t.Error("a missing RST1 decoded")
	}
}

// TestDNL decodes a frame whose height is left to a DNL segment after the scan.
func TestDNL(t *testing.T) {
	t.Parallel()
	src, px, o := smallStream(6)
	sof := segmentAt(t, src, 0xC3)
	b := bytes.Clone(src[:len(src)-2])
	b[sof+5], b[sof+6] = 0, 0
	b = append(b, 0xFF, 0xDC, 0, 4, 0, byte(o.h), 0xFF, 0xD9)
	if in, err := ReadInfo(b); err != nil || in.Height != 0 {
		t.Fatalf("ReadInfo: %+v, %v", in, err)
	}
	got, err := decodeBoth(t, b, o.w, o.h, 2)
	if err != nil {
		t.Fatal(err)
	}
	wantLossless(t, got, px, 0, 2)
	if _, err := decodeBoth(t, b, o.w, o.h+1, 2); err == nil {
		t.Error("a DNL for fewer rows than the caller's decoded")
	}
	if _, err := decodeBoth(t, src[:len(src)-2], o.w, o.h, 2); !errors.Is(err, ErrTruncated) {
		t.Errorf("no EOI: %v", err)
	}
}

// TestMutations flips random bytes of small streams: never a panic, and the two paths agree
// (decodeBoth).
func TestMutations(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range iterations(20000, 3000) {
		src, _, o := smallStream(uint64(i % 10))
		for range 1 + rng.IntN(4) {
			src[rng.IntN(len(src))] = byte(rng.IntN(256))
		}
		decodeBoth(t, src, o.w, o.h, 2)
	}
}

// TestAllocation checks that decoding allocates the same whatever the frame's size: small
// tables, nothing by its dimensions or its length.
func TestAllocation(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	alloc := func(w, h int) uint64 {
		o := encOpts{w: w, h: h, precision: 16, predictor: 1}
		src := encodeLossless(noiseImage(w, h, 16, rng), o, rng)
		dst := make([]byte, w*h*2)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 10 {
			if err := Decode(dst, src, w, h, 2); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / 10
	}
	small, large := alloc(16, 16), alloc(1024, 512)
	if large > small+4096 || small > 64<<10 {
		t.Fatalf("a decode allocates %d bytes for 16x16, %d for 1024x512", small, large)
	}
}
