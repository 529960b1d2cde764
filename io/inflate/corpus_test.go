package inflate

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

var updateCorpus = flag.Bool("update", false, "rewrite testdata/fuzz/FuzzGunzip")

// corpusDir is FuzzGunzip's committed seed corpus, which go test runs as tests and the fuzzer
// starts from (scripts/fuzz.sh).
var corpusDir = filepath.Join("testdata", "fuzz", "FuzzGunzip")

// gunzipSeeds are the corpus: the block types and stream shapes a volume's gzip file can have,
// and damaged ones, small enough for the fuzz test's 512..2048-byte chunks to split them.
func gunzipSeeds() map[string][]byte {
	flushed := func(level, every int, p []byte) []byte { // sync-flushed, as block-parallel writers make
		var buf bytes.Buffer
		w, _ := gzip.NewWriterLevel(&buf, level)
		for len(p) > 0 {
			n := min(every, len(p))
			w.Write(p[:n])
			w.Flush()
			p = p[n:]
		}
		w.Close()
		return buf.Bytes()
	}
	seeds := map[string][]byte{
		"empty":            stdGzip(6)(nil),
		"stored":           stdGzip(gzip.NoCompression)(volumeLike(6000, 11)),
		"fixed-huffman":    stdGzip(gzip.BestSpeed)([]byte("the quick brown fox jumps over the lazy dog")),
		"dynamic-volume":   stdGzip(gzip.BestCompression)(volumeLike(16000, 12)),
		"dynamic-mask":     klauspostGzip(1)(maskLike(30000, 13)),
		"huffman-only":     stdGzip(gzip.HuffmanOnly)(randomBytes(3000, 14)),
		"mixed-blocks":     stdGzip(6)(mixed(12000, 15)),
		"sync-flushed":     flushed(6, 3000, volumeLike(12000, 16)),
		"far-matches":      klauspostGzip(9)(repeats(40000, 17)),
		"two-members":      append(stdGzip(6)(maskLike(5000, 18)), stdGzip(6)(maskLike(3000, 19))...),
		"incompressible":   klauspostGzip(6)(randomBytes(5000, 20)),
		"long-run-of-zero": stdGzip(9)(make([]byte, 200000)),
	}
	cut := stdGzip(6)(volumeLike(16000, 21))
	seeds["cut-short"] = cut[:len(cut)/2]
	badCRC := stdGzip(6)(maskLike(8000, 22))
	badCRC[len(badCRC)-8] ^= 0x5a
	seeds["bad-crc"] = badCRC
	badSize := stdGzip(6)(maskLike(8000, 23))
	binary.LittleEndian.PutUint32(badSize[len(badSize)-4:], 7999)
	seeds["bad-isize"] = badSize
	return seeds
}

// TestGunzipSeedCorpus rewrites the corpus with -update; otherwise it checks that every seed is
// committed (by name: the compressors' output may change with the Go release).
func TestGunzipSeedCorpus(t *testing.T) {
	for name, gz := range gunzipSeeds() {
		path := filepath.Join(corpusDir, name)
		if !*updateCorpus {
			if _, err := os.Stat(path); err != nil {
				t.Errorf("seed %s not committed (go test ./io/inflate -run TestGunzipSeedCorpus -update): %v", name, err)
			}
			continue
		}
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\nint(%d)\n", strconv.Quote(string(gz)), len(name)%6)
		if err := os.MkdirAll(corpusDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
