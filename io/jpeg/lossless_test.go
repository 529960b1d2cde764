package jpeg

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// decodeBoth decodes src through the fast path and the reference and fails the test where
// they disagree (in success, or in output).
func decodeBoth(t testing.TB, src []byte, w, h, sb int) ([]byte, error) {
	t.Helper()
	fast, ref := make([]byte, w*h*sb), make([]byte, w*h*sb)
	errFast := Decode(fast, src, w, h, sb)
	errRef := decode(ref, src, w, h, sb, true)
	if (errFast == nil) != (errRef == nil) {
		t.Fatalf("fast path: %v; reference: %v", errFast, errRef)
	}
	if errFast == nil && !bytes.Equal(fast, ref) {
		t.Fatalf("fast path and reference decode differently (first at byte %d)", firstDiff(fast, ref))
	}
	return fast, errFast
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// iterations is n, or short under -short.
func iterations(n, short int) int {
	if testing.Short() {
		return short
	}
	return n
}

// samples converts decoded bytes (host order) back to values.
func samples(b []byte, sb int) []uint16 { return values(b, len(b)/sb, sb, binary.NativeEndian) }

// values reads n samples of sb bytes in the given byte order.
func values(b []byte, n, sb int, order binary.ByteOrder) []uint16 {
	v := make([]uint16, n)
	for i := range v {
		if sb == 1 {
			v[i] = uint16(b[i])
		} else {
			v[i] = order.Uint16(b[2*i:])
		}
	}
	return v
}

// wantLossless checks a lossless decode against the original: (orig>>pt)<<pt.
func wantLossless(t testing.TB, got []byte, orig []uint16, pt, sb int) {
	t.Helper()
	for i, v := range samples(got, sb) {
		if want := orig[i] >> pt << pt; v != want {
			t.Fatalf("sample %d (of %d) is %d, want %d", i, len(orig), v, want)
		}
	}
}

// randomOpts draws encoding options: any predictor, precision, point transform, restart
// interval and table.
func randomOpts(rng *rand.Rand) encOpts {
	o := encOpts{w: 1 + rng.IntN(40), h: 1 + rng.IntN(30), precision: 2 + rng.IntN(15), predictor: 1 + rng.IntN(7)}
	if rng.IntN(3) == 0 {
		o.w = 1 + rng.IntN(700) // more than a chunk
		o.h = 1 + rng.IntN(4)
	}
	o.pt = rng.IntN(min(o.precision, 16))
	if rng.IntN(2) == 0 {
		o.pt = 0
	}
	if rng.IntN(3) == 0 {
		o.restartRows = 1 + rng.IntN(o.h)
	}
	o.randomTable = rng.IntN(2) == 0
	o.tableID = rng.IntN(4)
	o.extras = rng.IntN(2) == 0
	return o
}

// TestLosslessRandom encodes random images with random options and decodes them with both
// paths: each must give back the image.
func TestLosslessRandom(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range iterations(3000, 500) {
		o := randomOpts(rng)
		var px []uint16
		if rng.IntN(2) == 0 {
			px = noiseImage(o.w, o.h, o.precision, rng)
		} else {
			px = mrImage(o.w, o.h, o.precision, rng)
		}
		src := encodeLossless(px, o, rng)
		sb := 1 + (o.precision-1)/8
		if o.precision <= 8 && rng.IntN(2) == 0 {
			sb = 2
		}
		got, err := decodeBoth(t, src, o.w, o.h, sb)
		if err != nil {
			t.Fatalf("case %d %+v: %v", i, o, err)
		}
		wantLossless(t, got, px, o.pt, sb)
	}
}

// TestLosslessInfo checks ReadInfo against what the encoder wrote.
func TestLosslessInfo(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	o := encOpts{w: 33, h: 20, precision: 12, predictor: 6, pt: 2, restartRows: 5, extras: true}
	in, err := ReadInfo(encodeLossless(mrImage(o.w, o.h, o.precision, rng), o, rng))
	if err != nil {
		t.Fatal(err)
	}
	want := Info{Process: Lossless, Width: 33, Height: 20, Components: 1, Precision: 12, Predictor: 6, PointTransform: 2, RestartInterval: 5 * 33}
	if in != want {
		t.Fatalf("ReadInfo = %+v, want %+v", in, want)
	}
}

// TestLosslessSSSS16 decodes differences of exactly 32768 (category 16, no extra bits) with
// 16-bit samples alternating 0 and 32768.
func TestLosslessSSSS16(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	for sel := 1; sel <= 7; sel++ {
		o := encOpts{w: 9, h: 7, precision: 16, predictor: sel}
		px := make([]uint16, o.w*o.h)
		for i := range px {
			px[i] = uint16(i%2) * 32768
		}
		src := encodeLossless(px, o, rng)
		got, err := decodeBoth(t, src, o.w, o.h, 2)
		if err != nil {
			t.Fatalf("predictor %d: %v", sel, err)
		}
		wantLossless(t, got, px, 0, 2)
	}
}

// BenchmarkDecodeLossless decodes a 512x512 12-bit MR-like frame coded with predictor 1.
func BenchmarkDecodeLossless(b *testing.B) {
	for _, sel := range []int{1, 4, 7} {
		b.Run(fmt.Sprintf("predictor%d", sel), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(7, 8))
			o := encOpts{w: 512, h: 512, precision: 12, predictor: sel}
			src := encodeLossless(mrImage(o.w, o.h, o.precision, rng), o, rng)
			dst := make([]byte, o.w*o.h*2)
			b.SetBytes(int64(len(dst)))
			for b.Loop() {
				if err := Decode(dst, src, o.w, o.h, 2); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
