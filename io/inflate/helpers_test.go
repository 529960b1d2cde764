package inflate

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"math"
	"math/rand/v2"
	"testing"

	kgzip "github.com/klauspost/compress/gzip"
)

// smallChunks makes Gunzip cut even test-sized inputs into many chunks.
func smallChunks(t testing.TB, lo, hi int) {
	oldMin, oldMax := minChunk, maxChunk
	minChunk, maxChunk = lo, hi
	t.Cleanup(func() { minChunk, maxChunk = oldMin, oldMax })
}

// countStitching records the last stitcher's counts: chunks adopted, runs decoded in order,
// adopted chunks that went over to bytes.
func countStitching(t testing.TB) *[3]int {
	var n [3]int
	testHook = func(s *stitcher) { n = [3]int{s.adopted, s.sequentialRuns, s.switched} }
	t.Cleanup(func() { testHook = nil })
	return &n
}

// Test inputs: what NIfTI volumes and masks look like, and worse.
func volumeLike(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n&^1)
	v := 0.0
	for i := 0; i+1 < len(b); i += 2 {
		v = 0.995*v + rng.NormFloat64()*20
		s := int16(300 + 200*math.Sin(float64(i)/5000) + v)
		if (i/8192)%7 == 3 {
			s = 0 // background runs
		}
		binary.LittleEndian.PutUint16(b[i:], uint16(s))
	}
	return b
}

func maskLike(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	label := byte(0)
	for i := range b {
		if rng.IntN(300) == 0 {
			label = byte(rng.IntN(4))
		}
		b[i] = label
	}
	return b
}

func randomBytes(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 3))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// repeats is a random 24 KiB pattern repeated, a few bytes changed in each repeat: most of it
// is copied from 24 KiB back, so a chunk decoded without its window never sees 32 KiB without
// a marker.
func repeats(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 5))
	const period = 24 << 10
	b := randomBytes(n, seed)
	for i := period; i < len(b); i++ {
		if rng.IntN(1000) != 0 {
			b[i] = b[i-period]
		}
	}
	return b
}

// mixed interleaves compressible and incompressible stretches, so encoders emit stored,
// fixed and dynamic blocks.
func mixed(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 4))
	var b []byte
	for len(b) < n {
		k := 1 + rng.IntN(100000)
		switch rng.IntN(4) {
		case 0:
			b = append(b, randomBytes(k, rng.Uint64())...)
		case 1:
			b = append(b, bytes.Repeat([]byte{byte(rng.IntN(256))}, k)...)
		case 2:
			b = append(b, []byte("the quick brown fox jumps over the lazy dog "[:1+rng.IntN(40)])...)
		default:
			b = append(b, volumeLike(k, rng.Uint64())...)
		}
	}
	return b[:n]
}

func stdGzip(level int) func([]byte) []byte {
	return func(p []byte) []byte {
		var buf bytes.Buffer
		w, err := gzip.NewWriterLevel(&buf, level)
		if err != nil {
			panic(err)
		}
		w.Name, w.Comment, w.Extra = "volume.nii", "a comment", []byte("xx")
		w.Write(p)
		w.Close()
		return buf.Bytes()
	}
}

func klauspostGzip(level int) func([]byte) []byte {
	return func(p []byte) []byte {
		var buf bytes.Buffer
		w, err := kgzip.NewWriterLevel(&buf, level)
		if err != nil {
			panic(err)
		}
		// Written in pieces, with a flush now and then: sync markers (empty stored blocks).
		for len(p) > 0 {
			k := min(len(p), 300000)
			w.Write(p[:k])
			p = p[k:]
			if len(p) > 0 && len(p)%3 == 0 {
				w.Flush()
			}
		}
		w.Close()
		return buf.Bytes()
	}
}

// reference decompresses with klauspost/compress, the streaming path Gunzip stands in for.
func reference(t testing.TB, gz []byte) ([]byte, error) {
	t.Helper()
	r, err := kgzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	r.Multistream(false)
	return io.ReadAll(r)
}
