package inflate

import "testing"

// chunkSyms is n symbols of a chunk's output, markers in its first 40 KiB only.
func chunkSyms(n int) []uint16 {
	syms := make([]uint16, n)
	for i := range syms {
		syms[i] = uint16(i % 251)
		if i < 40<<10 && i%7 == 0 {
			syms[i] = windowMarker + uint16(i%windowSize)
		}
	}
	return syms
}

// BenchmarkResolve: a chunk's symbols to bytes.
func BenchmarkResolve(b *testing.B) { benchResolve(b, chunkSyms(4<<20)) }

// benchResolve times resolving syms, a chunk's whole output, after a 32 KiB window.
func benchResolve(b *testing.B, syms []uint16) {
	n := len(syms)
	dst := make([]byte, windowSize+n)
	b.SetBytes(int64(n))
	for b.Loop() {
		if err := resolve(dst, windowSize, syms, 0, n); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolveSwitched: the same chunk as its decoder leaves it, gone over to bytes after
// 320 Ki symbols (volume-like data does after 230-330 Ki): resolved, then copied.
func BenchmarkResolveSwitched(b *testing.B) {
	const n, nsyms = 4 << 20, 320 << 10
	syms := chunkSyms(nsyms)
	bytes := make([]byte, n-nsyms)
	for i := range bytes {
		bytes[i] = byte((nsyms + i) % 251)
	}
	dst := make([]byte, windowSize+n)
	b.SetBytes(n)
	for b.Loop() {
		if err := place(dst, windowSize, syms, bytes, 0, n); err != nil {
			b.Fatal(err)
		}
	}
}

// markedSyms is n symbols with markers throughout: in two of every three runs of 64 symbols,
// four in five are markers (as in a GNU gzip file's background, whose markers never die out).
func markedSyms(n int) []uint16 {
	syms := make([]uint16, n)
	for i := range syms {
		syms[i] = uint16(i % 251)
		if (i/64)%3 != 0 && i%5 != 0 {
			syms[i] = windowMarker + uint16((i*7)%windowSize)
		}
	}
	return syms
}

// BenchmarkResolveMarked: a chunk whose markers last to its end.
func BenchmarkResolveMarked(b *testing.B) { benchResolve(b, markedSyms(4<<20)) }
