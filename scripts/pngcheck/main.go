// Command pngcheck fails unless a PNG screenshot exists and shows something: it decodes the
// file and requires enough pixels that differ from the background (the most common colour)
// and enough distinct colours. scripts/report-screenshot.sh runs it on the report's screenshot.
//
// Usage: go run ./scripts/pngcheck FILE.png
package main

import (
	"fmt"
	"image"
	"image/png"
	"os"
)

// A rendered report has text, tables and charts: far more than these.
const (
	minInkFraction = 0.02 // of pixels not in the background colour
	minColours     = 16
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: pngcheck FILE.png")
		os.Exit(2)
	}
	if err := check(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "pngcheck:", err)
		os.Exit(1)
	}
}

func check(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	ink, colours, total := measure(img)
	fmt.Printf("%s: %dx%d, %d colours, %.1f%% of pixels off the background\n",
		path, img.Bounds().Dx(), img.Bounds().Dy(), colours, 100*ink)
	if total == 0 || ink < minInkFraction || colours < minColours {
		return fmt.Errorf("%s looks blank (%.2f%% ink, %d colours; want >= %.0f%% and >= %d)",
			path, 100*ink, colours, 100*minInkFraction, minColours)
	}
	return nil
}

// measure returns the fraction of pixels that differ from the most common colour, and the
// number of distinct colours.
func measure(img image.Image) (ink float64, colours, total int) {
	counts := map[[4]uint32]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			counts[[4]uint32{r, g, bl, a}]++
			total++
		}
	}
	background := 0
	for _, n := range counts {
		background = max(background, n)
	}
	if total == 0 {
		return 0, 0, 0
	}
	return float64(total-background) / float64(total), len(counts), total
}
