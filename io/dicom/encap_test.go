package dicom

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	stdjpeg "image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"voxpipe/internal/dicomtest"
	"voxpipe/io/jpeg"
)

// encapCase is a multi-frame image whose frames are written encapsulated: frames holds each
// frame's compressed bytes, values the samples they decode to (the expected volume).
type encapCase struct {
	syntax       string
	rows, cols   int
	bits         int // bits allocated
	frames       [][]byte
	values       []uint32
	split        int  // fragments per frame
	bot, eot     bool // offset tables
	singleFrames bool // one file per frame instead of one multi-frame file
}

// frameValues is a smooth image with structure, frame k of it.
func frameValues(rows, cols, k, maxv int) []uint32 {
	v := make([]uint32, rows*cols)
	for y := range rows {
		for x := range cols {
			v[y*cols+x] = uint32((x*x+3*y*y+40*k+7*x*y)%(maxv+1)) &^ 3
		}
	}
	return v
}

// uncompressedCase: native little-endian frames, encapsulated (1.2.840.10008.1.2.1.98).
func uncompressedCase(rows, cols, n int) encapCase {
	c := encapCase{syntax: string(EncapsulatedUncompressed), rows: rows, cols: cols, bits: 16}
	for k := range n {
		v := frameValues(rows, cols, k, 4095)
		var raw []byte
		for _, s := range v {
			raw = binary.LittleEndian.AppendUint16(raw, uint16(s))
		}
		c.frames, c.values = append(c.frames, raw), append(c.values, v...)
	}
	return c
}

// baselineCase: 8-bit frames encoded by Go's image/jpeg; the values are io/jpeg's decoding of
// each frame alone (io/jpeg's tests check it against dcmtk and image/jpeg).
func baselineCase(t testing.TB, rows, cols, n int) encapCase {
	c := encapCase{syntax: string(JPEGBaseline), rows: rows, cols: cols, bits: 8}
	for k := range n {
		img := image.NewGray(image.Rect(0, 0, cols, rows))
		for i, s := range frameValues(rows, cols, k, 255) {
			img.Pix[i] = byte(s)
		}
		var b bytes.Buffer
		if err := stdjpeg.Encode(&b, img, &stdjpeg.Options{Quality: 90}); err != nil {
			t.Fatal(err)
		}
		back := make([]byte, rows*cols)
		if err := jpeg.Decode(back, b.Bytes(), cols, rows, 1); err != nil {
			t.Fatal(err)
		}
		for _, p := range back {
			c.values = append(c.values, uint32(p))
		}
		c.frames = append(c.frames, b.Bytes())
	}
	return c
}

// images are the case's files: one multi-frame image, or an image per frame.
func (c encapCase) images() []dicomtest.Image {
	image := func(k int, frames [][]byte, positions [][3]float64) dicomtest.Image {
		g := dicomtest.Geometry{Rows: c.rows, Columns: c.cols, Orientation: dicomtest.Axial, Spacing: [2]float64{1, 1}, Position: [3]float64{0, 0, float64(k)}}
		if positions != nil {
			g.Frames, g.FramePositions = len(positions), positions
		}
		return dicomtest.Image{
			Syntax:   c.syntax,
			IDs:      dicomtest.IDs{StudyUID: "1.2", SeriesUID: "1.2.5", SOPUID: fmt.Sprintf("1.2.5.%d", k), Number: 5, Instance: k + 1},
			Geometry: g,
			Pixels:   dicomtest.Pixels{BitsAllocated: c.bits, Encapsulated: dicomtest.Encapsulate(frames, c.split, c.bot, c.eot)},
		}
	}
	if c.singleFrames {
		var imgs []dicomtest.Image
		for k, fr := range c.frames {
			imgs = append(imgs, image(k, [][]byte{fr}, nil))
		}
		return imgs
	}
	pos := make([][3]float64, len(c.frames))
	for k := range pos {
		pos[k] = [3]float64{0, 0, float64(k)}
	}
	return []dicomtest.Image{image(0, c.frames, pos)}
}

// write writes the case's files into dir.
func (c encapCase) write(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	for k, img := range c.images() {
		p := filepath.Join(dir, dicomtest.FileName(k))
		if err := os.WriteFile(p, img.File(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// readSeries scans paths as one series and reads it with workers goroutines.
func readSeries(t *testing.T, paths []string, workers int) (*Series, []byte, error) {
	t.Helper()
	scan := ScanFiles(paths, 1)
	if len(scan.Series) != 1 {
		t.Fatalf("%d series, skipped %v", len(scan.Series), scan.Skipped)
	}
	s := scan.Series[0]
	if s.Err != nil {
		return s, nil, s.Err
	}
	buf := make([]byte, s.Voxels()*int64(s.BitsAllocated/8))
	_, err := s.ReadRaw(buf, workers)
	return s, buf, err
}

// nativeVolume is what ReadRaw gives for the case's values written uncompressed: the
// expected volume, rows flipped and all.
func (c encapCase) nativeVolume(t *testing.T) []byte {
	t.Helper()
	n := len(c.frames)
	pos := make([][3]float64, n)
	for k := range pos {
		pos[k] = [3]float64{0, 0, float64(k)}
	}
	img := dicomtest.Image{
		IDs:      dicomtest.IDs{StudyUID: "1.2", SeriesUID: "1.2.6", SOPUID: "1.2.6.1", Number: 6, Instance: 1},
		Geometry: dicomtest.Geometry{Rows: c.rows, Columns: c.cols, Orientation: dicomtest.Axial, Spacing: [2]float64{1, 1}, Frames: n, FramePositions: pos},
		Pixels:   dicomtest.Pixels{BitsAllocated: c.bits, Values: c.values},
	}
	p := filepath.Join(t.TempDir(), "native.dcm")
	if err := os.WriteFile(p, img.File(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, buf, err := readSeries(t, []string{p}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return buf
}

// Encapsulated frames read the same as the same values written natively, whatever the
// fragment layout: a fragment per frame or several, with or without the basic offset table,
// with the Extended Offset Table, without any table (frames found by their SOI markers), in a
// multi-frame file or a file per frame, decoded on one goroutine or several.
func TestEncapsulatedLayouts(t *testing.T) {
	t.Parallel()
	type layout struct {
		split         int
		bot, eot, one bool
	}
	layouts := map[string]layout{
		"fragment per frame, offset table": {1, true, false, false},
		"fragment per frame, no table":     {1, false, false, false},
		"split, offset table":              {3, true, false, false},
		"split, extended offset table":     {3, false, true, false},
		"split, no table (SOI)":            {3, false, false, false},
		"file per frame, split":            {3, false, false, true},
	}
	cases := map[string]encapCase{"uncompressed": uncompressedCase(9, 14, 5), "baseline": baselineCase(t, 16, 24, 5)}
	for cname, base := range cases {
		want := base.nativeVolume(t)
		for lname, l := range layouts {
			if cname == "uncompressed" && l.split > 1 && !l.bot && !l.eot && !l.one {
				continue // native frames have no SOI marker to find them by
			}
			t.Run(cname+"/"+lname, func(t *testing.T) {
				t.Parallel()
				c := base
				c.split, c.bot, c.eot, c.singleFrames = l.split, l.bot, l.eot, l.one
				paths := c.write(t, t.TempDir())
				for _, workers := range []int{1, 4} {
					_, got, err := readSeries(t, paths, workers)
					if err != nil {
						t.Fatalf("%d workers: %v", workers, err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("%d workers: the volume differs from the native one", workers)
					}
				}
			})
		}
	}
}

// Fragments that do not make the image's frames fail the series as corrupt, naming the file:
// an offset table that points inside a fragment or past the last one, fewer fragments than
// frames, SOI markers that do not count the frames, a compressed frame far larger than its
// pixels could need.
func TestEncapsulatedCorrupt(t *testing.T) {
	t.Parallel()
	base := uncompressedCase(4, 6, 3)
	cases := map[string]func(e *dicomtest.Encapsulated){
		"offset inside a fragment": func(e *dicomtest.Encapsulated) { e.Offsets[1] += 2 },
		"offset past the end":      func(e *dicomtest.Encapsulated) { e.Offsets[2] = 1 << 20 },
		"offsets decrease":         func(e *dicomtest.Encapsulated) { e.Offsets[1], e.Offsets[2] = e.Offsets[2], e.Offsets[1] },
		"first offset not 0":       func(e *dicomtest.Encapsulated) { e.Offsets[0] = 8 },
		"fewer fragments":          func(e *dicomtest.Encapsulated) { e.Offsets = nil; e.Fragments = e.Fragments[:2] },
		"a frame too large": func(e *dicomtest.Encapsulated) {
			e.Offsets = nil
			e.Fragments[1] = make([]byte, maxCompressedSlack+200)
		},
		"short uncompressed frame": func(e *dicomtest.Encapsulated) { e.Offsets = nil; e.Fragments[1] = e.Fragments[1][:10] },
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pos := [][3]float64{{0, 0, 0}, {0, 0, 1}, {0, 0, 2}}
			enc := dicomtest.Encapsulate(base.frames, 1, true, false)
			damage(enc)
			img := dicomtest.Image{
				Syntax:   base.syntax,
				IDs:      dicomtest.IDs{StudyUID: "1.2", SeriesUID: "1.2.7", SOPUID: "1.2.7.1", Number: 7, Instance: 1},
				Geometry: dicomtest.Geometry{Rows: base.rows, Columns: base.cols, Orientation: dicomtest.Axial, Spacing: [2]float64{1, 1}, Frames: 3, FramePositions: pos},
				Pixels:   dicomtest.Pixels{BitsAllocated: 16, Encapsulated: enc},
			}
			p := filepath.Join(t.TempDir(), "IM0001")
			if err := os.WriteFile(p, img.File(), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := readSeries(t, []string{p}, 2)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), p) {
				t.Fatalf("got %v, want ErrCorrupt naming %s", err, p)
			}
		})
	}
}

// JPEG 2000 and HTJ2K (and every other syntax not decoded) are refused with ErrUnsupported,
// and the message names the syntax and the way out: Explicit VR Little Endian from the PACS,
// or a named transcoder.
func TestRefusedSyntaxesNameTheWayOut(t *testing.T) {
	t.Parallel()
	for _, ts := range []string{"1.2.840.10008.1.2.4.90", "1.2.840.10008.1.2.4.91", "1.2.840.10008.1.2.4.92", "1.2.840.10008.1.2.4.93",
		"1.2.840.10008.1.2.4.201", "1.2.840.10008.1.2.4.202", "1.2.840.10008.1.2.4.203", "1.2.840.10008.1.2.4.100"} {
		t.Run(ts, func(t *testing.T) {
			t.Parallel()
			c := uncompressedCase(4, 6, 1)
			c.syntax, c.singleFrames = ts, true
			_, _, err := readSeries(t, c.write(t, t.TempDir()), 1)
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("got %v, want ErrUnsupported", err)
			}
			msg := err.Error()
			for _, need := range []string{TransferSyntax(ts).String(), "transfer-syntax=1.2.840.10008.1.2.1", "gdcmconv"} {
				if !strings.Contains(msg, need) {
					t.Errorf("%q does not say %q", msg, need)
				}
			}
		})
	}
}

// A damaged compressed frame fails its series, naming the file and the frame: a stream cut
// short (ErrTruncated), one whose frame header declares another size, however large (refused
// before anything is decoded), one whose entropy-coded data is noise (corrupt or cut short,
// whichever the decoder meets first).
func TestCompressedFrameDamage(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		damage func(b []byte) []byte
		want   error
	}{
		"cut short": {func(b []byte) []byte { return b[:len(b)/2] }, ErrTruncated},
		"65535 rows": {func(b []byte) []byte {
			at := bytes.Index(b, []byte{0xFF, 0xC0}) // SOF0: length, precision, then the height
			b[at+5], b[at+6] = 0xFF, 0xFF
			return b
		}, ErrCorrupt},
		"noise": {func(b []byte) []byte {
			sos := bytes.Index(b, []byte{0xFF, 0xDA})
			for i := sos + 20; i < len(b)-2; i++ {
				b[i] = byte(i * 37 % 255) // never 0xFF: no marker
			}
			return b
		}, nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			base := baselineCase(t, 16, 24, 3)
			base.frames[1] = c.damage(bytes.Clone(base.frames[1]))
			base.split = 1
			paths := base.write(t, t.TempDir())
			_, _, err := readSeries(t, paths, 2)
			classed := errors.Is(err, c.want) || c.want == nil && (errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTruncated))
			if !classed || !strings.Contains(err.Error(), paths[0]) || !strings.Contains(err.Error(), "frame 1") {
				t.Fatalf("got %v, want %v naming %s and frame 1", err, c.want, paths[0])
			}
		})
	}
}
