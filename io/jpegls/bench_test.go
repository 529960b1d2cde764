package jpegls

import "testing"

// benchStream is the picture encoded lossless by dcmcjpls.
func benchStream(b *testing.B, p picture) []byte {
	stream, _ := dcmtkEncode(b, p.file(p.values()), "+el")
	return stream
}

// BenchmarkDecode decodes a 512x512 12-bit lossless frame; SetBytes is the output's size.
func BenchmarkDecode(b *testing.B) {
	for _, dec := range []struct {
		name string
		fn   func(dst, src []byte, w, h, sb int) error
	}{{"fast", Decode}, {"reference", decodeReference}} {
		b.Run(dec.name, func(b *testing.B) {
			p := picture{w: 512, h: 512, allocated: 16, stored: 12, noise: 12, background: 0, seed: 99}
			stream := benchStream(b, p)
			dst := make([]byte, p.w*p.h*2)
			b.SetBytes(int64(len(dst)))
			b.ReportAllocs()
			for b.Loop() {
				if err := dec.fn(dst, stream, p.w, p.h, 2); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
