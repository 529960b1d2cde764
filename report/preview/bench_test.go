package preview

import (
	"bytes"
	"os"
	"testing"

	"voxpipe/phantom"
)

// BenchmarkRender renders and encodes the preview of a phantom (its truth as the mask),
// 128x128x100 unless VOXPIPE_PREVIEW_DIMS says otherwise (512x512x1000 needs ~1 GB and a minute
// to generate: run it by hand).
//
//	VOXPIPE_PREVIEW_DIMS=512x512x1000 go test ./report/preview -run '^$' -bench Render -benchtime 3x
func BenchmarkRender(b *testing.B) {
	dims := os.Getenv("VOXPIPE_PREVIEW_DIMS")
	if dims == "" {
		dims = "128x128x100"
	}
	nx, ny, nz, err := phantom.ParseDims(dims)
	if err != nil {
		b.Fatal(err)
	}
	ph, err := phantom.Generate(phantom.Params{NX: nx, NY: ny, NZ: nz, Seed: 7})
	if err != nil {
		b.Fatal(err)
	}
	g := GeometryOf(ph.Header)
	var buf bytes.Buffer
	for b.Loop() {
		p, err := Render(ph.Image, ph.Truth, g, testLabels, Options{Title: dims})
		if err != nil {
			b.Fatal(err)
		}
		buf.Reset()
		if err := Encode(&buf, p.Image); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "png-bytes")
}
