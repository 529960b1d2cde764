package inflate

import (
	"testing"
)

// BenchmarkDecode times the decoder alone (no block finding, stitching or resolving) on a
// 16 MiB volume-like stream, per uncompressed byte.
func BenchmarkDecode(b *testing.B) {
	data := volumeLike(16<<20, 7)
	gz := klauspostGzip(6)(data)
	start, _ := headerLen(gz)
	body := gz[start : len(gz)-8]
	var buf []uint16
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		d := newDecoder(body, 0, buf)
		if _, err := d.run(int64(len(body))*8 + 1); err != nil {
			b.Fatal(err)
		}
		buf = d.out
	}
}
