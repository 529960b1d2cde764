package jpeg

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEncodersDCT decodes dcmcjpeg's and gdcmconv's baseline and extended sequential streams
// (8- and 12-bit, frames not a multiple of 8 wide or high, several qualities): the samples
// must equal dcmdjpeg's decoding of the same file, both paths. For 12 bits stored in 16,
// gdcmconv writes an extended stream of precision 16, outside T.81 (dcmdjpeg refuses it
// too): ErrUnsupported.
func TestEncodersDCT(t *testing.T) {
	t.Parallel()
	requireTool(t, "dcmdjpeg")
	for i, c := range []struct {
		tool              string
		allocated, stored int
		args              string
	}{
		{"dcmcjpeg", 8, 8, "+eb"}, {"dcmcjpeg", 8, 8, "+eb +q 50"}, {"dcmcjpeg", 8, 8, "+eb +q 100"},
		{"dcmcjpeg", 8, 8, "+ee"}, {"dcmcjpeg", 8, 8, "+eb -ho"}, {"dcmcjpeg", 16, 12, "+ee"},
		{"dcmcjpeg", 16, 12, "+ee +q 30"}, {"dcmcjpeg", 16, 12, "+ee +q 100"},
		{"dcmcjpeg", 16, 12, "+ee +q 75 +sm 20"}, {"dcmcjpeg", 16, 10, "+ee"},
		{"dcmcjpeg", 16, 16, "+ee"}, {"dcmcjpeg", 16, 12, "+eb"},
		{"gdcmconv", 8, 8, "--jpeg --lossy -q 90"}, {"gdcmconv", 8, 8, "--jpeg --lossy -q 40"},
		{"gdcmconv", 16, 12, "--jpeg --lossy -q 90"},
	} {
		t.Run(fmt.Sprintf("%s-%d-%dbit-%s", c.tool, c.allocated, c.stored, strings.ReplaceAll(c.args, " ", "")), func(t *testing.T) {
			t.Parallel()
			im := testImage(61+3*i, 37+i, 2, c.allocated, c.stored, false, uint64(200+i))
			encoded := convert(t, im.file(), c.tool, strings.Fields(c.args)...)
			if c.tool == "dcmcjpeg" || c.allocated == 8 {
				checkAgainstDcmdjpeg(t, encoded, im.w, im.h, Baseline, Extended)
				return
			}
			stream := frameStreams(t, encoded)[0]
			if in, err := ReadInfo(stream); err != nil || in.Precision != 16 {
				t.Fatalf("gdcm's stream: %+v, %v", in, err)
			}
			if _, err := decodeBoth(t, stream, im.w, im.h, 2); !errors.Is(err, ErrUnsupported) {
				t.Fatalf("16-bit DCT: %v, want ErrUnsupported", err)
			}
		})
	}
}

// dctSeeds are the committed fuzz seeds of sequential DCT streams (dcmcjpeg's, one with the
// restart markers withRestarts added), read back from go's corpus format.
func dctSeeds(t *testing.T) map[string][]byte {
	t.Helper()
	seeds := map[string][]byte{}
	for _, name := range []string{"baseline-8bit", "extended-12bit", "extended-12bit-restarts"} {
		b, err := os.ReadFile(filepath.Join("testdata/fuzz/FuzzDecode", name))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		seeds[name] = []byte(s)
	}
	return seeds
}

// TestDCTTruncatedEverywhere cuts DCT streams at every position: ErrTruncated or ErrCorrupt
// from both paths, never a success; random byte changes never make the paths disagree.
func TestDCTTruncatedEverywhere(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(10, 10))
	for name, src := range dctSeeds(t) {
		in, err := ReadInfo(src)
		if err != nil {
			t.Fatal(err)
		}
		sb := 1 + (in.Precision-1)/8
		if _, err := decodeBoth(t, src, in.Width, in.Height, sb); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for k := range len(src) {
			_, err := decodeBoth(t, src[:k], in.Width, in.Height, sb)
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s cut at %d of %d: %v", name, k, len(src), err)
			}
		}
		for range iterations(5000, 1000) {
			b := bytes.Clone(src)
			for range 1 + rng.IntN(3) {
				b[rng.IntN(len(b))] = byte(rng.IntN(256))
			}
			decodeBoth(t, b, in.Width, in.Height, sb)
		}
	}
}
