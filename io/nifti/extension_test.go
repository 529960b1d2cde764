package nifti

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// plainBytes returns the bytes of the file at path, inflated when it is gzipped.
func plainBytes(t testing.TB, path string) []byte {
	t.Helper()
	s, err := openSource(path, osOpen)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := io.ReadAll(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// diskExtension is one extension as found by walking the bytes, independently of the reader.
type diskExtension struct {
	esize int
	code  int32
	edata []byte
}

// walkDisk checks the extender at b[hsize:] and walks the extensions up to end, failing on any
// esize that is not a positive multiple of 16 or that runs past end.
func walkDisk(t *testing.T, b []byte, hsize, end int, order binary.ByteOrder) []diskExtension {
	t.Helper()
	if len(b) < hsize+4 {
		t.Fatalf("%d bytes: no extender", len(b))
	}
	if !bytes.Equal(b[hsize:hsize+4], []byte{1, 0, 0, 0}) {
		t.Fatalf("extender % x, want 01 00 00 00", b[hsize:hsize+4])
	}
	var exts []diskExtension
	for at := hsize + 4; at < end; {
		esize := int(int32(order.Uint32(b[at:])))
		if esize < 16 || esize%16 != 0 || at+esize > end {
			t.Fatalf("extension at %d: esize %d (area ends at %d)", at, esize, end)
		}
		exts = append(exts, diskExtension{esize, int32(order.Uint32(b[at+4:])), b[at+8 : at+esize]})
		at += esize
	}
	return exts
}

// padded is data followed by zeros up to the next multiple of 16 bytes, counting 8 bytes of
// esize and ecode: the edata on disk.
func padded(data []byte) []byte {
	n := (8+len(data)+15)/16*16 - 8
	return append(bytes.Clone(data), make([]byte, n-len(data))...)
}

// extensionSets are the extensions TestExtensionRoundTrip writes: one comment; a comment and a
// binary payload ending in zeros; payloads that need no padding or fill a whole 16-byte block.
var extensionSets = map[string][]Extension{
	"one": {{Code: ExtCodeComment, Data: []byte("voxpipe provenance: model attngate-v1, sha256:9f2c")}},
	"two": {
		{Code: ExtCodeComment, Data: []byte("first")},
		{Code: ExtCodeAFNI, Data: []byte{0xde, 0xad, 0, 0xbe, 0xef, 0, 0}},
	},
	"exact blocks": {
		{Code: ExtCodeDICOM, Data: bytes.Repeat([]byte{7}, 8)},     // esize 16, no padding
		{Code: 40, Data: bytes.Repeat([]byte{'x'}, 24)},            // esize 32, no padding
		{Code: ExtCodeComment, Data: bytes.Repeat([]byte{'y'}, 9)}, // esize 32, 15 bytes of padding
		{Code: ExtCodeComment, Data: nil},                          // esize 16, edata all padding
	},
}

// TestExtensionRoundTrip writes volumes with extensions in every layout, version and byte
// order, checks the bytes on disk (extender, esizes, padding, vox_offset), reads them back
// through Open and ReadHeader, and writes what was read again, which must give the same bytes.
func TestExtensionRoundTrip(t *testing.T) {
	t.Parallel()
	for setName, exts := range extensionSets {
		for _, version := range []int{1, 2} {
			for _, order := range byteOrders {
				for _, ext := range []string{".nii", ".nii.gz", ".hdr", ".hdr.gz", ".img.gz"} {
					name := fmt.Sprintf("%s_n%d_%s%s", strings.ReplaceAll(setName, " ", "_"), version, orderName(order), ext)
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						extensionRoundTrip(t, extensionCase{name, ext, version, order, exts})
					})
				}
			}
		}
	}
}

// extensionCase is one file of TestExtensionRoundTrip: an int16 5x4x3 volume.
type extensionCase struct {
	name, ext string
	version   int
	order     binary.ByteOrder
	exts      []Extension
}

const extNX, extNY, extNZ = 5, 4, 3

// extensionRoundTrip writes c, checks its extensions on disk, reads it back (Open and
// ReadHeader), and checks that writing the header as read gives the same header bytes.
func extensionRoundTrip(t *testing.T, c extensionCase) {
	dir := t.TempDir()
	path := filepath.Join(dir, c.name)
	h := testHeader(Int16, c.version, c.order, extNX, extNY, extNZ)
	h.Extensions = c.exts
	data := formulaData(Int16, extNX, extNY, extNZ, 1)
	if err := Write(path, h, data, DefaultWriteOptions()); err != nil {
		t.Fatal(err)
	}
	onDisk, area := checkExtensionsOnDisk(t, path, c, len(data))
	wantVoxOffset := int64(headerSize(c.version) + 4 + area)
	if !strings.HasPrefix(c.ext, ".nii") {
		wantVoxOffset = 0 // a pair's data starts its own file
	}
	rh := checkExtensionsReadBack(t, path, c, data, wantVoxOffset, int64(area))

	// Extensions as read are whole blocks already: written again, the header bytes are the
	// same.
	again := filepath.Join(dir, "again"+c.ext)
	if err := Write(again, rh, data, DefaultWriteOptions()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(plainBytes(t, headerFileOf(again)), onDisk) {
		t.Errorf("writing the header as read gives other bytes")
	}
}

// headerFileOf is the file holding the header of the volume written at path.
func headerFileOf(path string) string {
	hdr := namesOf(path).headers[0]
	if _, err := os.Stat(hdr); err != nil {
		hdr = namesOf(path).headers[1]
	}
	return hdr
}

// checkExtensionsOnDisk checks the size of the header file of c, written at path with
// dataLen bytes of voxels, and the extensions it holds; it returns the header file's bytes
// (inflated) and the size of the extension area.
func checkExtensionsOnDisk(t *testing.T, path string, c extensionCase, dataLen int) ([]byte, int) {
	t.Helper()
	onDisk := plainBytes(t, headerFileOf(path))
	hsize := headerSize(c.version)
	var area int
	for _, e := range c.exts {
		area += (8 + len(e.Data) + 15) / 16 * 16
	}
	if !strings.HasPrefix(c.ext, ".nii") {
		if len(onDisk) != hsize+4+area {
			t.Fatalf(".hdr is %d bytes, want %d", len(onDisk), hsize+4+area)
		}
	} else if len(onDisk) != hsize+4+area+dataLen {
		t.Fatalf("file is %d bytes, want %d", len(onDisk), hsize+4+area+dataLen)
	}
	found := walkDisk(t, onDisk, hsize, hsize+4+area, c.order)
	if len(found) != len(c.exts) {
		t.Fatalf("%d extensions on disk, want %d", len(found), len(c.exts))
	}
	for i, e := range c.exts {
		if found[i].code != e.Code || !bytes.Equal(found[i].edata, padded(e.Data)) {
			t.Errorf("extension %d on disk: code %d edata %q, want %d %q", i, found[i].code, found[i].edata, e.Code, padded(e.Data))
		}
	}
	return onDisk, area
}

// checkExtensionsReadBack reads c back from path with Open and ReadHeader: the extensions,
// vox_offset, extension length and voxels. It returns ReadHeader's header.
func checkExtensionsReadBack(t *testing.T, path string, c extensionCase, data []byte, wantVoxOffset, area int64) *Header {
	t.Helper()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := r.Header()
	if got.VoxOffset != wantVoxOffset || got.ExtensionLen != area {
		t.Errorf("vox_offset %d ExtensionLen %d, want %d %d", got.VoxOffset, got.ExtensionLen, wantVoxOffset, area)
	}
	checkExtensionsRead(t, "Open", got.Extensions, c.exts)
	raw := make([]byte, len(data))
	if k, err := r.ReadSlicesRaw(raw, extNZ); k != extNZ || err != nil {
		t.Fatalf("ReadSlicesRaw: %d, %v", k, err)
	}
	if !bytes.Equal(raw, data) {
		t.Errorf("voxels differ after the round trip")
	}
	rh, err := ReadHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	checkExtensionsRead(t, "ReadHeader", rh.Extensions, c.exts)
	if rh.VoxOffset != wantVoxOffset || rh.ExtensionLen != area {
		t.Errorf("ReadHeader: vox_offset %d ExtensionLen %d, want %d %d", rh.VoxOffset, rh.ExtensionLen, wantVoxOffset, area)
	}
	return rh
}

// checkExtensionsRead compares extensions as read with those written: same codes, Data the
// written data plus its zero padding, Text the written text.
func checkExtensionsRead(t *testing.T, what string, got, wrote []Extension) {
	t.Helper()
	if len(got) != len(wrote) {
		t.Fatalf("%s: %d extensions, want %d", what, len(got), len(wrote))
	}
	for i, e := range wrote {
		if got[i].Code != e.Code || !bytes.Equal(got[i].Data, padded(e.Data)) {
			t.Errorf("%s: extension %d = %d %q, want %d %q", what, i, got[i].Code, got[i].Data, e.Code, padded(e.Data))
		}
		if want := string(bytes.TrimRight(e.Data, "\x00")); got[i].Text() != want {
			t.Errorf("%s: extension %d Text %q, want %q", what, i, got[i].Text(), want)
		}
	}
}

func TestExtensionText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ data, want string }{
		{"", ""},
		{"\x00\x00\x00", ""},
		{"plain", "plain"},
		{"padded\x00\x00\x00\x00\x00", "padded"},
		{"in\x00side\x00", "in\x00side"},
		{"\x00lead", "\x00lead"},
	} {
		if got := (Extension{Code: ExtCodeComment, Data: []byte(c.data)}).Text(); got != c.want {
			t.Errorf("Text of %q = %q, want %q", c.data, got, c.want)
		}
	}
}

// TestHeaderCopiesExtensions: the Header a Reader hands out shares no memory with the next.
func TestHeaderCopiesExtensions(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.nii")
	h := testHeader(Uint8, 1, binary.LittleEndian, 2, 2, 2)
	h.Extensions = []Extension{{Code: ExtCodeComment, Data: []byte("keep me")}}
	if err := Write(path, h, make([]byte, 8), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	first := r.Header()
	first.Extensions[0].Data[0] = 'X'
	first.Extensions[0].Code = 99
	if second := r.Header(); second.Extensions[0].Code != ExtCodeComment || second.Extensions[0].Text() != "keep me" {
		t.Errorf("changing one Header's extensions changed the next: %+v", second.Extensions)
	}
}

// TestWriteWithoutExtensionsUnchanged: without extensions (nil or empty) the writer produces
// the bytes it produced before extensions existed: the committed fuzz seeds voxpipe_mask_* were
// written by it (TestFuzzSeedCorpus), and the extender is zero with vox_offset 352 or 544.
func TestWriteWithoutExtensionsUnchanged(t *testing.T) {
	for _, version := range []int{1, 2} {
		for _, order := range byteOrders {
			for _, ext := range []string{".nii", ".nii.gz"} {
				name := fmt.Sprintf("voxpipe_mask_n%d_%s%s", version, orderName(order), ext)
				t.Run(name, func(t *testing.T) {
					seed := seedFileBytes(t, filepath.Join("testdata/fuzz/FuzzReadSlabs", name))
					mem := memFiles{name: seed}
					s, err := openSource(name, mem.open)
					if err != nil {
						t.Fatal(err)
					}
					want, err := io.ReadAll(s)
					s.Close()
					if err != nil {
						t.Fatal(err)
					}
					labels := make([]byte, 7*6*5)
					for i := range labels {
						labels[i] = byte(i % 5)
					}
					for _, exts := range [][]Extension{nil, {}} {
						h := MaskHeader(testHeader(Float32, version, order, 7, 6, 5), 4, "fuzz seed")
						h.Extensions = exts
						path := filepath.Join(t.TempDir(), name)
						if err := Write(path, h, labels, DefaultWriteOptions()); err != nil {
							t.Fatal(err)
						}
						got := plainBytes(t, path)
						if !bytes.Equal(got, want) {
							t.Errorf("Extensions %#v: bytes differ from the committed seed", exts)
						}
						hsize := headerSize(version)
						if !bytes.Equal(got[hsize:hsize+4], []byte{0, 0, 0, 0}) {
							t.Errorf("extender % x, want zeros", got[hsize:hsize+4])
						}
						rh, err := ReadHeader(path)
						if err != nil {
							t.Fatal(err)
						}
						if rh.Extensions != nil || rh.ExtensionLen != 0 || rh.VoxOffset != int64(hsize+4) {
							t.Errorf("read back: Extensions %v ExtensionLen %d vox_offset %d", rh.Extensions, rh.ExtensionLen, rh.VoxOffset)
						}
					}
				})
			}
		}
	}
}

// seedFileBytes returns the []byte value of a "go test fuzz v1" corpus file.
func seedFileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") {
		t.Fatalf("%s: not a fuzz corpus file", path)
	}
	v, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(v)
}

// TestMaskHeaderDropsExtensions: a mask does not inherit its image's extensions.
func TestMaskHeaderDropsExtensions(t *testing.T) {
	t.Parallel()
	ref := testHeader(Int16, 1, binary.LittleEndian, 4, 4, 4)
	ref.Extensions = []Extension{{Code: ExtCodeDICOM, Data: []byte("patient data")}}
	if m := MaskHeader(ref, 2, "m"); m.Extensions != nil {
		t.Errorf("mask extensions %v, want none", m.Extensions)
	}
	if len(ref.Extensions) != 1 {
		t.Errorf("MaskHeader modified its argument")
	}
}

func TestWriteRefusesTooManyExtensionBytes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "big.nii")
	h := testHeader(Uint8, 1, binary.LittleEndian, 2, 2, 2)
	// 16 MiB exactly (two esizes of 8 MiB) is allowed; 16 bytes more is not.
	half := make([]byte, 8<<20-8)
	h.Extensions = []Extension{{Code: 40, Data: half}, {Code: 40, Data: half}}
	if err := Write(path, h, make([]byte, 8), WriteOptions{}); err != nil {
		t.Fatalf("16 MiB of extensions: %v", err)
	}
	rh, err := ReadHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rh.Extensions) != 2 || rh.VoxOffset != 352+16<<20 {
		t.Errorf("read %d extensions, vox_offset %d", len(rh.Extensions), rh.VoxOffset)
	}
	h.Extensions = append(h.Extensions, Extension{Code: ExtCodeComment})
	if err := Write(path+".2.nii", h, make([]byte, 8), WriteOptions{}); err == nil {
		t.Errorf("16 MiB + 16 bytes of extensions written")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 1 {
		t.Errorf("files left: %v", m)
	}
}

// TestNibabelFixtureExtensions reads the comment extensions nibabel wrote into the committed
// fixtures (make_fixtures.py); nibabel padded them to 16 bytes.
func TestNibabelFixtureExtensions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file, text string
		esize      int
	}{
		{"int16_n1_le_ext.nii", strings.Repeat("voxpipe test extension ", 5), 128},
		{"int16_n2_be_ext.nii.gz", "another extension", 32},
	} {
		path := filepath.Join("testdata/interop", c.file)
		for _, read := range []struct {
			name string
			f    func(string) (*Header, error)
		}{{"ReadHeader", ReadHeader}, {"ReadFloat32", func(p string) (*Header, error) {
			h, _, err := ReadFloat32(p)
			return h, err
		}}} {
			h, err := read.f(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Extensions) != 1 {
				t.Fatalf("%s %s: %d extensions, want 1", read.name, c.file, len(h.Extensions))
			}
			e := h.Extensions[0]
			if e.Code != ExtCodeComment || e.Text() != c.text || len(e.Data) != c.esize-8 {
				t.Errorf("%s %s: code %d text %q, %d bytes of edata; want %d %q %d", read.name, c.file, e.Code, e.Text(), len(e.Data), ExtCodeComment, c.text, c.esize-8)
			}
			if h.ExtensionLen != int64(c.esize) {
				t.Errorf("%s %s: ExtensionLen %d, want %d", read.name, c.file, h.ExtensionLen, c.esize)
			}
		}
	}
}
