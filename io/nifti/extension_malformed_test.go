package nifti

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// extFile builds a single-file NIfTI (int16 6x5x4, testHeader) with the extender set and the
// given extension area between it and the data; vox_offset points past the area.
func extFile(t testing.TB, version int, order binary.ByteOrder, area []byte) []byte {
	t.Helper()
	plain := validFile(t, version, order)
	hsize := headerSize(version)
	b := append(bytes.Clone(plain[:hsize]), 1, 0, 0, 0)
	b = append(b, area...)
	b = append(b, plain[hsize+4:]...)
	setVoxOffset(b, version, order, int64(hsize+4+len(area)))
	return b
}

func setVoxOffset(b []byte, version int, order binary.ByteOrder, v int64) {
	if version == 1 {
		order.PutUint32(b[108:], math.Float32bits(float32(v)))
	} else {
		order.PutUint64(b[168:], uint64(v))
	}
}

// extBytes lays out one extension: esize as given (possibly wrong), code, edata.
func extBytes(order binary.ByteOrder, esize int32, code int32, edata []byte) []byte {
	b := make([]byte, 8, 8+len(edata))
	order.PutUint32(b, uint32(esize))
	order.PutUint32(b[4:], uint32(code))
	return append(b, edata...)
}

// TestMalformedExtensions: parsing stops at the first extension whose esize is below 16, not a
// multiple of 16, or runs past the extension area (vox_offset, or the end of a .hdr); the
// extensions before it are kept and the file reads normally.
func TestMalformedExtensions(t *testing.T) {
	type tc struct {
		name string
		tail func(o binary.ByteOrder) []byte // after the good extension
	}
	cases := []tc{
		{"esize 0", func(o binary.ByteOrder) []byte { return extBytes(o, 0, 6, make([]byte, 24)) }},
		{"esize 8", func(o binary.ByteOrder) []byte { return extBytes(o, 8, 6, make([]byte, 24)) }},
		{"esize negative", func(o binary.ByteOrder) []byte { return extBytes(o, -32, 6, make([]byte, 24)) }},
		{"esize not a multiple of 16", func(o binary.ByteOrder) []byte { return extBytes(o, 20, 6, make([]byte, 24)) }},
		{"past the area", func(o binary.ByteOrder) []byte { return extBytes(o, 48, 6, make([]byte, 24)) }},
		{"past the file", func(o binary.ByteOrder) []byte { return extBytes(o, 1<<30, 6, make([]byte, 24)) }},
		{"max esize", func(o binary.ByteOrder) []byte { return extBytes(o, math.MaxInt32&^15, 6, make([]byte, 24)) }},
		{"area of 8 bytes", func(o binary.ByteOrder) []byte { return extBytes(o, 16, 6, nil) }},
	}
	for _, version := range []int{1, 2} {
		for _, order := range byteOrders {
			for _, c := range cases {
				for _, ext := range []string{".nii", ".nii.gz", ".hdr", ".hdr.gz"} {
					name := fmt.Sprintf("%s_n%d_%s%s", strings.ReplaceAll(c.name, " ", "_"), version, orderName(order), ext)
					t.Run(name, func(t *testing.T) {
						edata := padded([]byte("good one!"))
						good := extBytes(order, int32(8+len(edata)), ExtCodeComment, edata)
						area := append(good, c.tail(order)...)
						dir := t.TempDir()
						path := filepath.Join(dir, "m"+ext)
						writeMalformed(t, path, version, order, area)
						var h *Header
						alloc := allocatedDuring(func() {
							var err error
							if h, err = ReadHeader(path); err != nil {
								t.Fatal(err)
							}
						})
						if alloc > 1<<20 {
							t.Errorf("ReadHeader allocated %d KiB", alloc>>10)
						}
						if len(h.Extensions) != 1 || h.Extensions[0].Code != ExtCodeComment || h.Extensions[0].Text() != "good one!" {
							t.Errorf("extensions %+v, want the good one alone", h.Extensions)
						}
						if h.ExtensionLen != int64(len(area)) {
							t.Errorf("ExtensionLen %d, want %d", h.ExtensionLen, len(area))
						}
						_, data, err := ReadFloat32(path)
						if err != nil {
							t.Fatal(err)
						}
						for i, v := range data {
							x, y, z := i%6, i/6%5, i/30
							if v != float32(fixtureValue(Int16, x, y, z, 0)) {
								t.Fatalf("voxel %d = %v", i, v)
							}
						}
					})
				}
			}
		}
	}
}

// writeMalformed writes the valid int16 6x5x4 volume with the extension area as given: as a
// single file (extFile), or as a pair whose .hdr ends with it.
func writeMalformed(t *testing.T, path string, version int, order binary.ByteOrder, area []byte) {
	t.Helper()
	gz := strings.HasSuffix(path, ".gz")
	maybeGzip := func(b []byte) []byte {
		if gz {
			return gzipBytes(t, b)
		}
		return b
	}
	if strings.Contains(path, ".nii") {
		if err := os.WriteFile(path, maybeGzip(extFile(t, version, order, area)), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := Write(path, testHeader(Int16, version, order, 6, 5, 4), formulaData(Int16, 6, 5, 4, 1), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	hdr := plainBytes(t, path)
	hdr[headerSize(version)] = 1
	if err := os.WriteFile(path, maybeGzip(append(hdr, area...)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHugeExtensionArea: a vox_offset or esize far beyond what the file holds costs no more
// memory than the file, and the area parsed is capped at maxExtensionBytes.
func TestHugeExtensionArea(t *testing.T) {
	o := binary.LittleEndian
	t.Run("vox_offset 2^40 in a small .nii.gz", func(t *testing.T) {
		// The esize fits the (capped) area: the parse reads on until the file ends.
		b := extFile(t, 2, o, extBytes(o, maxExtensionBytes, ExtCodeComment, make([]byte, 4000)))
		setVoxOffset(b, 2, o, 1<<40)
		path := filepath.Join(t.TempDir(), "a.nii.gz")
		os.WriteFile(path, gzipBytes(t, b), 0o644)
		var err error
		alloc := allocatedDuring(func() { _, err = ReadHeader(path) })
		wantErr(t, err, ErrCorrupt, path)
		if alloc > 1<<20 {
			t.Errorf("%d KiB allocated", alloc>>10)
		}
	})
	t.Run("esize 16 MiB in a small .nii", func(t *testing.T) {
		b := extFile(t, 1, o, extBytes(o, maxExtensionBytes, ExtCodeComment, make([]byte, 4000)))
		setVoxOffset(b, 1, o, 352+maxExtensionBytes)
		path := filepath.Join(t.TempDir(), "a.nii")
		os.WriteFile(path, b, 0o644)
		var err error
		alloc := allocatedDuring(func() { _, err = Open(path) })
		wantErr(t, err, ErrCorrupt, path)
		if alloc > 1<<20 {
			t.Errorf("%d KiB allocated", alloc>>10)
		}
	})
	t.Run("area over 16 MiB", func(t *testing.T) {
		// Two valid extensions, the second crossing the 16 MiB cap: only the first is kept, and
		// the data after the whole area still reads.
		firstData := make([]byte, 15<<20-8)
		copy(firstData, "first")
		first := extBytes(o, 15<<20, ExtCodeComment, firstData)
		second := extBytes(o, 2<<20, ExtCodeComment, make([]byte, 2<<20-8))
		area := append(first, second...)
		for _, ext := range []string{".nii", ".nii.gz"} {
			path := filepath.Join(t.TempDir(), "big"+ext)
			writeMalformed(t, path, 1, o, area)
			h, data, err := ReadFloat32(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Extensions) != 1 || h.Extensions[0].Text() != "first" || h.ExtensionLen != 17<<20 {
				t.Errorf("%s: %d extensions, ExtensionLen %d", ext, len(h.Extensions), h.ExtensionLen)
			}
			if data[7] != float32(fixtureValue(Int16, 1, 1, 0, 0)) {
				t.Errorf("%s: voxel (1,1,0) = %v", ext, data[7])
			}
		}
	})
}

// TestReadHeaderInflatesNoVoxels: the header-only open behind ReadHeader inflates a .nii.gz
// up to vox_offset and starts no read-ahead.
func TestReadHeaderInflatesNoVoxels(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.nii.gz")
	h := testHeader(Int16, 1, binary.LittleEndian, 256, 256, 40)
	h.Extensions = []Extension{{Code: ExtCodeComment, Data: []byte("provenance")}}
	if err := Write(path, h, formulaData(Int16, 256, 256, 40, 1), DefaultWriteOptions()); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, WithVolume(0), func(c *openConfig) { c.headerOnly = true })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.ahead != nil || r.mem != nil || r.in != nil {
		t.Errorf("header-only open set up voxel reading")
	}
	if got, want := r.sources[0].consumed, r.Header().VoxOffset; got > want {
		t.Errorf("inflated %d bytes, the header and extensions are %d", got, want)
	}
	rh, err := ReadHeader(path)
	if err != nil || len(rh.Extensions) != 1 || rh.Extensions[0].Text() != "provenance" {
		t.Errorf("ReadHeader: %v, %+v", err, rh)
	}
}

// FuzzExtensions parses arbitrary extension areas: whatever parses must lie within the area,
// be whole 16-byte blocks, and encode back to exactly the bytes it came from.
func FuzzExtensions(f *testing.F) {
	f.Add(extBytes(binary.LittleEndian, 32, 6, padded([]byte("comment"))), int64(32), false)
	f.Add(append(extBytes(binary.BigEndian, 16, 4, make([]byte, 8)), extBytes(binary.BigEndian, 20, 6, nil)...), int64(-1), true)
	f.Fuzz(func(t *testing.T, area []byte, size int64, big bool) {
		order := binary.ByteOrder(binary.LittleEndian)
		if big {
			order = binary.BigEndian
		}
		exts, err := parseExtensions(bytes.NewReader(area), size, order)
		if err != nil {
			t.Fatalf("error from an in-memory reader: %v", err)
		}
		if _, err := extensionArea(exts); err != nil {
			t.Fatalf("parsed extensions do not encode: %v", err)
		}
		enc := appendExtensions(nil, exts, order)
		if size >= 0 && int64(len(enc)) > size {
			t.Fatalf("parsed %d bytes from a %d-byte area", len(enc), size)
		}
		if !bytes.Equal(enc, area[:len(enc)]) {
			t.Fatal("parsed extensions encode to other bytes")
		}
		for _, e := range exts {
			if (len(e.Data)+8)%16 != 0 {
				t.Fatalf("edata of %d bytes", len(e.Data))
			}
		}
	})
}
