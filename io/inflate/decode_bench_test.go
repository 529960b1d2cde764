package inflate

import (
	"testing"
)

// BenchmarkDecode times the decoder alone (no block finding, stitching or resolving) on a
// 16 MiB volume-like stream, per uncompressed byte, started as a chunk's decoder is: on
// symbols, going over to bytes when it can.
func BenchmarkDecode(b *testing.B) {
	data := volumeLike(16<<20, 7)
	gz := klauspostGzip(6)(data)
	start, _ := headerLen(gz)
	body := gz[start : len(gz)-8]
	var d decoder
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		d.startSymbols(body, 0, d.buf)
		if _, err := d.run(int64(len(body))*8 + 1); err != nil {
			b.Fatal(err)
		}
	}
}
