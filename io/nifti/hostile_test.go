package nifti

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
)

// validFile returns the bytes of a small, valid single-file NIfTI (int16 6x5x4).
func validFile(t testing.TB, version int, order binary.ByteOrder) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "valid.nii")
	h := testHeader(Int16, version, order, 6, 5, 4)
	if err := Write(path, h, formulaData(Int16, 6, 5, 4, 1), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	z.Write(b)
	z.Close()
	return buf.Bytes()
}

// Field offsets used to damage headers: NIfTI-1 and NIfTI-2 little-endian.
func setDim1(b []byte, i int, v int16)      { binary.LittleEndian.PutUint16(b[40+2*i:], uint16(v)) }
func setDim2(b []byte, i int, v int64)      { binary.LittleEndian.PutUint64(b[16+8*i:], uint64(v)) }
func setVoxOffset1(b []byte, v float32)     { binary.LittleEndian.PutUint32(b[108:], math.Float32bits(v)) }
func setVoxOffset2(b []byte, v int64)       { binary.LittleEndian.PutUint64(b[168:], uint64(v)) }
func setDatatype1(b []byte, v int16)        { binary.LittleEndian.PutUint16(b[70:], uint16(v)) }
func setDatatype2(b []byte, v int16)        { binary.LittleEndian.PutUint16(b[12:], uint16(v)) }
func clone(b []byte, f func([]byte)) []byte { c := bytes.Clone(b); f(c); return c }

// TestHostileFiles: every class of broken file gets the right sentinel, an error naming the
// file, and no allocation sized by the header.
func TestHostileFiles(t *testing.T) {
	n1 := validFile(t, 1, binary.LittleEndian)
	n2 := validFile(t, 2, binary.LittleEndian)
	cases := append(hostileHeaders(t, n1, n2), hostileData(t, n1)...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkHostile(t, c) })
	}
}

// hostileCase is a damaged file and how opening and reading it must fail.
type hostileCase struct {
	name     string
	file     string // extension decides the layout
	data     []byte
	sentinel error
	atRead   bool   // the error comes from reading the data, not from Open
	mention  string // part of the message
}

// hostileHeaders are files whose header is damaged or lies (n1, n2: valid NIfTI-1 and -2).
func hostileHeaders(t *testing.T, n1, n2 []byte) []hostileCase {
	return []hostileCase{
		{"empty", "a.nii", nil, ErrNotNIfTI, false, "empty"},
		{"three bytes", "a.nii", []byte{1, 2, 3}, ErrNotNIfTI, false, ""},
		{"text file", "a.nii", []byte(strings.Repeat("not a nifti file\n", 30)), ErrNotNIfTI, false, "sizeof_hdr"},
		{"bad magic", "a.nii", clone(n1, func(b []byte) { copy(b[344:], "xyz\x00") }), ErrNotNIfTI, false, "magic"},
		{"analyze 7.5", "a.nii", clone(n1, func(b []byte) { copy(b[344:], "\x00\x00\x00\x00") }), ErrNotNIfTI, false, "Analyze"},
		{"NIfTI-2 bad magic", "a.nii", clone(n2, func(b []byte) { copy(b[4:], "n+3\x00") }), ErrNotNIfTI, false, "magic"},
		{"NIfTI-2 text-mode damage", "a.nii", clone(n2, func(b []byte) { b[8] = '\n' }), ErrCorrupt, false, "text-mode"},
		{"pair magic in .nii", "a.nii", clone(n1, func(b []byte) { b[345] = 'i' }), ErrCorrupt, false, "pair"},
		{"header cut", "a.nii", n1[:200], ErrTruncated, false, "header"},
		{"gz header cut", "a.nii.gz", gzipBytes(t, n1[:200]), ErrTruncated, false, "header"},
		{"dim[0] = 0", "a.nii", clone(n1, func(b []byte) { setDim1(b, 0, 0) }), ErrCorrupt, false, "dim[0]"},
		{"dim[0] = 9", "a.nii", clone(n1, func(b []byte) { setDim1(b, 0, 9) }), ErrCorrupt, false, "dim[0]"},
		{"dim[2] = 0", "a.nii", clone(n1, func(b []byte) { setDim1(b, 2, 0) }), ErrCorrupt, false, "dim[2]"},
		{"dim[3] < 0", "a.nii", clone(n1, func(b []byte) { setDim1(b, 3, -4) }), ErrCorrupt, false, "dim[3]"},
		{"NIfTI-2 dim > MaxDim", "a.nii", clone(n2, func(b []byte) { setDim2(b, 1, MaxDim+1) }), ErrTooLarge, false, "dim[1]"},
		{"NIfTI-2 2^40 voxels", "a.nii", clone(n2, func(b []byte) {
			setDim2(b, 1, 1<<20)
			setDim2(b, 2, 1<<20)
			setDim2(b, 3, 1)
		}), ErrTooLarge, false, "voxels"},
		{"NIfTI-2 product overflows", "a.nii", clone(n2, func(b []byte) {
			setDim2(b, 0, 7)
			for i := 1; i <= 7; i++ {
				setDim2(b, i, MaxDim)
			}
		}), ErrTooLarge, false, "voxels"},
		{"NIfTI-1 2^33 voxels on a small file", "a.nii", clone(n1, func(b []byte) {
			setDim1(b, 1, 32767)
			setDim1(b, 2, 32767)
			setDim1(b, 3, 8)
		}), ErrTruncated, false, "z-slice 0"},
		{"gz claiming 2^33 voxels", "a.nii.gz", gzipBytes(t, clone(n1, func(b []byte) {
			setDim1(b, 1, 32767)
			setDim1(b, 2, 32767)
			setDim1(b, 3, 8)
		})), ErrTruncated, false, "gzip file can hold"},
		{"4D, 2^30 volumes", "a.nii", clone(n1, func(b []byte) {
			setDim1(b, 0, 7)
			for i := 4; i <= 7; i++ {
				setDim1(b, i, 181)
			}
		}), ErrMultiVolume, false, "--volume"},
		{"complex64", "a.nii", clone(n1, func(b []byte) { setDatatype1(b, 32) }), ErrUnsupportedDatatype, false, "complex64"},
		{"rgb24", "a.nii", clone(n1, func(b []byte) { setDatatype1(b, 128) }), ErrUnsupportedDatatype, false, "rgb24"},
		{"unknown datatype", "a.nii", clone(n2, func(b []byte) { setDatatype2(b, 9999) }), ErrUnsupportedDatatype, false, "9999"},
		{"vox_offset past end", "a.nii", clone(n1, func(b []byte) { setVoxOffset1(b, 1e6) }), ErrCorrupt, false, "past the end"},
		{"vox_offset in header", "a.nii", clone(n1, func(b []byte) { setVoxOffset1(b, 100) }), ErrCorrupt, false, "vox_offset"},
		{"vox_offset fractional", "a.nii", clone(n1, func(b []byte) { setVoxOffset1(b, 352.5) }), ErrCorrupt, false, "vox_offset"},
		{"vox_offset NaN", "a.nii", clone(n1, func(b []byte) { setVoxOffset1(b, float32(math.NaN())) }), ErrCorrupt, false, "vox_offset"},
		{"NIfTI-2 vox_offset < 0", "a.nii", clone(n2, func(b []byte) { setVoxOffset2(b, -8) }), ErrCorrupt, false, "vox_offset"},
		{"gz vox_offset past end", "a.nii.gz", gzipBytes(t, clone(n1, func(b []byte) { setVoxOffset1(b, 4096) })), ErrCorrupt, false, "vox_offset"},
	}
}

// hostileData are files whose data or compressed stream is cut short or damaged.
func hostileData(t *testing.T, n1 []byte) []hostileCase {
	n1gz := gzipBytes(t, n1)
	// The valid file's data is 6*5*4 int16 = 240 bytes after 352 bytes of header and flag; a
	// file cut at 352+60*3+10 ends inside z-slice 3.
	cutInSlice3 := n1[:352+60*3+10]

	corruptDeflate := bytes.Clone(gzipBytes(t, validFile(t, 1, binary.BigEndian)))
	for i := 20; i < len(corruptDeflate)-8; i += 7 {
		corruptDeflate[i] ^= 0x5a
	}
	badCRC := bytes.Clone(n1gz)
	badCRC[len(badCRC)-8] ^= 0xff

	return []hostileCase{
		{"data cut in slice 3", "a.nii", cutInSlice3, ErrTruncated, false, "z-slice 3 of 4"},
		{"gz data cut in slice 3", "a.nii.gz", gzipBytes(t, cutInSlice3), ErrTruncated, true, "z-slice 3 of 4"},
		{"gz stream cut", "a.nii.gz", n1gz[:len(n1gz)-30], ErrTruncated, true, "z-slice"},
		{"gz bad header", "a.nii.gz", append([]byte{0x1f, 0x8b, 99}, n1...), ErrCorrupt, false, "gzip"},
		{"gz deflate damaged", "a.nii.gz", corruptDeflate, ErrCorrupt, false, "gzip"},
		{"gz checksum", "a.nii.gz", badCRC, ErrCorrupt, true, "checksum"},
	}
}

// checkHostile opens and reads c's file: it fails with c's sentinel and mention, at Open or
// at the read as c says, allocating at most 16 MiB within a second of CPU time.
func checkHostile(t *testing.T, c hostileCase) {
	path := filepath.Join(t.TempDir(), c.file)
	if err := os.WriteFile(path, c.data, 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	start := processCPU()
	alloc := allocatedDuring(func() {
		var r *Reader
		r, err = Open(path)
		if err != nil {
			if c.atRead {
				t.Errorf("Open failed (%v), want the error from reading", err)
			}
			return
		}
		defer r.Close()
		_, _, err = ReadFloat32(path)
	})
	if c.name == "gz deflate damaged" && errors.Is(err, ErrTruncated) {
		err = errors.Join(err, ErrCorrupt) // damage may also read as a stream cut short
	}
	wantErr(t, err, c.sentinel, path)
	if !strings.Contains(err.Error(), c.mention) {
		t.Errorf("error %q does not mention %q", err, c.mention)
	}
	if alloc > 16<<20 {
		t.Errorf("%d MiB allocated", alloc>>20)
	}
	// Within a second of CPU time (the wall clock counts the neighbours on a shared machine).
	if d := processCPU() - start; d > time.Second {
		t.Errorf("took %v of CPU", d)
	}
}

// allocatedDuring returns the bytes allocated while f ran (other goroutines of the test binary
// are idle here).
func allocatedDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestMissingPartner(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "p.hdr")
	h := testHeader(Int16, 1, binary.LittleEndian, 2, 2, 2)
	if err := Write(path, h, make([]byte, 16), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "p.img"))
	_, err := Open(path)
	wantErr(t, err, os.ErrNotExist, "p.img")
	_, err = Open(filepath.Join(dir, "q.img"))
	wantErr(t, err, os.ErrNotExist, "q.hdr")
}

// Open's errors name the path it was given once, and the file at fault when that is the pair's
// other file.
func TestOpenErrorNamesThePath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.nii")
	if err := os.WriteFile(bad, []byte("not a NIfTI file at all, but long enough to have a header size"), 0o644); err != nil {
		t.Fatal(err)
	}
	hdr := filepath.Join(dir, "four.hdr")
	h := testHeader(Int16, 1, binary.LittleEndian, 2, 2, 2)
	h.Dim[0], h.Dim[4] = 4, 2
	if err := Write(hdr, h, make([]byte, 32), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path     string
		sentinel error
		named    []string // each once
	}{
		{filepath.Join(dir, "none.nii"), os.ErrNotExist, []string{"none.nii"}},
		{bad, ErrNotNIfTI, []string{"bad.nii"}},
		{hdr, ErrMultiVolume, []string{"four.hdr"}},
		{filepath.Join(dir, "four.img"), ErrMultiVolume, []string{"four.img", "four.hdr"}}, // the header is at fault
	} {
		_, err := Open(tc.path)
		if !errors.Is(err, tc.sentinel) {
			t.Errorf("Open(%s): %v, want %v", tc.path, err, tc.sentinel)
			continue
		}
		for _, name := range tc.named {
			if n := strings.Count(err.Error(), filepath.Join(dir, name)); n != 1 {
				t.Errorf("Open(%s): %q names %s %d times, want once", tc.path, err, name, n)
			}
		}
	}
}

// TestSliceErrorIsSticky: after a truncation error every read repeats it.
func TestSliceErrorIsSticky(t *testing.T) {
	t.Parallel()
	n1 := validFile(t, 1, binary.LittleEndian)
	path := filepath.Join(t.TempDir(), "cut.nii.gz")
	os.WriteFile(path, gzipBytes(t, n1[:352+60*2+1]), 0o644)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]int16, 30)
	for z := range 2 {
		if k, err := r.ReadSlicesInt16(buf, 1); k != 1 || err != nil {
			t.Fatalf("slice %d: %d, %v", z, k, err)
		}
	}
	_, err1 := r.ReadSlicesInt16(buf, 1)
	_, err2 := r.ReadSlicesInt16(buf, 1)
	wantErr(t, err1, ErrTruncated, path)
	if err2 == nil || err2.Error() != err1.Error() {
		t.Errorf("second read: %v, want %v", err2, err1)
	}
}

// TestNoGoroutineLeak: readers closed mid-stream or dropped, and aborted gzip writers, leave
// nothing running.
func TestNoGoroutineLeak(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.nii.gz")
	h := testHeader(Int16, 1, binary.LittleEndian, 128, 128, 60)
	data := formulaData(Int16, 128, 128, 60, 1)
	if err := Write(path, h, data, DefaultWriteOptions()); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	for range 10 {
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		r.ReadSlicesRaw(make([]byte, 128*128*2), 1)
		r.Close()
		w, err := Create(filepath.Join(dir, "b.nii.gz"), h, WriteOptions{Level: 1, Workers: 4})
		if err != nil {
			t.Fatal(err)
		}
		w.WriteSlices(data[:len(data)/2])
		w.Abort()
	}
	// A reader dropped without Close: its read-ahead (blocked: the file is larger than the
	// read-ahead buffers) ends once the Reader is collected.
	bigPath := filepath.Join(dir, "big.nii.gz")
	bigH := testHeader(Int16, 1, binary.LittleEndian, 256, 256, 64)
	if err := Write(bigPath, bigH, formulaData(Int16, 256, 256, 64, 1), DefaultWriteOptions()); err != nil {
		t.Fatal(err)
	}
	func() {
		r, err := Open(bigPath)
		if err != nil {
			t.Fatal(err)
		}
		r.ReadSlicesRaw(make([]byte, 128*128*2), 1)
	}()
	// Collections until the read-ahead has ended: its Reader's cleanup runs after one, and
	// the goroutine then needs a turn to exit. A bounded number of rounds, no clock.
	for i := 0; i < 1000 && runtime.NumGoroutine() > before; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines before, %d after", before, n)
	}
}
