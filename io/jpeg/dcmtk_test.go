package jpeg

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// testImage is an MR-like image of stored bits (signed: two's complement, sign-extended to
// the allocated bits), frames frames.
func testImage(w, h, frames, allocated, stored int, signed bool, seed uint64) image {
	rng := rand.New(rand.NewPCG(seed, 9))
	im := image{w: w, h: h, frames: frames, allocated: allocated, stored: stored, signed: signed}
	for range frames {
		for _, v := range mrImage(w, h, stored, rng) {
			x := uint32(v)
			if signed {
				x = uint32(int32(v)-1<<(stored-1)) & (1<<allocated - 1)
			}
			im.values = append(im.values, x)
		}
	}
	return im
}

// lossless cases dcmcjpeg encodes: each argument set, each kind of data.
var dcmtkLosslessCases = []struct {
	allocated, stored int
	signed            bool
	args              string
}{
	{16, 12, false, "+e1"},
	{16, 12, false, "+el +sv 1"}, {16, 12, false, "+el +sv 2"}, {16, 12, false, "+el +sv 3"},
	{16, 12, false, "+el +sv 4"}, {16, 12, false, "+el +sv 5"}, {16, 12, false, "+el +sv 6"},
	{16, 12, false, "+el +sv 7"},
	{16, 12, false, "+el +sv 5 +pt 3"}, {16, 16, false, "+e1 +pt 7"}, {16, 12, false, "+el +sv 7 +pt 11"},
	{16, 12, true, "+e1"}, {16, 12, true, "+el +sv 4"}, {16, 16, true, "+el +sv 6"},
	{16, 16, false, "+el +sv 7"}, {16, 16, false, "+e1"},
	{8, 8, false, "+e1"}, {8, 8, false, "+el +sv 4 +pt 2"}, {16, 10, false, "+el +sv 2"},
	{16, 12, false, "+pl +bt +e1"}, {16, 12, false, "+pl +bs +el +sv 3"}, {16, 16, true, "+pl +bs +el +sv 5"},
}

// TestDcmtkLossless decodes dcmcjpeg's lossless streams: every sample must equal the
// original's stored bits (for a point transform Pt, with its Pt low bits cleared). The old
// pseudo-lossless codec (+pl, which alone honours +bt and +bs) rescales the samples first,
// so its streams are compared with dcmdjpeg's decoding instead.
func TestDcmtkLossless(t *testing.T) {
	t.Parallel()
	requireTool(t, "dcmcjpeg")
	for i, c := range dcmtkLosslessCases {
		t.Run(fmt.Sprintf("%d-%dbit-signed=%v-%s", c.allocated, c.stored, c.signed, strings.ReplaceAll(c.args, " ", "")), func(t *testing.T) {
			t.Parallel()
			im := testImage(61+i, 37, 2, c.allocated, c.stored, c.signed, uint64(i))
			encoded := convert(t, im.file(), "dcmcjpeg", strings.Fields(c.args)...)
			if strings.HasPrefix(c.args, "+pl") {
				checkAgainstDcmdjpeg(t, encoded, im.w, im.h, Lossless)
				return
			}
			for f, stream := range frameStreams(t, encoded) {
				checkLosslessFrame(t, stream, im, f)
			}
		})
	}
}

// checkLosslessFrame decodes frame f's stream and compares it with the image's values.
func checkLosslessFrame(t *testing.T, stream []byte, im image, f int) {
	t.Helper()
	in, err := ReadInfo(stream)
	if err != nil {
		t.Fatal(err)
	}
	if in.Process != Lossless || in.Width != im.w || in.Height != im.h || in.Components != 1 {
		t.Fatalf("frame %d: %+v", f, in)
	}
	sb := 1 + (in.Precision-1)/8
	got, err := decodeBoth(t, stream, im.w, im.h, sb)
	if err != nil {
		t.Fatalf("frame %d (%+v): %v", f, in, err)
	}
	orig := im.values[f*im.w*im.h : (f+1)*im.w*im.h]
	mask := uint32(1)<<in.Precision - 1
	for i, v := range samples(got, sb) {
		if want := uint16(orig[i] & mask >> in.PointTransform << in.PointTransform); v != want {
			t.Fatalf("frame %d (%+v): sample %d is %d, want %d (original %d)", f, in, i, v, want, orig[i])
		}
	}
}

// checkAgainstDcmdjpeg decodes each frame of an encoded file and compares it with dcmdjpeg's
// decoding of the file: they must be equal. Each frame's process must be one of procs.
func checkAgainstDcmdjpeg(t *testing.T, encoded []byte, w, h int, procs ...Process) {
	t.Helper()
	streams := frameStreams(t, encoded)
	native := nativePixels(t, convert(t, encoded, "dcmdjpeg", "+te"))
	n := w * h
	sbOut := len(native) / (n * len(streams))
	for f, stream := range streams {
		in, err := ReadInfo(stream)
		if err != nil || !slices.Contains(procs, in.Process) {
			t.Fatalf("frame %d: %+v, %v; want one of %v", f, in, err, procs)
		}
		sb := 1 + (in.Precision-1)/8
		got, err := decodeBoth(t, stream, w, h, sb)
		if err != nil {
			t.Fatalf("frame %d (%+v): %v", f, in, err)
		}
		want := values(native[f*n*sbOut:], n, sbOut, binary.LittleEndian)
		for i, v := range samples(got, sb) {
			if v != want[i] {
				t.Fatalf("frame %d (%+v): sample %d is %d, dcmdjpeg %d", f, in, i, v, want[i])
			}
		}
	}
}

// TestGdcmLossless decodes gdcmconv's lossless JPEG streams: equal to the original's stored
// bits.
func TestGdcmLossless(t *testing.T) {
	t.Parallel()
	requireTool(t, "gdcmconv")
	for i, c := range []struct {
		allocated, stored int
		signed            bool
	}{{8, 8, false}, {16, 12, false}, {16, 12, true}, {16, 16, false}, {16, 16, true}, {16, 14, false}} {
		t.Run(fmt.Sprintf("%d-%dbit-signed=%v", c.allocated, c.stored, c.signed), func(t *testing.T) {
			t.Parallel()
			im := testImage(50+i, 41, 1, c.allocated, c.stored, c.signed, uint64(100+i))
			encoded := convert(t, im.file(), "gdcmconv", "--jpeg")
			for f, stream := range frameStreams(t, encoded) {
				checkLosslessFrame(t, stream, im, f)
			}
		})
	}
}
