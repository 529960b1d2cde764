package main

import (
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
	if err := check(writePNG(t, blank)); err == nil {
		t.Error("a white image passed")
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
	if err := check(writePNG(t, drawn)); err != nil {
		t.Error(err)
	}
	if err := check(filepath.Join(t.TempDir(), "missing.png")); err == nil {
		t.Error("a missing file passed")
	}
}
