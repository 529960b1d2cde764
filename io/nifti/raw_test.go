package nifti

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestReadHeaderRawBrokenFiles: of files that fail validation, ReadHeaderRaw returns the
// fields as written together with exactly ReadHeader's error, without allocating by the
// header's values.
func TestReadHeaderRawBrokenFiles(t *testing.T) {
	for _, c := range brokenRawCases(t) {
		t.Run(c.name, func(t *testing.T) { checkBrokenRaw(t, c) })
	}
}

// brokenRawCase is a damaged file, the sentinel ReadHeaderRaw fails with, and a check of
// what it still read.
type brokenRawCase struct {
	name     string
	file     string
	data     []byte
	version  int
	sentinel error
	check    func(t *testing.T, raw *RawHeader)
}

func brokenRawCases(t *testing.T) []brokenRawCase {
	n1 := validFile(t, 1, binary.LittleEndian)
	n2 := validFile(t, 2, binary.BigEndian)
	setDim2BE := func(b []byte, i int, v int64) { binary.BigEndian.PutUint64(b[16+8*i:], uint64(v)) }
	return []brokenRawCase{
		{"complex64", "a.nii", clone(n1, func(b []byte) { setDatatype1(b, 32) }), 1, ErrUnsupportedDatatype, func(t *testing.T, raw *RawHeader) {
			if raw.Datatype != 32 || raw.Datatype.String() != "complex64" {
				t.Errorf("datatype %v", raw.Datatype)
			}
		}},
		{"negative dim", "a.nii", clone(n1, func(b []byte) { setDim1(b, 3, -4) }), 1, ErrCorrupt, func(t *testing.T, raw *RawHeader) {
			if raw.Dim != [8]int64{3, 6, 5, -4, 1, 1, 1, 1} {
				t.Errorf("dim %v", raw.Dim)
			}
		}},
		{"vox_offset past end", "a.nii", clone(n1, func(b []byte) { setVoxOffset1(b, 1e6) }), 1, ErrCorrupt, func(t *testing.T, raw *RawHeader) {
			if raw.StoredVoxOffset != 1e6 || raw.VoxOffset != 1e6 {
				t.Errorf("vox_offset %v / %d", raw.StoredVoxOffset, raw.VoxOffset)
			}
		}},
		{"vox_offset fractional", "a.nii", clone(n1, func(b []byte) { setVoxOffset1(b, 352.5) }), 1, ErrCorrupt, func(t *testing.T, raw *RawHeader) {
			if raw.StoredVoxOffset != 352.5 || raw.VoxOffset != 0 {
				t.Errorf("vox_offset %v / %d", raw.StoredVoxOffset, raw.VoxOffset)
			}
		}},
		{"bad magic", "a.nii", clone(n1, func(b []byte) { copy(b[344:], "xyz\x00") }), 1, ErrNotNIfTI, func(t *testing.T, raw *RawHeader) {
			if raw.Magic != "xyz" {
				t.Errorf("magic %q", raw.Magic)
			}
		}},
		{"data cut", "a.nii", n1[:352+100], 1, ErrTruncated, nil},
		{"header cut", "a.nii", n1[:200], 1, ErrTruncated, func(t *testing.T, raw *RawHeader) {
			if raw.Read != 200 || !raw.Has("vox_offset") || raw.Has("descrip") || raw.Has("sform_code") || raw.Has("magic") {
				t.Errorf("read %d, has vox_offset %v descrip %v", raw.Read, raw.Has("vox_offset"), raw.Has("descrip"))
			}
			if raw.Descrip != "" || raw.SformCode != 0 {
				t.Errorf("fields past the cut: %q %d", raw.Descrip, raw.SformCode)
			}
		}},
		{"gz header cut", "a.nii.gz", gzipBytes(t, n1[:200]), 1, ErrTruncated, func(t *testing.T, raw *RawHeader) {
			if !raw.Gzipped || raw.Read != 200 {
				t.Errorf("gzipped %v, read %d", raw.Gzipped, raw.Read)
			}
		}},
		{"NIfTI-2 2^40 voxels", "a.nii", clone(n2, func(b []byte) {
			setDim2BE(b, 1, 1<<20)
			setDim2BE(b, 2, 1<<20)
		}), 2, ErrTooLarge, func(t *testing.T, raw *RawHeader) {
			if raw.Dim[1] != 1<<20 || raw.ByteOrder != binary.BigEndian {
				t.Errorf("dim %v, order %v", raw.Dim, raw.ByteOrder)
			}
		}},
		{"NIfTI-2 text-mode damage", "a.nii", clone(n2, func(b []byte) { b[8] = '\n' }), 2, ErrCorrupt, nil},
	}
}

// checkBrokenRaw: ReadHeaderRaw fails on c's file as ReadHeader does, with a RawHeader of
// what it read (the fields the damage leaves alone as testHeader wrote them), allocating at
// most 1 MiB.
func checkBrokenRaw(t *testing.T, c brokenRawCase) {
	path := filepath.Join(t.TempDir(), c.file)
	if err := os.WriteFile(path, c.data, 0o644); err != nil {
		t.Fatal(err)
	}
	var raw *RawHeader
	var err error
	alloc := allocatedDuring(func() { raw, err = ReadHeaderRaw(path) })
	_, want := ReadHeader(path)
	wantErr(t, err, c.sentinel, path)
	if want == nil || err.Error() != want.Error() {
		t.Errorf("ReadHeaderRaw: %v\nReadHeader:    %v", err, want)
	}
	if raw == nil {
		t.Fatal("no RawHeader")
	}
	if raw.Version != c.version || raw.FileSize != int64(len(c.data)) {
		t.Errorf("version %d, file size %d", raw.Version, raw.FileSize)
	}
	// Fields the damage leaves alone are as testHeader wrote them.
	if raw.Descrip != "voxpipe test" && raw.Has("descrip") {
		t.Errorf("descrip %q", raw.Descrip)
	}
	if raw.PixDim[1] != 0.9375 || raw.SformCode != 2 && raw.Has("sform_code") || raw.SrowX[3] != -101 && raw.Has("srow_x") {
		t.Errorf("pixdim %v, sform %d %v", raw.PixDim, raw.SformCode, raw.SrowX)
	}
	if c.check != nil {
		c.check(t, raw)
	}
	if alloc > 1<<20 {
		t.Errorf("%d KiB allocated", alloc>>10)
	}
}

// TestReadHeaderRawValid: of a valid file ReadHeaderRaw gives ReadHeader's header, extensions
// included, and no error.
func TestReadHeaderRawValid(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.nii.gz")
	h := testHeader(Int16, 2, binary.BigEndian, 4, 3, 2, 2)
	h.Extensions = []Extension{{Code: ExtCodeComment, Data: []byte("hello")}}
	if err := Write(path, h, formulaData(Int16, 4, 3, 2, 2), DefaultWriteOptions()); err != nil {
		t.Fatal(err)
	}
	raw, err := ReadHeaderRaw(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ReadHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	if !headersIdentical(&raw.Header, want) || raw.Read != sizeofHdr2 || !raw.Gzipped || raw.StoredVoxOffset != float64(want.VoxOffset) {
		t.Errorf("raw %+v\nwant %+v", raw, want)
	}
	if len(raw.Extensions) != 1 || raw.Extensions[0].Text() != "hello" {
		t.Errorf("extensions %+v", raw.Extensions)
	}
	if _, err := ReadHeaderRaw(filepath.Join(t.TempDir(), "missing.nii")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestRawHeaderFieldTable: every field Has knows lies where decodeFields reads it: changing
// the field's bytes changes the decoded header, and a header cut one byte short of the field's
// end does not have it.
func TestRawHeaderFieldTable(t *testing.T) {
	t.Parallel()
	for _, version := range []int{1, 2} {
		size := headerSize(version)
		b := validFile(t, version, binary.LittleEndian)[:size]
		base, _ := decodeFields(b, version, binary.LittleEndian)
		spans := map[int]map[string][2]int{1: fields1, 2: fields2}[version]
		var names []string
		for name := range spans {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			span := spans[name]
			if span[0]+span[1] > size {
				t.Errorf("NIfTI-%d %s: %v past the header", version, name, span)
			}
			raw := RawHeader{Header: Header{Version: version}, Read: span[0] + span[1]}
			if !raw.Has(name) {
				t.Errorf("NIfTI-%d %s: not had with %d bytes read", version, name, raw.Read)
			}
			if raw.Read--; raw.Has(name) {
				t.Errorf("NIfTI-%d %s: had with %d bytes read", version, name, raw.Read)
			}
			if name == "sizeof_hdr" {
				continue
			}
			changed := clone(b, func(c []byte) {
				for i := span[0]; i < span[0]+span[1]; i++ {
					c[i] ^= 0x5a
				}
			})
			h, _ := decodeFields(changed, version, binary.LittleEndian)
			if headersIdentical(h, base) && h.VoxOffset == base.VoxOffset {
				t.Errorf("NIfTI-%d %s: bytes %v are not what decodeFields reads", version, name, span)
			}
		}
		if (&RawHeader{Header: Header{Version: version}, Read: size}).Has("no_such_field") {
			t.Error("Has of an unknown field")
		}
	}
	if (&RawHeader{Read: 540}).Has("dim") {
		t.Error("Has without a version")
	}
}

// TestShortFileMessages: a file or gzip stream ending early is described as it is: the bytes
// read or inflated, whether the gzip stream is cut or whole, and what a header needs.
func TestShortFileMessages(t *testing.T) {
	t.Parallel()
	n1 := validFile(t, 1, binary.LittleEndian)
	n1gz := gzipBytes(t, n1)
	// A volume with 64 KiB of incompressible extension: its gzip stream cut in the middle ends
	// after the header, before vox_offset.
	rnd := rand.New(rand.NewPCG(1, 2))
	ext := make([]byte, 64<<10)
	for i := range ext {
		ext[i] = byte(rnd.Uint32())
	}
	extPath := filepath.Join(t.TempDir(), "ext.nii.gz")
	h := testHeader(Int16, 1, binary.LittleEndian, 6, 5, 4)
	h.Extensions = []Extension{{Code: 40, Data: ext}}
	if err := Write(extPath, h, formulaData(Int16, 6, 5, 4, 1), WriteOptions{Level: 1}); err != nil {
		t.Fatal(err)
	}
	extGz, _ := os.ReadFile(extPath)
	cases := []struct {
		name     string
		file     string
		data     []byte
		sentinel error
		want     []string
		not      string
	}{
		{"empty", "a.nii", nil, ErrNotNIfTI, []string{"empty file (0 bytes)"}, ""},
		{"2 bytes of sizeof_hdr", "a.nii", n1[:2], ErrTruncated, []string{": 2 bytes, a NIfTI header needs 348 (NIfTI-1) or 540 (NIfTI-2)"}, ""},
		{"3 junk bytes", "a.nii", []byte{1, 2, 3}, ErrNotNIfTI, []string{"3 bytes, too short for a NIfTI header and not the start of one"}, ""},
		{"header cut", "a.nii", n1[:200], ErrTruncated, []string{"truncated data: 200 bytes, a NIfTI-1 header needs 348"}, ""},
		{"gz empty", "a.nii.gz", gzipBytes(t, nil), ErrNotNIfTI, []string{"gzip file inflates to 0 bytes"}, ""},
		{"gz of a cut header", "a.nii.gz", gzipBytes(t, n1[:200]), ErrTruncated, []string{"gzip file inflates to 200 bytes, a NIfTI-1 header needs 348"}, "ends early"},
		{"gz cut in its gzip header", "a.nii.gz", n1gz[:5], ErrTruncated, []string{"the 5-byte file ends inside its gzip header"}, ""},
		{"gz cut at 40 bytes", "a.nii.gz", n1gz[:40], ErrTruncated, []string{"the gzip stream ends early (the 40-byte file is cut short), after ", " inflated bytes; a NIfTI"}, "not a NIfTI file"},
		{"gz cut before vox_offset", "a.nii.gz", extGz[:len(extGz)/2], ErrTruncated, []string{"the gzip stream ends early", fmt.Sprintf("before vox_offset %d", dataStart1+(8+len(ext)+15)&^15)}, ""},
		{"gz cut in the data", "a.nii.gz", n1gz[:len(n1gz)-20], ErrTruncated, []string{"the data ends inside z-slice", "the gzip stream ends early"}, ""},
		{"gz of cut data", "a.nii.gz", gzipBytes(t, n1[:352+70]), ErrTruncated, []string{"the data ends inside z-slice 1 of 4 (70 of 240 bytes)"}, "ends early"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), c.file)
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := ReadFloat32(path)
			wantErr(t, err, c.sentinel, path)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if c.not != "" && strings.Contains(err.Error(), c.not) {
				t.Errorf("error %q says %q", err, c.not)
			}
		})
	}
}

// TestGzipCutMessageCountsInflatedBytes: the count in the message is what the stream gave.
func TestGzipCutMessageCountsInflatedBytes(t *testing.T) {
	t.Parallel()
	n1gz := gzipBytes(t, validFile(t, 1, binary.LittleEndian))
	partial := 0 // cuts that leave part of the header inflated
	defer func() {
		if partial == 0 {
			t.Error("no cut left part of the header inflated: the test checks nothing")
		}
	}()
	for cut := 11; cut < len(n1gz); cut++ {
		path := filepath.Join(t.TempDir(), "a.nii.gz")
		os.WriteFile(path, n1gz[:cut], 0o644)
		s, err := openSource(path, osOpen)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, sizeofHdr1)
		n, _ := readFullRaw(s, buf)
		s.Close()
		_, err = ReadHeader(path)
		if n >= sizeofHdr1 {
			break
		}
		if n > 0 {
			partial++
		}
		want := fmt.Sprintf("file is cut short), after %d inflated bytes", n)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("cut at %d: %v, want %q", cut, err, want)
		}
	}
}
