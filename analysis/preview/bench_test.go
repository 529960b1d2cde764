package preview

import (
	"bytes"
	"testing"

	"voxpipe/internal/benchvol"
)

// BenchmarkRender renders and encodes the preview of a phantom (its truth as the mask),
// 128x128x100 unless VOXPIPE_PREVIEW_DIMS says otherwise (512x512x1000 needs ~1 GB and a minute
// to generate: run it by hand).
//
//	VOXPIPE_PREVIEW_DIMS=512x512x1000 go test ./analysis/preview -run '^$' -bench Render -benchtime 3x
func BenchmarkRender(b *testing.B) {
	ph, dims := benchvol.Phantom(b, "VOXPIPE_PREVIEW_DIMS", "128x128x100")
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
