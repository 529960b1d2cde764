package nifti

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// memFiles serves in-memory files to Open (withOpener), so fuzzing needs no disk.
type memFiles map[string][]byte

type memFile struct{ *bytes.Reader }

func (memFile) Close() error { return nil }

func (m memFiles) open(name string) (dataFile, int64, error) {
	b, ok := m[name]
	if !ok {
		return nil, 0, fmt.Errorf("open %s: %w", name, os.ErrNotExist)
	}
	return memFile{bytes.NewReader(b)}, int64(len(b)), nil
}

var sentinels = []error{ErrUnsupportedDatatype, ErrNotNIfTI, ErrCorrupt, ErrTruncated, ErrTooLarge, ErrMultiVolume}

func checkClassified(t *testing.T, err error, path string) {
	t.Helper()
	for _, s := range sentinels {
		if errors.Is(err, s) {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name %s", err, path)
			}
			return
		}
	}
	t.Fatalf("error %q wraps no sentinel", err)
}

// FuzzHeader decodes arbitrary header bytes. Whatever decodes and passes the geometry checks
// must also open as a file without panicking, encode again, and decode to the same header.
// ReadHeaderRaw must return ReadHeader's error, and its header when there is none, and never
// claim more header bytes than the file holds.
func FuzzHeader(f *testing.F) {
	f.Add(make([]byte, sizeofHdr1))
	// Broken files ReadHeaderRaw decodes anyway: a header cut short, complex64, a negative dim.
	for _, version := range []int{1, 2} {
		h := testHeader(Int16, version, binary.LittleEndian, 6, 5, 4)
		enc, _, err := encodeHeader(h, false)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc[:200])
		f.Add(clone(enc, func(b []byte) { binary.LittleEndian.PutUint16(b[map[int]int{1: 70, 2: 12}[version]:], 32) }))
		f.Add(clone(enc, func(b []byte) {
			if version == 1 {
				setDim1(b, 3, -4)
			} else {
				setDim2(b, 3, -4)
			}
		}))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		files := memFiles{"f.nii": b}
		if r, err := Open("f.nii", withOpener(files.open)); err == nil {
			r.Close()
		} else {
			checkClassified(t, err, "f.nii")
		}
		raw, rawErr := readHeaderRaw("f.nii", withOpener(files.open))
		var want *Header
		r, err := Open("f.nii", withOpener(files.open), WithVolume(0), func(c *openConfig) { c.headerOnly = true })
		if err == nil {
			want = r.Header()
			r.Close()
		}
		switch {
		case (rawErr == nil) != (err == nil) || err != nil && rawErr.Error() != err.Error():
			t.Fatalf("ReadHeaderRaw: %v, ReadHeader: %v", rawErr, err)
		case raw == nil && len(b) >= 2 && !(b[0] == 0x1f && b[1] == 0x8b):
			t.Fatalf("no RawHeader of an uncompressed file (%v)", rawErr)
		case raw == nil:
		case want != nil && (!headersIdentical(&raw.Header, want) || len(raw.Extensions) != len(want.Extensions)):
			t.Fatalf("ReadHeaderRaw of a valid file:\n%+v\n%+v", raw.Header, *want)
		case raw.Read > headerSize(max(raw.Version, 1)) || raw.Version == 0 && raw.Read > 4:
			t.Fatalf("Read %d of a NIfTI-%d header", raw.Read, raw.Version)
		case raw.FileSize != int64(len(b)) || !raw.Gzipped && raw.Read > len(b):
			t.Fatalf("Read %d, FileSize %d of a %d-byte file", raw.Read, raw.FileSize, len(b))
		}
		if len(b) < 4 {
			return
		}
		version, order, size, err := detectHeader(b)
		if err != nil || len(b) < size {
			return
		}
		h, err := decodeHeader(b[:size], version, order)
		if err != nil {
			return
		}
		if _, err := checkGeometry(h); err != nil {
			return
		}
		pair := h.Magic[1] == 'i'
		enc, _, err := encodeHeader(h, pair)
		if err != nil {
			t.Fatalf("a decoded header does not encode: %v", err)
		}
		h2, err := decodeHeader(enc[:size], version, order)
		if err != nil {
			t.Fatalf("an encoded header does not decode: %v", err)
		}
		h.BitPix, h2.BitPix = 0, 0
		h.VoxOffset, h2.VoxOffset = 0, 0
		if !headersIdentical(h, h2) {
			t.Fatalf("header changed in an encode/decode round trip:\n%+v\n%+v", h, h2)
		}
	})
}

// FuzzReadSlabs opens an arbitrary file (.nii, gzip sniffed) and streams it in slabs. Errors
// must be classified and name the file; a volume that reads must read the same through the
// float32 API and through positional reads (uncompressed), and never need more memory than
// its file can hold.
func FuzzReadSlabs(f *testing.F) {
	inflateAlways(f) // gzip inputs are also read inflated whole
	f.Add(make([]byte, 400), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, slab uint8) {
		files := memFiles{"f.nii": b}
		r, err := Open("f.nii", withOpener(files.open))
		if err != nil {
			checkClassified(t, err, "f.nii")
			return
		}
		defer r.Close()
		// Slabs of n slices, at most the volume's depth: that much must fit in what the file
		// can hold (a 1-slice volume needs one slice, whatever slab the caller asks for).
		n := min(int(slab%16)+1, max(r.Depth(), 1))
		elem := r.Datatype().Size()
		if int64(n)*int64(r.SliceVoxels()*elem) > int64(len(b))*maxDeflateRatio+1<<16 {
			t.Fatalf("Open accepted %d slices of %d bytes from a %d-byte file", n, r.SliceVoxels()*elem, len(b))
		}
		raw, ok := readSlabs(t, r, n)
		if !ok {
			return
		}
		r2, err := Open("f.nii", withOpener(files.open))
		if err != nil {
			t.Fatalf("second Open: %v", err)
		}
		defer r2.Close()
		fl := make([]float32, r2.SliceVoxels()*r2.Depth())
		if _, err := r2.ReadSlicesFloat32(fl, r2.Depth()); err != nil {
			t.Fatalf("float32 read of a file that read raw: %v", err)
		}
		for i, v := range fl {
			want := float32(sampleAt(raw, r.Datatype(), i))
			if v != want && !(math.IsNaN(float64(v)) && math.IsNaN(float64(want))) {
				t.Fatalf("sample %d: float32 %v, raw %v", i, v, want)
			}
		}
		// Positional reads, last slab first, give the same bytes; gzip refuses them, unless
		// inflated whole (WithInflateThreads), which then reads the same bytes both ways.
		if !r2.Seekable() {
			checkGzipPositional(t, files, r2, raw)
			return
		}
		checkPositional(t, r2, n, raw, fl)
	})
}

// readSlabs reads r's volume in slabs of n slices; it reports false where a read failed
// (with a classified error).
func readSlabs(t *testing.T, r *Reader, n int) ([]byte, bool) {
	elem := r.Datatype().Size()
	buf := make([]byte, n*r.SliceVoxels()*elem)
	var raw []byte
	for {
		k, err := r.ReadSlicesRaw(buf, n)
		raw = append(raw, buf[:k*r.SliceVoxels()*elem]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			checkClassified(t, err, "f.nii")
			return nil, false
		}
	}
	if len(raw) != r.SliceVoxels()*r.Depth()*elem {
		t.Fatalf("read %d bytes, want %d", len(raw), r.SliceVoxels()*r.Depth()*elem)
	}
	return raw, true
}

// checkGzipPositional: r2 (gzip data, read sequentially) refuses positional reads; opened
// with WithInflateThreads it reads raw both ways.
func checkGzipPositional(t *testing.T, files memFiles, r2 *Reader, raw []byte) {
	if _, err := r2.ReadSlicesRawAt(make([]byte, r2.SliceVoxels()*r2.Datatype().Size()), 0, 1); !errors.Is(err, ErrNotSeekable) {
		t.Fatalf("positional read of gzip data: %v", err)
	}
	r3, err := Open("f.nii", withOpener(files.open), WithInflateThreads(3))
	if err != nil {
		t.Fatalf("Open with WithInflateThreads of a file that read raw: %v", err)
	}
	defer r3.Close()
	seq := make([]byte, len(raw))
	if _, err := r3.ReadSlicesRaw(seq, r3.Depth()); err != nil || !bytes.Equal(seq, raw) {
		t.Fatalf("WithInflateThreads: sequential read %v, equal %v", err, bytes.Equal(seq, raw))
	}
	if r3.Seekable() {
		at := make([]byte, len(raw))
		if _, err := r3.ReadSlicesRawAt(at, 0, r3.Depth()); err != nil || !bytes.Equal(at, raw) {
			t.Fatalf("WithInflateThreads: positional read %v, equal %v", err, bytes.Equal(at, raw))
		}
	}
}

// checkPositional: positional reads of r2 in slabs of n slices, last slab first, give raw
// and fl, what the sequential reads gave.
func checkPositional(t *testing.T, r2 *Reader, n int, raw []byte, fl []float32) {
	plane := r2.SliceVoxels() * r2.Datatype().Size()
	rawAt := make([]byte, len(raw))
	flAt := make([]float32, len(fl))
	for z := (r2.Depth() - 1) / n * n; z >= 0; z -= n {
		want := min(n, r2.Depth()-z)
		if k, err := r2.ReadSlicesRawAt(rawAt[z*plane:], z, n); k != want || err != nil {
			t.Fatalf("ReadSlicesRawAt z %d: %d, %v", z, k, err)
		}
		if k, err := r2.ReadSlicesFloat32At(flAt[z*r2.SliceVoxels():], z, n); k != want || err != nil {
			t.Fatalf("ReadSlicesFloat32At z %d: %d, %v", z, k, err)
		}
	}
	if !bytes.Equal(rawAt, raw) || !bytes.Equal(bytesOf(flAt), bytesOf(fl)) {
		t.Fatal("positional reads differ from the sequential ones")
	}
}

// TestFuzzSeedCorpus writes testdata/fuzz/{FuzzHeader,FuzzReadSlabs} from the nibabel fixtures
// and files this package writes (go test -run TestFuzzSeedCorpus -update), and checks the
// committed corpus is there otherwise.
func TestFuzzSeedCorpus(t *testing.T) {
	if !*update {
		for _, target := range []string{"FuzzHeader", "FuzzReadSlabs"} {
			m, _ := filepath.Glob(filepath.Join("testdata/fuzz", target, "*"))
			if len(m) < 10 {
				t.Errorf("%s: %d seed files, want the committed corpus (-update)", target, len(m))
			}
		}
		return
	}
	seeds := map[string][]byte{}
	fixtures, _ := filepath.Glob("testdata/interop/*_n[12]_*")
	sort.Strings(fixtures)
	for _, p := range fixtures {
		if strings.HasSuffix(p, ".img") || strings.HasSuffix(p, ".img.gz") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		seeds[filepath.Base(p)] = b
	}
	dir := t.TempDir()
	for _, ext := range []string{".nii", ".nii.gz"} {
		for _, version := range []int{1, 2} {
			for _, order := range byteOrders {
				name := fmt.Sprintf("voxpipe_mask_n%d_%s%s", version, orderName(order), ext)
				path := filepath.Join(dir, name)
				h := MaskHeader(testHeader(Float32, version, order, 7, 6, 5), 4, "fuzz seed")
				labels := make([]byte, 7*6*5)
				for i := range labels {
					labels[i] = byte(i % 5)
				}
				if err := Write(path, h, labels, DefaultWriteOptions()); err != nil {
					t.Fatal(err)
				}
				seeds[name], _ = os.ReadFile(path)
			}
		}
	}
	for _, target := range []string{"FuzzHeader", "FuzzReadSlabs"} {
		out := filepath.Join("testdata/fuzz", target)
		os.RemoveAll(out)
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range seeds {
			var body string
			if target == "FuzzHeader" {
				plain := b
				if len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b {
					s, err := openSource(name, memFiles{name: b}.open)
					if err != nil {
						t.Fatal(err)
					}
					plain, _ = io.ReadAll(io.LimitReader(s, dataStart2))
				}
				body = fmt.Sprintf("[]byte(%q)\n", plain[:min(len(plain), dataStart2)])
			} else {
				if strings.HasPrefix(name, "ref_") {
					continue // 14 MB of zeros each: too slow to inflate on every fuzz run
				}
				body = fmt.Sprintf("[]byte(%q)\nbyte(%q)\n", b, uint8(len(name)%16))
			}
			if err := os.WriteFile(filepath.Join(out, name), []byte("go test fuzz v1\n"+body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
