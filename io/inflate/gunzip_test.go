package inflate

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"testing"

	kgzip "github.com/klauspost/compress/gzip"
)

func TestGunzipMatchesGzip(t *testing.T) {
	smallChunks(t, 16<<10, 64<<10)
	stats := countStitching(t)
	inputs := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"one byte", []byte{7}},
		{"volume", volumeLike(3<<20, 1)},
		{"mask", maskLike(2<<20, 2)},
		{"random", randomBytes(1<<20, 3)},
		{"mixed", mixed(3<<20, 4)},
		{"repeats", repeats(1<<20, 5)},
	}
	encoders := []struct {
		name string
		enc  func([]byte) []byte
	}{
		{"std-1", stdGzip(1)}, {"std-6", stdGzip(6)}, {"std-9", stdGzip(9)},
		{"std-store", stdGzip(gzip.NoCompression)}, {"std-huffman", stdGzip(gzip.HuffmanOnly)},
		{"klauspost-1", klauspostGzip(1)}, {"klauspost-5", klauspostGzip(5)}, {"klauspost-9", klauspostGzip(9)},
	}
	for _, in := range inputs {
		for _, enc := range encoders {
			gz := enc.enc(in.data)
			for _, threads := range []int{1, 3, 8} {
				dst := make([]byte, len(in.data))
				if err := Gunzip(gz, dst, threads); err != nil {
					t.Fatalf("%s/%s/%d threads: %v", in.name, enc.name, threads, err)
				}
				if !bytes.Equal(dst, in.data) {
					t.Fatalf("%s/%s/%d threads: output differs", in.name, enc.name, threads)
				}
				if len(gz) > 20*64<<10 && threads > 1 && enc.name != "std-store" && stats[0] < 2 {
					t.Errorf("%s/%s/%d threads, %d compressed bytes: only %d chunks decoded in parallel were used (%d runs in order)",
						in.name, enc.name, threads, len(gz), stats[0], stats[1])
				}
			}
		}
	}
}

// TestGunzipByteSwitch: a chunk decoded without its window goes over from symbols to bytes
// once its last 32 KiB hold no marker (volume-like data: within a few hundred KiB), and keeps
// symbols to its end where markers persist (repeats, in chunks shorter than that); the output
// is the same either way.
func TestGunzipByteSwitch(t *testing.T) {
	stats := countStitching(t)
	cases := []struct {
		name     string
		data     []byte
		chunk    int // compressed bytes per chunk, at least
		switches bool
	}{
		{"volume", volumeLike(8<<20, 11), 256 << 10, true},
		{"repeats", repeats(8<<20, 12), 16 << 10, false},
	}
	for _, c := range cases {
		smallChunks(t, c.chunk, 2*c.chunk)
		for _, enc := range []func([]byte) []byte{stdGzip(6), klauspostGzip(6)} {
			gz := enc(c.data)
			dst := make([]byte, len(c.data))
			if err := Gunzip(gz, dst, 3); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if !bytes.Equal(dst, c.data) {
				t.Fatalf("%s: output differs", c.name)
			}
			adopted, switched := stats[0], stats[2]
			if c.switches && switched == 0 {
				t.Errorf("%s: none of %d chunks decoded in parallel went over to bytes", c.name, adopted)
			}
			if !c.switches && adopted-switched < 2 {
				t.Errorf("%s: %d of %d chunks decoded in parallel went over to bytes, want 2 or more that did not", c.name, switched, adopted)
			}
		}
	}
}

// TestPlace: every split of a chunk's output into pieces, whichever side of the switch from
// symbols to bytes its ends fall, places the same bytes.
func TestPlace(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(10, 10))
	const before, nsyms = windowSize + 100, 50000
	want := randomBytes(before+nsyms+40000, 11)
	syms := make([]uint16, nsyms)
	for i := range syms {
		if rng.IntN(3) == 0 { // a marker: byte k of the window, dst[before-windowSize+k]
			k := rng.IntN(windowSize)
			want[before+i] = want[before-windowSize+k]
			syms[i] = windowMarker + uint16(k)
		} else {
			syms[i] = uint16(want[before+i])
		}
	}
	tail := want[before+nsyms:]
	for _, cut := range [][2]int{{0, 90000}, {0, 50000}, {50000, 90000}, {10000, 60000}, {49999, 50001}, {0, 1}, {89999, 90000}, {20000, 20000}} {
		dst := make([]byte, len(want))
		copy(dst, want[:before])
		if err := place(dst, before, syms, tail, cut[0], cut[1]); err != nil {
			t.Fatalf("%v: %v", cut, err)
		}
		if lo, hi := before+cut[0], before+cut[1]; !slices.Equal(dst[lo:hi], want[lo:hi]) || slices.ContainsFunc(dst[before:lo], isSet) || slices.ContainsFunc(dst[hi:], isSet) {
			t.Fatalf("%v: wrong bytes placed", cut)
		}
	}
}

func isSet(b byte) bool { return b != 0 }

// plainGzip compresses p with a 10-byte header (no name, comment or extra field).
func plainGzip(p []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(p)
	w.Close()
	return buf.Bytes()
}

// withHeaderCRC sets FHCRC on a gzip file without optional fields and inserts the header's
// CRC-16, plus delta (0: correct).
func withHeaderCRC(gz []byte, delta uint16) []byte {
	hdr := bytes.Clone(gz[:10])
	hdr[3] |= 2
	crc := uint16(crc32.ChecksumIEEE(hdr)) + delta
	return append(append(hdr, byte(crc), byte(crc>>8)), gz[10:]...)
}

func TestGunzipHeaderCRC(t *testing.T) {
	t.Parallel()
	data := maskLike(100000, 8)
	gz := withHeaderCRC(plainGzip(data), 0)
	if want, err := reference(t, gz); err != nil || !bytes.Equal(want, data) {
		t.Fatalf("the test's FHCRC file does not read with klauspost/compress: %v", err)
	}
	dst := make([]byte, len(data))
	if err := Gunzip(gz, dst, 2); err != nil || !bytes.Equal(dst, data) {
		t.Fatalf("FHCRC: %v", err)
	}
}

func TestGunzipRejects(t *testing.T) {
	smallChunks(t, 16<<10, 64<<10)
	data := volumeLike(1<<20, 5)
	gz := stdGzip(6)(data)
	bad := func(mod func([]byte) []byte) []byte { return mod(bytes.Clone(gz)) }
	cases := []struct {
		name string
		gz   []byte
		size int
		want error
	}{
		{"crc", bad(func(b []byte) []byte { b[len(b)-8] ^= 1; return b }), len(data), ErrCorrupt},
		{"wrong size", gz, len(data) - 1, ErrUnsupported},
		{"two members", append(bytes.Clone(gz), stdGzip(1)([]byte("more"))...), len(data) + 4, ErrUnsupported},
		{"truncated", gz[:len(gz)/2], len(data), nil},
		{"not gzip", []byte("just some text, certainly not gzip"), 10, ErrCorrupt},
		{"method", bad(func(b []byte) []byte { b[2] = 7; return b }), len(data), ErrCorrupt},
		{"header crc", withHeaderCRC(plainGzip(data), 1), len(data), ErrCorrupt},
	}
	for _, c := range cases {
		dst := make([]byte, c.size)
		err := Gunzip(c.gz, dst, 4)
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	// Damage anywhere in the deflate data: an error, or (if the damage happens to decode) the
	// trailer's CRC catches it; never a wrong result without an error.
	rng := rand.New(rand.NewPCG(9, 9))
	for trial := range 200 {
		b := bytes.Clone(gz)
		i := 10 + rng.IntN(len(b)-18)
		b[i] ^= byte(1 + rng.IntN(255))
		dst := make([]byte, len(data))
		if err := Gunzip(b, dst, 1+trial%4); err == nil && !bytes.Equal(dst, data) {
			t.Fatalf("trial %d: byte %d damaged, no error, wrong output", trial, i)
		}
	}
}

// FuzzGunzip: whatever Gunzip accepts, klauspost/compress decodes to the same bytes.
func FuzzGunzip(f *testing.F) {
	smallChunks(f, 512, 2048)
	f.Add(stdGzip(6)(volumeLike(20000, 1)), 3)
	f.Add(stdGzip(1)(mixed(30000, 2)), 2)
	f.Add(klauspostGzip(9)(maskLike(40000, 3)), 4)
	f.Add(stdGzip(gzip.HuffmanOnly)(randomBytes(5000, 4)), 2)
	f.Fuzz(func(t *testing.T, gz []byte, threads int) {
		if len(gz) < 18 {
			return
		}
		size := int(binary.LittleEndian.Uint32(gz[len(gz)-4:]))
		if size > 1<<22 {
			return
		}
		dst := make([]byte, size)
		if err := Gunzip(gz, dst, 1+threads%6); err != nil {
			return
		}
		want, err := reference(t, gz)
		if err != nil {
			t.Fatalf("Gunzip accepted what klauspost/compress rejects: %v", err)
		}
		if !bytes.Equal(dst, want) {
			t.Fatalf("Gunzip and klauspost/compress disagree")
		}
	})
}

// BenchmarkGunzip compares Gunzip at GOMAXPROCS threads with klauspost/compress's streaming
// reader on a 64 MiB volume-like file.
func BenchmarkGunzip(b *testing.B) {
	data := volumeLike(64<<20, 7)
	gz := klauspostGzip(6)(data)
	dst := make([]byte, len(data))
	b.Run("parallel", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := Gunzip(gz, dst, runtime.GOMAXPROCS(0)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one-thread", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := Gunzip(gz, dst, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("klauspost", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			r, _ := kgzip.NewReader(bytes.NewReader(gz))
			if _, err := io.ReadFull(r, dst); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGunzipFile inflates the gzip file named by INFLATE_BENCH_FILE (a volume, say) with
// 1, 4, 8 and 16 decoding goroutines (up to the machine's cores), reporting how many chunks were
// used as decoded in parallel, how many runs were decoded in order and how many of those chunks
// went over to bytes. (Not by -test.cpu: with -test.cpu 1, GOMAXPROCS read inside a benchmark
// was the machine's core count again.)
func BenchmarkGunzipFile(b *testing.B) {
	path := os.Getenv("INFLATE_BENCH_FILE")
	if path == "" {
		b.Skip("INFLATE_BENCH_FILE not set")
	}
	gz, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, binary.LittleEndian.Uint32(gz[len(gz)-4:]))
	for _, threads := range []int{1, 4, 8, 16} {
		if threads > runtime.NumCPU() {
			break
		}
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			stats := countStitching(b)
			b.SetBytes(int64(len(dst)))
			for b.Loop() {
				if err := Gunzip(gz, dst, threads); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(stats[0]), "adopted")
			b.ReportMetric(float64(stats[1]), "in-order")
			b.ReportMetric(float64(stats[2]), "switched")
		})
	}
}

// A done context stops Gunzip with its cause, on the parallel path and on the in-order one
// (stored blocks, which the block finder does not look for).
func TestGunzipContext(t *testing.T) {
	smallChunks(t, 16<<10, 64<<10)
	data := volumeLike(2<<20, 6)
	for _, enc := range []func([]byte) []byte{stdGzip(6), stdGzip(gzip.NoCompression)} {
		gz := enc(data)
		ctx, cancel := context.WithCancelCause(context.Background())
		stop := errors.New("stopped by the test")
		cancel(stop)
		dst := make([]byte, len(data))
		if err := GunzipContext(ctx, gz, dst, 3); !errors.Is(err, stop) {
			t.Errorf("cancelled: %v, want the context's cause", err)
		}
		if err := GunzipContext(context.Background(), gz, dst, 3); err != nil || !bytes.Equal(dst, data) {
			t.Errorf("afterwards: %v", err)
		}
	}
}

func TestChunkBounds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		n, size, threads int
		tapered          bool
	}{
		{1, 1 << 20, 16, false},
		{5 << 20, 1 << 20, 4, false},    // under three rounds: equal chunks
		{326 << 20, 2 << 20, 16, true},  // a 524 MB volume's body on 16 cores
		{100<<20 + 3, 1 << 20, 8, true}, // an uneven end
		{12 << 20, 1 << 20, 4, true},    // exactly three rounds
		{13, 4, 1, true},                // tiny
	}
	for _, c := range cases {
		b := chunkBounds(c.n, c.size, c.threads)
		if b[0] != 0 || b[len(b)-1] != int64(c.n)*8 {
			t.Fatalf("%+v: bounds %d .. %d, want 0 .. %d", c, b[0], b[len(b)-1], 8*c.n)
		}
		small := 0
		for i := 1; i < len(b); i++ {
			size := int(b[i]-b[i-1]) / 8
			if size <= 0 || size > c.size || b[i]%8 != 0 {
				t.Fatalf("%+v: chunk %d is %d bits", c, i-1, b[i]-b[i-1])
			}
			if size <= c.size/4 && i < len(b)-1 {
				small++
			}
		}
		// Slots: a full chunk holds slotsPerChunk, a quarter chunk one.
		st := &stitcher{bounds: b, bits: int64(c.size) * 8}
		for j := range len(b) - 1 {
			size, w := int(b[j+1]-b[j])/8, st.weight(j)
			if w < 1 || w > slotsPerChunk || size == c.size && w != slotsPerChunk || size*4 <= c.size && w != 1 {
				t.Fatalf("%+v: chunk %d of %d bytes holds %d slots", c, j, size, w)
			}
		}
		// Tapered: the last threads chunks' worth in quarter chunks, the rest whole.
		if want := 0; c.tapered {
			want = 4*c.threads - 1
			if small < want {
				t.Errorf("%+v: %d quarter-size chunks before the last, want %d", c, small, want)
			}
		} else if small != want {
			t.Errorf("%+v: %d quarter-size chunks, want equal chunks", c, small)
		}
	}
}
