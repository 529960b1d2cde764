package dicomseg

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"voxpipe/io/dicom"
)

var fixedNow = func() time.Time { return time.Date(2026, 12, 5, 10, 30, 0, 0, time.UTC) }

func TestDSFitsSixteenCharacters(t *testing.T) {
	t.Parallel()
	for _, v := range []float64{0, 1, -1, 0.1 + 0.2, -123.45678901234568, 1e-20, -1e-20, 12345678901234567890, 0.7999999999999999, -30.25, math.Pi * 1000} {
		s := ds(v)
		if len(s) > 16 {
			t.Errorf("ds(%v) = %q: %d characters", v, s, len(s))
		}
		back, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Errorf("ds(%v) = %q does not parse: %v", v, s, err)
			continue
		}
		if d := math.Abs(back - v); d > 1e-10*math.Max(1, math.Abs(v)) {
			t.Errorf("ds(%v) = %q is %g away", v, s, d)
		}
	}
}

func TestUIDIsValidAndDeterministic(t *testing.T) {
	t.Parallel()
	valid := regexp.MustCompile(`^(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))*$`)
	a, b, c := uid("x", "1.2.3"), uid("x", "1.2.3"), uid("x", "1.2.4")
	if a != b || a == c {
		t.Fatalf("uid: same parts gave %s and %s, other parts %s", a, b, c)
	}
	// "x\x00" + "1.2.3" must not collide with "x1" + ".2.3": the parts are delimited
	if uid("x", "1.2.3") == uid("x1", ".2.3") {
		t.Fatal("uid does not delimit its parts")
	}
	for _, u := range []string{a, c, implementationUID} {
		if len(u) > 64 || !valid.MatchString(u) {
			t.Errorf("uid %q: not a valid UID (<= 64 characters, no leading zeros)", u)
		}
	}
}

// pixelBytes returns the value of the SEG's pixel data, the last element of the file.
func pixelBytes(t *testing.T, seg []byte) []byte {
	t.Helper()
	i := bytes.LastIndex(seg, []byte{0xE0, 0x7F, 0x10, 0x00, 'O', 'B', 0, 0})
	if i < 0 {
		t.Fatal("no pixel data element")
	}
	n := int(uint32(seg[i+8]) | uint32(seg[i+9])<<8 | uint32(seg[i+10])<<16 | uint32(seg[i+11])<<24)
	if i+12+n != len(seg) {
		t.Fatalf("pixel data of %d bytes at %d does not end the %d-byte file", n, i, len(seg))
	}
	return seg[i+12:]
}

func writeSEG(t *testing.T, s *dicom.Series, mask []byte, o Options) ([]byte, *Summary) {
	t.Helper()
	var buf bytes.Buffer
	if o.Now == nil {
		o.Now = fixedNow
	}
	sum, err := Write(&buf, s, mask, o)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Bytes != int64(buf.Len()) {
		t.Fatalf("summary says %d bytes, wrote %d", sum.Bytes, buf.Len())
	}
	return buf.Bytes(), sum
}

// TestBitsPackAcrossFrames: on a 37x29 grid (1073 pixels a frame, not a multiple of 8) each
// frame starts mid-byte; bit k of the stream is pixel k%1073 of frame k/1073, least
// significant bit first, and the length is padded to even.
func TestBitsPackAcrossFrames(t *testing.T) {
	t.Parallel()
	g := geometries[5]
	_, s := writeSeries(t, g)
	mask := testMask(s, 3)
	seg, sum := writeSEG(t, s, mask, Options{Segments: testSegments(3)})
	px := pixelBytes(t, seg)
	plane := s.Rows * s.Columns
	if want := (sum.Frames*plane + 7) / 8; len(px) != want+want%2 {
		t.Fatalf("pixel data %d bytes, want %d frames of %d bits padded to even", len(px), sum.Frames, plane)
	}
	k := 0
	for segNo := 1; segNo <= 3; segNo++ {
		for z := range len(s.Slices) {
			on := 0
			for _, v := range mask[z*plane : (z+1)*plane] {
				if int(v) == segNo {
					on++
				}
			}
			if on == 0 {
				continue
			}
			for r := range s.Rows {
				for c := range s.Columns {
					want := mask[c+s.Columns*((s.Rows-1-r)+s.Rows*z)] == byte(segNo)
					got := px[k>>3]>>(k&7)&1 == 1
					if got != want {
						t.Fatalf("segment %d slice %d pixel (%d,%d): bit %d is %v, want %v", segNo, z, r, c, k, got, want)
					}
					k++
				}
			}
		}
	}
	if k != sum.Frames*plane {
		t.Fatalf("checked %d bits, the SEG has %d frames of %d", k, sum.Frames, plane)
	}
	for ; k < len(px)*8; k++ {
		if px[k>>3]>>(k&7)&1 != 0 {
			t.Fatalf("padding bit %d is set", k)
		}
	}
}

func TestEmptyFramesAndAbsentSegments(t *testing.T) {
	t.Parallel()
	_, s := writeSeries(t, geometries[0])
	mask := testMask(s, 3)
	for i, v := range mask {
		if v == 2 {
			mask[i] = 0 // segment 2 has no voxels at all
		}
	}
	seg, sum := writeSEG(t, s, mask, Options{Segments: testSegments(3)})
	if sum.FramesOf[2] != 0 || sum.VoxelsOf[2] != 0 {
		t.Fatalf("segment 2 without voxels got %d frames", sum.FramesOf[2])
	}
	if !bytes.Contains(seg, []byte("Cerebral ventricle")) {
		t.Fatal("the empty segment is not described")
	}
	if sum.FramesOf[1] >= len(s.Slices) {
		t.Fatalf("slice 0 has no foreground, yet segment 1 has %d frames of %d slices", sum.FramesOf[1], len(s.Slices))
	}
	_, none := writeSEG(t, s, make([]byte, len(mask)), Options{Segments: testSegments(3)})
	if none.Frames != 1 || none.FramesOf[1] != 1 {
		t.Fatalf("a mask without foreground: %d frames (%v), want one empty frame of segment 1", none.Frames, none.FramesOf)
	}
	_, all := writeSEG(t, s, mask, Options{Segments: testSegments(3), EmptyFrames: true})
	if all.Frames != 3*len(s.Slices) {
		t.Fatalf("with empty frames: %d frames, want %d", all.Frames, 3*len(s.Slices))
	}
}

func TestRefusesWhatItCannotWrite(t *testing.T) {
	t.Parallel()
	_, s := writeSeries(t, geometries[0])
	mask := testMask(s, 3)
	cases := []struct {
		name string
		mask []byte
		segs []Segment
		want error
	}{
		{"undescribed label", mask, testSegments(2), ErrLabels},
		{"no segments", mask, nil, ErrLabels},
		{"segment 0", mask, append(testSegments(3), Segment{Number: 0}), ErrLabels},
		{"segment 256", mask, append(testSegments(3), Segment{Number: 256}), ErrLabels},
		{"segment twice", mask, append(testSegments(3), Segment{Number: 3}), ErrLabels},
		{"segment 4 missing", mask, append(testSegments(3), Segment{Number: 5}), ErrLabels},
		{"segment 2 missing", mask, []Segment{testSegments(3)[0], testSegments(3)[2]}, ErrLabels},
		{"label too long", mask, append(testSegments(2), Segment{Number: 3, Label: string(bytes.Repeat([]byte("x"), 65))}), ErrLabels},
		{"mask of another size", mask[:len(mask)-1], testSegments(3), ErrGrid},
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), "seg.dcm")
		_, err := WriteFile(path, s, c.mask, Options{Segments: c.segs})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.want)
		}
		if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("%s: a file was left at %s", c.name, path)
		}
	}
}

func TestRerunGivesTheSameObject(t *testing.T) {
	t.Parallel()
	_, s := writeSeries(t, geometries[3])
	mask := testMask(s, 3)
	o := Options{Segments: testSegments(3), Digest: "d1"}
	a, sa := writeSEG(t, s, mask, o)
	b, _ := writeSEG(t, s, mask, o)
	if !bytes.Equal(a, b) {
		t.Fatal("two writes of one mask differ")
	}
	other := bytes.Clone(mask)
	other[len(other)-1] = 1
	_, so := writeSEG(t, s, other, o)
	if so.SOPInstanceUID == sa.SOPInstanceUID || so.SeriesInstanceUID != sa.SeriesInstanceUID {
		t.Fatalf("another mask: instance %s (was %s), series %s (was %s)", so.SOPInstanceUID, sa.SOPInstanceUID, so.SeriesInstanceUID, sa.SeriesInstanceUID)
	}
	o.Digest = "d2"
	_, sd := writeSEG(t, s, mask, o)
	if sd.SeriesInstanceUID == sa.SeriesInstanceUID || sd.SOPInstanceUID == sa.SOPInstanceUID {
		t.Fatal("another model digest kept the UIDs")
	}
}

// TestSEGBesideItsSeriesIsNoSeries: a SEG in the series' folder (voxpipe's own output, or a
// PACS export) is left out of the scan, not a series that fails.
func TestSEGBesideItsSeriesIsNoSeries(t *testing.T) {
	t.Parallel()
	dir, s := writeSeries(t, geometries[0])
	if _, err := WriteFile(filepath.Join(dir, "seg.dcm"), s, testMask(s, 3), Options{Segments: testSegments(3)}); err != nil {
		t.Fatal(err)
	}
	scan, err := dicom.ScanPaths([]string{dir}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(scan.Series) != 1 || scan.Series[0].Err != nil || len(scan.Series[0].Slices) != len(s.Slices) {
		t.Fatalf("want the one series of %d slices, got %d series", len(s.Slices), len(scan.Series))
	}
	if len(scan.Skipped) != 1 || !errors.Is(scan.Skipped[0].Err, dicom.ErrNoPixels) {
		t.Fatalf("want the SEG skipped as no image, got %+v", scan.Skipped)
	}
}

// TestPackFrameMatchesReference: the eight-at-a-time packing equals the bit-by-bit reference
// on every value, lengths that are not multiples of 8, and bytes next to matches (where a
// borrow between bytes would misreport them); canary bytes after the output stay untouched.
func TestPackFrameMatchesReference(t *testing.T) {
	t.Parallel()
	rng := uint64(12345)
	next := func() byte { rng = rng*6364136223846793005 + 1442695040888963407; return byte(rng >> 56) }
	for _, n := range []int{0, 1, 7, 8, 9, 63, 64, 65, 1073, 4096} {
		src := make([]byte, n)
		for i := range src {
			switch i % 5 {
			case 0, 1:
				src[i] = next() % 4 // labels 0..3, runs of equal values
			case 2:
				src[i] = 255
			default:
				src[i] = next()
			}
		}
		for _, v := range []byte{0, 1, 2, 3, 128, 254, 255} {
			got := bytes.Repeat([]byte{0xA5}, n/8+4)
			want := bytes.Repeat([]byte{0xA5}, n/8+4)
			gn, wn := packFrame(got, src, v), packFrameRef(want, src, v)
			if gn != wn || !bytes.Equal(got, want) {
				t.Fatalf("n %d value %d: packFrame %x (%d bytes), reference %x (%d)", n, v, got, gn, want, wn)
			}
		}
	}
}

// TestWrittenHere tells this writer's SEGs from other files at a SEG's path.
func TestWrittenHere(t *testing.T) {
	t.Parallel()
	dir, s := writeSeries(t, geometries[0])
	seg := filepath.Join(t.TempDir(), "x.seg.dcm")
	if _, err := WriteFile(seg, s, testMask(s, 3), Options{Segments: testSegments(3)}); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "notes.seg.dcm")
	os.WriteFile(other, []byte("a user's notes"), 0o644)
	source := filepath.Join(dir, "IM0001") // a DICOM file of another writer
	for path, want := range map[string]bool{seg: true, other: false, source: false, filepath.Join(dir, "missing"): false} {
		if got := WrittenHere(path); got != want {
			t.Errorf("WrittenHere(%s) = %v, want %v", path, got, want)
		}
	}
}

// TestCharacterSet: a segment label outside ASCII makes the SEG UTF-8 (ISO_IR 192) over a
// source in the default repertoire, and is refused over a source in another character set,
// whose bytes the patient's name is copied in.
func TestCharacterSet(t *testing.T) {
	t.Parallel()
	segs := []Segment{{Number: 1, Label: "Läsion"}}
	mask := make([]byte, 4*4*2)
	mask[3] = 1
	s := syntheticSeries(4, 4, 2)
	seg, _ := writeSEG(t, s, mask, Options{Segments: segs})
	if !bytes.Contains(seg, []byte("ISO_IR 192")) || !bytes.Contains(seg, []byte("Läsion")) {
		t.Error("a non-ASCII label over an ASCII source: no ISO_IR 192, or the label not in UTF-8")
	}
	if ascii, _ := writeSEG(t, s, mask, Options{Segments: []Segment{{Number: 1, Label: "lesion"}}}); bytes.Contains(ascii, []byte("\x08\x00\x05\x00CS")) {
		t.Error("an ASCII SEG over an ASCII source names a character set")
	}
	latin := syntheticSeries(4, 4, 2)
	for _, sl := range latin.Slices {
		sl.File.Context.CharacterSet = "ISO_IR 100"
	}
	if _, err := Write(io.Discard, latin, mask, Options{Segments: segs}); !errors.Is(err, ErrLabels) {
		t.Errorf("a non-ASCII label over a Latin-1 source: %v, want ErrLabels", err)
	}
	seg, _ = writeSEG(t, latin, mask, Options{Segments: []Segment{{Number: 1, Label: "lesion"}}})
	if !bytes.Contains(seg, []byte("ISO_IR 100")) {
		t.Error("the source's character set is not carried over")
	}
}
