// Package pngcheck tells whether a PNG picture shows something: enough pixels that differ
// from its background (the most common colour) and enough distinct colours. Tests use it on
// the pictures voxpipe draws; scripts/pngcheck runs it on the report's browser screenshot.
package pngcheck

import (
	"errors"
	"fmt"
	"image"
	"image/png"

	"voxpipe/internal/regular"
)

// The least a picture needs to show something: a rendered report or preview has text,
// tables, charts or slices, far more than these.
const (
	MinInkFraction = 0.02 // of pixels not in the background colour
	MinColours     = 16
)

// ErrBlank: the picture shows too little (see MinInkFraction and MinColours).
var ErrBlank = errors.New("pngcheck: picture looks blank")

// Stats is what Measure finds in a picture.
type Stats struct {
	Width, Height int
	Colours       int     // distinct colours
	Ink           float64 // fraction of the pixels not in the most common colour
}

func (s Stats) String() string {
	return fmt.Sprintf("%dx%d, %d colours, %.1f%% of pixels off the background", s.Width, s.Height, s.Colours, 100*s.Ink)
}

// Measure counts img's colours and the fraction of its pixels off the most common one.
func Measure(img image.Image) Stats {
	counts := map[[4]uint32]int{}
	b := img.Bounds()
	total := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			counts[[4]uint32{r, g, bl, a}]++
			total++
		}
	}
	s := Stats{Width: b.Dx(), Height: b.Dy()}
	if total == 0 {
		return s
	}
	background := 0
	for _, n := range counts {
		background = max(background, n)
	}
	s.Colours, s.Ink = len(counts), float64(total-background)/float64(total)
	return s
}

// Image measures img and fails with ErrBlank when it shows too little.
func Image(img image.Image) (Stats, error) {
	s := Measure(img)
	if s.Width*s.Height == 0 || s.Ink < MinInkFraction || s.Colours < MinColours {
		return s, fmt.Errorf("%w (%.2f%% ink, %d colours; want >= %.0f%% and >= %d)",
			ErrBlank, 100*s.Ink, s.Colours, 100*MinInkFraction, MinColours)
	}
	return s, nil
}

// File decodes the PNG file at path and checks it as Image does; errors name the path.
func File(path string) (Stats, error) {
	f, _, err := regular.Open(path)
	if err != nil {
		return Stats{}, err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return Stats{}, fmt.Errorf("pngcheck: decode %s: %w", path, err)
	}
	s, err := Image(img)
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
