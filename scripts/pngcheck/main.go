// Command pngcheck fails unless a PNG screenshot exists and shows something
// (voxpipe/internal/pngcheck: enough pixels off the background and enough distinct colours).
// scripts/report-screenshot.sh runs it on the report's screenshot.
//
// Usage: go run ./scripts/pngcheck FILE.png
package main

import (
	"fmt"
	"os"

	"voxpipe/internal/pngcheck"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: pngcheck FILE.png")
		os.Exit(2)
	}
	s, err := pngcheck.File(os.Args[1])
	if s.Width > 0 {
		fmt.Printf("%s: %s\n", os.Args[1], s)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pngcheck:", err)
		os.Exit(1)
	}
}
