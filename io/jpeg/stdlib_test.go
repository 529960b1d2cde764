package jpeg

import (
	"bytes"
	"fmt"
	goimage "image"
	stdjpeg "image/jpeg"
	"math/rand/v2"
	"testing"
)

// Go's image/jpeg is an independent baseline decoder (and encoder): on greyscale frames it
// encodes, Decode agrees with its decoding within 1 (its IDCT rounds differently from IJG's
// islow, which Decode follows to equal dcmdjpeg), at every quality and odd frame size, and
// differs on few pixels.
func TestBaselineAgainstImageJPEG(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(34, 1))
	for _, q := range []int{30, 75, 90, 100} {
		for _, size := range [][2]int{{64, 48}, {37, 61}, {8, 8}, {129, 3}} {
			t.Run(fmt.Sprintf("q%d-%dx%d", q, size[0], size[1]), func(t *testing.T) {
				w, h := size[0], size[1]
				img := goimage.NewGray(goimage.Rect(0, 0, w, h))
				for i, v := range mrImage(w, h, 8, rng) {
					img.Pix[i] = byte(v)
				}
				var b bytes.Buffer
				if err := stdjpeg.Encode(&b, img, &stdjpeg.Options{Quality: q}); err != nil {
					t.Fatal(err)
				}
				want, err := stdjpeg.Decode(bytes.NewReader(b.Bytes()))
				if err != nil {
					t.Fatal(err)
				}
				got, err := decodeBoth(t, b.Bytes(), w, h, 1)
				if err != nil {
					t.Fatal(err)
				}
				differ, g := 0, want.(*goimage.Gray)
				for y := range h {
					for x := range w {
						v, i := g.Pix[y*g.Stride+x], y*w+x
						if d := int(v) - int(got[i]); d != 0 {
							differ++
							if d < -1 || d > 1 {
								t.Fatalf("pixel (%d, %d): %d, image/jpeg %d", x, y, got[i], v)
							}
						}
					}
				}
				if differ > len(got)/10 {
					t.Errorf("%d of %d pixels differ from image/jpeg's by 1", differ, len(got))
				}
			})
		}
	}
}

// A sequential scan that declares spectral selection 0-0 (written by real encoders; pydicom's
// JPEG-lossy.dcm has one) decodes as the same scan declaring 0-63, as IJG's libjpeg (and so
// dcmtk) decodes it.
func TestSequentialScanIgnoresSpectralSelection(t *testing.T) {
	t.Parallel()
	img := goimage.NewGray(goimage.Rect(0, 0, 40, 24))
	for i, v := range mrImage(40, 24, 8, rand.New(rand.NewPCG(5, 6))) {
		img.Pix[i] = byte(v)
	}
	var b bytes.Buffer
	if err := stdjpeg.Encode(&b, img, &stdjpeg.Options{Quality: 80}); err != nil {
		t.Fatal(err)
	}
	want, err := decodeBoth(t, b.Bytes(), 40, 24, 1)
	if err != nil {
		t.Fatal(err)
	}
	odd := bytes.Clone(b.Bytes())
	sos := bytes.Index(odd, []byte{0xFF, 0xDA})
	n := int(odd[sos+4]) // components in the scan; Ss, Se, AhAl follow their selectors
	if odd[sos+5+2*n+1] != 63 {
		t.Fatalf("Se is %d, want 63 from image/jpeg", odd[sos+5+2*n+1])
	}
	odd[sos+5+2*n+1] = 0
	got, err := decodeBoth(t, odd, 40, 24, 1)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Se 0: %v, same samples %v", err, bytes.Equal(got, want))
	}
}
