package pngcheck

import (
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

func writePNG(t *testing.T, img image.Image) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shot.png")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBlankAndDrawn(t *testing.T) {
	t.Parallel()
	blank := image.NewRGBA(image.Rect(0, 0, 100, 100))
	for i := range blank.Pix {
		blank.Pix[i] = 0xff
	}
	if _, err := File(writePNG(t, blank)); !errors.Is(err, ErrBlank) {
		t.Errorf("a white image: %v, want ErrBlank", err)
	}
	// 20% of the pixels in 40 shades: passes.
	drawn := image.NewRGBA(image.Rect(0, 0, 100, 100))
	for y := range 100 {
		for x := range 100 {
			c := color.RGBA{0xff, 0xff, 0xff, 0xff}
			if y < 20 {
				c = color.RGBA{uint8(x % 40 * 5), 0x40, 0x80, 0xff}
			}
			drawn.Set(x, y, c)
		}
	}
	s, err := File(writePNG(t, drawn))
	if err != nil {
		t.Error(err)
	}
	if s.Width != 100 || s.Height != 100 || s.Colours != 41 || s.Ink != 0.2 {
		t.Errorf("drawn: %+v, want 100x100, 41 colours, 20%% ink", s)
	}
	if _, err := File(filepath.Join(t.TempDir(), "missing.png")); err == nil || errors.Is(err, ErrBlank) {
		t.Errorf("a missing file: %v, want an error other than ErrBlank", err)
	}
}
