package dicom

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the parser, then to the pixel decoder and series assembly
// when it accepts them: nothing may panic, every error must wrap one of the package's
// sentinels (or be an I/O error of the reader), and nothing is allocated beyond what the file
// holds (the decode buffer is sized from the parsed, checked attributes, capped here). The
// corpus (testdata/fuzz/FuzzParse) holds small files of each syntax, multi-frame and RLE;
// encapsulated multi-frame files (split fragments, offset tables) are added here.
func FuzzParse(f *testing.F) {
	for _, sp := range fuzzSeeds() {
		f.Add(sp.file())
	}
	for _, c := range []encapCase{uncompressedCase(3, 4, 2), baselineCase(f, 8, 8, 2)} { // encapsulated
		c.split, c.eot = 2, c.syntax == string(EncapsulatedUncompressed)
		f.Add(c.images()[0].File())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !wrapsSentinel(err) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		if file.checkPixels() != nil {
			return
		}
		size := file.frameBytes() * int64(file.NumberOfFrames)
		if size > 1<<24 {
			t.Skip("large image")
		}
		if err := file.readFrames(nil, make([]byte, size)); err != nil && !wrapsSentinel(err) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("pixels: error wraps no sentinel: %v", err)
		}
		for _, s := range Group([]*File{file}) {
			if s.Err == nil && s.Voxels() <= 1<<22 {
				if _, _, err := s.Volume(1); err != nil && !wrapsSentinel(err) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("volume: error wraps no sentinel: %v", err)
				}
			}
		}
	})
}

func fuzzSeeds() []sliceSpec {
	px := testPixels(12, true)
	var seeds []sliceSpec
	for _, ts := range []TransferSyntax{ImplicitVRLittleEndian, ExplicitVRLittleEndian, ExplicitVRBigEndian, DeflatedExplicitVRLE, RLELossless} {
		seeds = append(seeds, sliceSpec{syntax: ts, uid: "1.2", instance: 1, pos: [3]float64{1, 2, 3}, orient: axial, rows: 3, cols: 4,
			bitsStored: 12, signed: true, slope: 2, inter: 1, pixels: px, privateJunk: ts == ExplicitVRLittleEndian})
	}
	all := append(testPixels(12, false), testPixels(12, false)...)
	for _, ts := range []TransferSyntax{ExplicitVRLittleEndian, RLELossless} {
		seeds = append(seeds, sliceSpec{syntax: ts, uid: "1.3", instance: 1, orient: axial, rows: 3, cols: 4, bitsStored: 16,
			numberOfFrames: 2, framePositions: [][3]float64{{0, 0, 0}, {0, 0, 1}}, pixelsAllFrames: all})
	}
	return seeds
}

// TestWriteFuzzCorpus rewrites testdata/fuzz/FuzzParse from fuzzSeeds when
// VOXPIPE_WRITE_CORPUS=1 (the corpus is committed; the fuzzer adds to it locally).
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("VOXPIPE_WRITE_CORPUS") != "1" {
		t.Skip("set VOXPIPE_WRITE_CORPUS=1 to rewrite the corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, sp := range fuzzSeeds() {
		body := "go test fuzz v1\n[]byte(" + quoteGo(sp.file()) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, "seed-"+string(rune('a'+i))), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func quoteGo(b []byte) string {
	var s bytes.Buffer
	s.WriteByte('"')
	for _, c := range b {
		switch {
		case c == '"' || c == '\\':
			s.WriteByte('\\')
			s.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			s.WriteByte(c)
		default:
			s.WriteString(`\x`)
			s.WriteByte("0123456789abcdef"[c>>4])
			s.WriteByte("0123456789abcdef"[c&15])
		}
	}
	s.WriteByte('"')
	return s.String()
}
