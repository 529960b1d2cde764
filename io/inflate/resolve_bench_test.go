package inflate

import "testing"

// BenchmarkResolve: a chunk's symbols to bytes, markers in its first 40 KiB only.
func BenchmarkResolve(b *testing.B) {
	const n = 4 << 20
	syms := make([]uint16, n)
	for i := range syms {
		syms[i] = uint16(i % 251)
		if i < 40<<10 && i%7 == 0 {
			syms[i] = windowMarker + uint16(i%windowSize)
		}
	}
	dst := make([]byte, windowSize+n)
	b.SetBytes(n)
	for b.Loop() {
		if err := resolve(dst, windowSize, syms, 0, n); err != nil {
			b.Fatal(err)
		}
	}
}
