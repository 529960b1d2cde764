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
	"reflect"
	"strings"
	"testing"
)

var writeFormats = []string{".nii", ".nii.gz", ".hdr", ".hdr.gz", ".img", ".img.gz"}

// TestRoundTrip writes every datatype in both byte orders, both versions and every layout, then
// reads it back through each API and checks header and samples bit for bit.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	const nx, ny, nz = 6, 5, 4
	for _, dt := range allDatatypes {
		for _, version := range []int{1, 2} {
			for _, order := range byteOrders {
				for _, ext := range writeFormats {
					name := fmt.Sprintf("%s_n%d_%s%s", dt, version, orderName(order), ext)
					t.Run(name, func(t *testing.T) {
						dir := t.TempDir()
						path := filepath.Join(dir, name)
						h := testHeader(dt, version, order, nx, ny, nz)
						data := extremes(dt, nx*ny*nz)
						if err := Write(path, h, data, DefaultWriteOptions()); err != nil {
							t.Fatal(err)
						}
						checkOnDisk(t, path, version, order)
						r, err := Open(path)
						if err != nil {
							t.Fatal(err)
						}
						defer r.Close()
						checkHeaderEqual(t, r.Header(), h)
						got := make([]byte, len(data))
						if k, err := r.ReadSlicesRaw(got, nz); k != nz || err != nil {
							t.Fatalf("ReadSlicesRaw: %d, %v", k, err)
						}
						if !bytes.Equal(got, data) {
							t.Fatalf("raw samples differ after the round trip")
						}
						checkConversions(t, path, dt, data)
					})
				}
			}
		}
	}
}

// checkConversions reads path again through ReadSlicesFloat32 and ReadSlicesInt16.
func checkConversions(t *testing.T, path string, dt DataType, data []byte) {
	t.Helper()
	n := len(data) / dt.Size()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	f := make([]float32, n)
	if _, err := r.ReadSlicesFloat32(f, r.Depth()); err != nil {
		t.Fatal(err)
	}
	r.Close()
	for i, v := range f {
		want := float32(sampleAt(data, dt, i))
		if v != want && !(math.IsNaN(float64(v)) && math.IsNaN(float64(want))) {
			t.Fatalf("float32 sample %d = %v, want %v", i, v, want)
		}
	}
	r, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := make([]int16, n)
	_, err = r.ReadSlicesInt16(s, r.Depth())
	if !Int16Exact(dt) {
		wantErr(t, err, ErrUnsupportedDatatype, "")
		if !strings.Contains(err.Error(), "not representable as int16") {
			t.Errorf("error %q", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range s {
		if want := int16(sampleAt(data, dt, i)); v != want {
			t.Fatalf("int16 sample %d = %d, want %d", i, v, want)
		}
	}
}

// checkOnDisk looks at the bytes: compression, sizeof_hdr byte order, magic, pair partner, and
// that no temporary is left.
func checkOnDisk(t *testing.T, path string, version int, order binary.ByteOrder) {
	t.Helper()
	l := namesOf(path)
	files := []string{path}
	if l.pair {
		files = []string{l.headers[0], l.images[0]}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		gz := len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b
		if gz != strings.HasSuffix(f, ".gz") {
			t.Errorf("%s: gzip %v", f, gz)
		}
		matches, _ := filepath.Glob(TempPattern(f))
		if len(matches) != 0 {
			t.Errorf("temporaries left: %v", matches)
		}
		st, _ := os.Stat(f)
		if st.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, want 0644", f, st.Mode())
		}
	}
	hs, err := openSource(files[0], osOpen)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	hdr := make([]byte, 12)
	if _, err := io.ReadFull(hs, hdr); err != nil {
		t.Fatal(err)
	}
	if got := order.Uint32(hdr); got != uint32(headerSize(version)) {
		t.Errorf("sizeof_hdr in %v order = %d", order, got)
	}
	if version == 2 {
		want := "n+2\x00\r\n\x1a\n"
		if l.pair {
			want = "ni2\x00\r\n\x1a\n"
		}
		if string(hdr[4:12]) != want {
			t.Errorf("magic %q, want %q", hdr[4:12], want)
		}
	}
}

// checkHeaderEqual compares every field a writer takes from the caller's header.
func checkHeaderEqual(t *testing.T, got, want *Header) {
	t.Helper()
	g, w := *got, *want
	if w.ByteOrder == nil {
		w.ByteOrder = hostOrder
	}
	if w.Version == 0 {
		w.Version = 1
	}
	// Derived on write.
	g.BitPix, g.VoxOffset, g.Magic, g.ExtensionLen = 0, 0, "", 0
	w.BitPix, w.VoxOffset, w.Magic, w.ExtensionLen = 0, 0, "", 0
	if !headersIdentical(&g, &w) {
		t.Errorf("header differs after the round trip:\n got  %+v\n want %+v", g, w)
	}
}

// headersIdentical compares field by field, floats by bits (NaN slopes are legal).
func headersIdentical(a, b *Header) bool {
	fa, fb := floatFields(a), floatFields(b)
	for i := range fa {
		if math.Float64bits(fa[i]) != math.Float64bits(fb[i]) && !(math.IsNaN(fa[i]) && math.IsNaN(fb[i])) {
			return false
		}
	}
	ca, cb := *a, *b
	ca.PixDim, cb.PixDim = [8]float64{}, [8]float64{}
	ca.SrowX, ca.SrowY, ca.SrowZ = [4]float64{}, [4]float64{}, [4]float64{}
	cb.SrowX, cb.SrowY, cb.SrowZ = [4]float64{}, [4]float64{}, [4]float64{}
	for _, p := range floatPtrs(&ca) {
		*p = 0
	}
	for _, p := range floatPtrs(&cb) {
		*p = 0
	}
	return reflect.DeepEqual(ca, cb)
}

func floatPtrs(h *Header) []*float64 {
	return []*float64{&h.IntentP1, &h.IntentP2, &h.IntentP3, &h.SclSlope, &h.SclInter, &h.CalMax, &h.CalMin,
		&h.SliceDur, &h.TOffset, &h.QuaternB, &h.QuaternC, &h.QuaternD, &h.QoffsetX, &h.QoffsetY, &h.QoffsetZ}
}

func floatFields(h *Header) []float64 {
	var v []float64
	for _, p := range floatPtrs(h) {
		v = append(v, *p)
	}
	v = append(v, h.PixDim[:]...)
	v = append(v, h.SrowX[:]...)
	v = append(v, h.SrowY[:]...)
	return append(v, h.SrowZ[:]...)
}

// TestStreamingWriter4D writes a 4D file slice by slice and reads each volume back.
func TestStreamingWriter4D(t *testing.T) {
	t.Parallel()
	const nx, ny, nz, nt = 7, 3, 5, 3
	for _, ext := range writeFormats {
		t.Run(ext, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "four"+ext)
			h := testHeader(Int16, 2, binary.BigEndian, nx, ny, nz, nt)
			data := formulaData(Int16, nx, ny, nz, nt)
			w, err := Create(path, h, WriteOptions{Level: 9, Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			slice := nx * ny * 2
			for off := 0; off < len(data); off += 2 * slice {
				end := min(off+2*slice, len(data)) // two slices at a time, one at the end
				if err := w.WriteSlices(data[off:end]); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(path); !errors.Is(err, ErrMultiVolume) {
				t.Fatalf("Open of 4D without WithVolume: %v", err)
			}
			for vol := range nt {
				got := readAllRaw(t, path, WithVolume(vol))
				want := data[vol*nz*slice : (vol+1)*nz*slice]
				if !bytes.Equal(got, want) {
					t.Fatalf("volume %d differs", vol)
				}
			}
			_, err = Open(path, WithVolume(nt))
			wantErr(t, err, ErrMultiVolume, path)
		})
	}
}
