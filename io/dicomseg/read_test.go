package dicomseg

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"voxpipe/internal/dicomtest"
	"voxpipe/internal/regular"
)

func readBytes(b []byte) (*SEG, error) { return Read(bytes.NewReader(b), int64(len(b))) }

// odd37x29 is a SEG of three 37x29 frames (1073 pixels: every frame after the first starts
// mid-byte), two segments.
func odd37x29(syntax string) testSEG {
	b := testSEG{syntax: syntax, rows: 29, cols: 37, segments: []int{2, 1}, forUID: "1.2.3.7"}
	for i := range 3 {
		b.frames = append(b.frames, testFrame{seg: 1 + i%2, src: "1.2.3.9." + string(rune('1'+i)), pos: []float64{0, 0, float64(i)}, px: patternFrame(29, 37, i+1)})
	}
	return b
}

// TestFramesUnpackAcrossByteBoundaries: on a 37x29 grid frame i starts at bit i*1073 of the
// pixel data, least significant bit first, in explicit and implicit VR files; the attributes
// come back as written.
func TestFramesUnpackAcrossByteBoundaries(t *testing.T) {
	t.Parallel()
	for _, syntax := range []string{dicomtest.ExplicitVRLittleEndian, dicomtest.ImplicitVRLittleEndian} {
		b := odd37x29(syntax)
		s, err := readBytes(b.file())
		if err != nil {
			t.Fatalf("%s: %v", syntax, err)
		}
		if s.Rows != 29 || s.Columns != 37 || len(s.Frames) != 3 || s.SegmentationType != "BINARY" || s.FrameOfReferenceUID != "1.2.3.7" ||
			s.SOPInstanceUID != "1.2.3.4.5" || s.SeriesInstanceUID != "1.2.3.4" || s.StudyInstanceUID != "1.2.3.1" || s.SeriesNumber != 1007 || s.SeriesDescription != "test seg" {
			t.Fatalf("%s: header read as %+v", syntax, s)
		}
		if len(s.Segments) != 2 || s.Segments[0].Number != 1 || s.Segments[1].Number != 2 || s.Segments[1].Label != "seg 2" ||
			s.Segments[0].Type != TissueType || s.Segments[0].Category.Meaning != "Anatomical Structure" ||
			s.Segments[0].Algorithm != "algo" || s.Segments[0].AlgorithmVersion != "v1.2" || s.AlgorithmTypes[0] != "SEMIAUTOMATIC" {
			t.Fatalf("%s: segments read as %+v %v", syntax, s.Segments, s.AlgorithmTypes)
		}
		if !s.HasOrientation || s.Orientation != [6]float64{1, 0, 0, 0, 1, 0} || s.PixelSpacing != [2]float64{0.5, 0.75} || s.SliceThickness != 2 {
			t.Fatalf("%s: geometry read as %v %v %v", syntax, s.Orientation, s.PixelSpacing, s.SliceThickness)
		}
		if len(s.ReferencedSeries) != 1 || s.ReferencedSeries[0].UID != "1.2.3.9" || len(s.ReferencedSeries[0].Instances) != 3 {
			t.Fatalf("%s: references read as %+v", syntax, s.ReferencedSeries)
		}
		dst := make([]byte, 29*37)
		for i, f := range b.frames {
			got := s.Frames[i]
			if got.Segment != f.seg || got.SourceSOPInstanceUID != f.src || !got.HasPosition || got.Position[2] != float64(i) {
				t.Errorf("%s: frame %d read as %+v", syntax, i, got)
			}
			if err := s.Frame(i, dst); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dst, f.px) {
				t.Errorf("%s: frame %d unpacks to other pixels", syntax, i)
			}
		}
		if s.SegmentFrames(1) != 2 || s.SegmentFrames(2) != 1 {
			t.Errorf("%s: frames of segments 1, 2: %d, %d", syntax, s.SegmentFrames(1), s.SegmentFrames(2))
		}
		if s.Frame(3, dst) == nil || s.Frame(0, dst[1:]) == nil {
			t.Errorf("%s: Frame takes a frame past the last, or a short buffer", syntax)
		}
	}
}

// TestRefusesWhatIsNoBinarySEG: FRACTIONAL, an MR image, another transfer syntax, a file
// without a Part 10 header, pixel data too short for the frames, a FIFO.
func TestRefusesWhatIsNoBinarySEG(t *testing.T) {
	t.Parallel()
	ok := odd37x29("")
	if _, err := readBytes(ok.file()); err != nil {
		t.Fatalf("the unchanged SEG: %v", err)
	}
	fractional := ok
	fractional.segType = "FRACTIONAL"
	mrClass := ok
	mrClass.class = dicomtest.MRImageStorage
	bigEndian := ok
	bigEndian.syntax = dicomtest.ExplicitVRBigEndian
	short := ok.file()
	// the pixel data declares 2 bytes fewer than its frames need, and the file ends there
	binary.LittleEndian.PutUint32(short[len(short)-404-4:], 402)
	short = short[:len(short)-2]
	mr := dicomtest.Series{StudyUID: "1.2", SeriesUID: "1.2.3", Rows: 8, Columns: 8}.Slice(0)
	cases := map[string][]byte{
		"fractional":  fractional.file(),
		"MR class":    mrClass.file(),
		"big endian":  bigEndian.file(),
		"MR image":    mr,
		"bare":        mr[132:],
		"short":       short,
		"empty":       nil,
		"deflated MR": dicomtest.Image{Syntax: dicomtest.DeflatedExplicitVRLE, Geometry: dicomtest.Geometry{Rows: 2, Columns: 2}, Pixels: dicomtest.Pixels{Values: make([]uint32, 4)}}.File(),
	}
	if n := len(ok.file()) - 404; binary.LittleEndian.Uint32(ok.file()[n-4:]) != 404 {
		t.Fatal("the test's pixel data is not 404 bytes at the end")
	}
	for name, b := range cases {
		if _, err := readBytes(b); !errors.Is(err, ErrNotSEG) {
			t.Errorf("%s: error %v, want ErrNotSEG", name, err)
		}
	}
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.dcm")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(fifo); !errors.Is(err, regular.ErrNotRegular) {
		t.Errorf("FIFO: error %v, want regular.ErrNotRegular", err)
	}
	path := filepath.Join(dir, "mr.dcm")
	if err := os.WriteFile(path, mr, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path); !errors.Is(err, ErrNotSEG) {
		t.Errorf("MR file: error %v, want ErrNotSEG", err)
	}
	if IsSEG(path) || IsSEG(fifo) {
		t.Error("IsSEG takes an MR image or a FIFO for a SEG")
	}
	if err := os.WriteFile(path, fractional.file(), 0o644); err != nil {
		t.Fatal(err)
	}
	if !IsSEG(path) {
		t.Error("IsSEG: a FRACTIONAL SEG is a SEG (that ReadFile refuses)")
	}
}

// TestTruncatedAndDamaged: every prefix of a SEG fails with ErrNotSEG; the SEG with any one
// byte before its pixel data changed fails with ErrNotSEG or reads; nothing panics.
func TestTruncatedAndDamaged(t *testing.T) {
	t.Parallel()
	full := odd37x29(dicomtest.ImplicitVRLittleEndian).file()
	pixelsAt := len(full) - 404
	for n := range len(full) {
		if _, err := readBytes(full[:n]); !errors.Is(err, ErrNotSEG) {
			t.Fatalf("cut to %d bytes: error %v, want ErrNotSEG", n, err)
		}
	}
	for i := 132; i < pixelsAt; i++ {
		for _, v := range []byte{0x00, 0xFF, 0x7F} {
			b := bytes.Clone(full)
			b[i] = v
			if _, err := readBytes(b); err != nil && !errors.Is(err, ErrNotSEG) {
				t.Fatalf("byte %d set to %#x: error %v wraps no ErrNotSEG", i, v, err)
			}
		}
	}
}

// TestHostileLengthsAllocateNothing: elements that claim gigabytes, sequences nested 10,000
// deep and a pixel data element claiming 4 GiB fail with ErrNotSEG, allocating little.
func TestHostileLengthsAllocateNothing(t *testing.T) {
	t.Parallel()
	head := func() *dicomtest.Enc {
		return dicomtest.NewEnc(dicomtest.ExplicitVRLittleEndian).Str(0x00080016, "UI", SOPClass)
	}
	deep := head()
	for range 10000 {
		deep.Header(0x00620002, "SQ", dicomtest.UndefinedLength).ItemStart()
	}
	cases := map[string][]byte{
		"huge value":     head().Header(0x00620005, "UT", 0xFFFFFFF0).Raw(make([]byte, 100)).Bytes(),
		"huge pixels":    head().Header(0x7FE00010, "OB", 0xFFFFFFF0).Raw(make([]byte, 100)).Bytes(),
		"huge item":      head().Header(0x00620002, "SQ", dicomtest.UndefinedLength).Tag(dicomtest.TagItem).U32(0xFFFFFFF0).Bytes(),
		"deep":           deep.Bytes(),
		"endless items":  head().Header(0x52009230, "SQ", dicomtest.UndefinedLength).Raw(bytes.Repeat(dicomtest.NewEnc(dicomtest.ExplicitVRLittleEndian).ItemStart().ItemEnd().Bytes(), 2000)).Bytes(),
		"frames claimed": odd37x29WithFrames("99999999"),
	}
	for name, ds := range cases {
		b := ds
		if name != "frames claimed" {
			meta := dicomtest.NewEnc(dicomtest.ExplicitVRLittleEndian).Str(0x00020002, "UI", SOPClass).Str(0x00020010, "UI", dicomtest.ExplicitVRLittleEndian)
			b = append(append(append(make([]byte, 128), "DICM"...), meta.Bytes()...), ds...)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := readBytes(b)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrNotSEG) {
			t.Errorf("%s: error %v, want ErrNotSEG", name, err)
		}
		// other tests run in parallel: the bound is loose, far below what the lengths claim
		if d := after.TotalAlloc - before.TotalAlloc; d > 256<<20 {
			t.Errorf("%s: %d MiB allocated", name, d>>20)
		}
	}
}

// odd37x29WithFrames is the 37x29 SEG with its NumberOfFrames value replaced (8 characters).
func odd37x29WithFrames(n string) []byte {
	b := odd37x29("").file()
	i := bytes.Index(b, []byte{0x28, 0x00, 0x08, 0x00, 'I', 'S', 2, 0})
	out := append(bytes.Clone(b[:i]), 0x28, 0x00, 0x08, 0x00, 'I', 'S', byte(len(n)), 0)
	out = append(out, n...)
	return append(out, b[i+10:]...)
}
