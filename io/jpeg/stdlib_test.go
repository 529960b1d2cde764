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
