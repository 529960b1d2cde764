package nifti

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func temporaries(t *testing.T, finals ...string) []string {
	t.Helper()
	var all []string
	for _, f := range finals {
		m, err := filepath.Glob(TempPattern(f))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, m...)
	}
	return all
}

// TestAtomicWrite: nothing appears under the final names before Commit; temporaries are named
// ".<final>.tmp-*"; an existing file is replaced only by a complete one.
func TestAtomicWrite(t *testing.T) {
	t.Parallel()
	for _, ext := range []string{".nii", ".nii.gz", ".hdr", ".img.gz"} {
		t.Run(ext, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "mask"+ext)
			l := namesOf(path)
			c := atomicCase{path: path, finals: []string{path}, h: testHeader(Uint8, 1, binary.LittleEndian, 8, 8, 6)}
			if l.pair {
				c.finals = []string{l.headers[0], l.images[0]}
			}
			c.old = bytes.Repeat([]byte{1}, 8*8*6)
			if err := Write(path, c.h, c.old, DefaultWriteOptions()); err != nil {
				t.Fatal(err)
			}
			c.data = bytes.Repeat([]byte{2}, 8*8*6)
			atomicAbort(t, c)
			atomicShort(t, c)
			atomicRewrite(t, c)
		})
	}
}

// atomicCase is a file of TestAtomicWrite: its path and final files, holding old, and the
// data the rewrites write.
type atomicCase struct {
	path      string
	finals    []string
	h         *Header
	old, data []byte
}

// atomicAbort: an aborted rewrite leaves the old file and no temporaries (named
// .<final>.tmp-*), and the writer refuses more.
func atomicAbort(t *testing.T, c atomicCase) {
	// Aborted rewrite: the old file stays, the temporaries go.
	w, err := Create(c.path, c.h, DefaultWriteOptions())
	if err != nil {
		t.Fatal(err)
	}
	tmps := temporaries(t, c.finals...)
	if len(tmps) != len(c.finals) {
		t.Fatalf("temporaries %v, want one per file", tmps)
	}
	for _, tmp := range tmps {
		if !strings.HasPrefix(filepath.Base(tmp), ".mask.") || !strings.Contains(tmp, ".tmp-") {
			t.Errorf("temporary %s is not named .<final>.tmp-*", tmp)
		}
	}
	if err := w.WriteSlices(c.data[:8*8*3]); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if left := temporaries(t, c.finals...); len(left) != 0 {
		t.Errorf("Abort left %v", left)
	}
	if _, got, err := ReadUint8(c.path); err != nil || !bytes.Equal(got, c.old) {
		t.Fatalf("after Abort the old file reads %v, %v", got[:4], err)
	}
	if err := w.WriteSlices(c.data); err == nil {
		t.Errorf("WriteSlices after Abort succeeded")
	}
	if err := w.Commit(); err == nil {
		t.Errorf("Commit after Abort succeeded")
	}
}

// atomicShort: a rewrite short of the declared dims fails at Commit and cleans up.
func atomicShort(t *testing.T, c atomicCase) {
	// Short write: Commit fails and cleans up.
	w, err := Create(c.path, c.h, DefaultWriteOptions())
	if err != nil {
		t.Fatal(err)
	}
	w.WriteSlices(c.data[:8*8*5])
	if err := w.Commit(); err == nil || !strings.Contains(err.Error(), "short: 5 of 6") {
		t.Errorf("short Commit: %v", err)
	}
	if left := temporaries(t, c.finals...); len(left) != 0 {
		t.Errorf("failed Commit left %v", left)
	}
}

// atomicRewrite: a complete rewrite in two calls commits (once; Abort after it is a no-op).
func atomicRewrite(t *testing.T, c atomicCase) {
	// Complete rewrite in two calls.
	w, err := Create(c.path, c.h, DefaultWriteOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteSlices(c.data[:8*8*2]); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteSlices(c.data[8*8*2:]); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteSlices(c.data[:8*8]); err == nil {
		t.Errorf("writing past the declared dims succeeded")
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Errorf("second Commit: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Errorf("Abort after Commit: %v", err)
	}
	if _, got, err := ReadUint8(c.path); err != nil || !bytes.Equal(got, c.data) {
		t.Fatalf("after Commit: %v", err)
	}
	for _, f := range c.finals {
		if !exists(f) {
			t.Errorf("%s missing after Commit", f)
		}
	}
}

func TestCreateRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := testHeader(Int16, 1, binary.LittleEndian, 4, 4, 4)
	big := testHeader(Int16, 1, binary.LittleEndian, 40000, 1, 1)
	long := testHeader(Int16, 2, binary.LittleEndian, 4, 4, 4)
	long.Descrip = strings.Repeat("x", 81)
	cplx := testHeader(Int16, 1, binary.LittleEndian, 4, 4, 4)
	cplx.Datatype = 32
	v3 := testHeader(Int16, 3, binary.LittleEndian, 4, 4, 4)
	zero := testHeader(Int16, 1, binary.LittleEndian, 4, 0, 4)
	cases := []struct {
		name, file string
		h          *Header
		opt        WriteOptions
		mention    string
		sentinel   error
	}{
		{"unknown extension", "a.mask", good, WriteOptions{}, "extension", nil},
		{"level 10", "a.nii.gz", good, WriteOptions{Level: 10}, "level", nil},
		{"level -2", "a.nii.gz", good, WriteOptions{Level: -2}, "level", nil},
		{"negative workers", "a.nii.gz", good, WriteOptions{Workers: -1}, "workers", nil},
		{"NIfTI-1 dim > int16", "a.nii", big, WriteOptions{}, "NIfTI-2", nil},
		{"descrip > 80 bytes", "a.nii", long, WriteOptions{}, "descrip", nil},
		{"complex datatype", "a.nii", cplx, WriteOptions{}, "complex64", ErrUnsupportedDatatype},
		{"version 3", "a.nii", v3, WriteOptions{}, "version 3", nil},
		{"zero dim", "a.nii", zero, WriteOptions{}, "dim[2]", ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.file)
			_, err := Create(path, c.h, c.opt)
			wantErr(t, err, c.sentinel, path)
			if !strings.Contains(err.Error(), c.mention) {
				t.Errorf("error %q does not mention %q", err, c.mention)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("files left: %v", entries)
			}
		})
	}
	path := filepath.Join(dir, "b.nii")
	if err := Write(path, good, make([]byte, 10), WriteOptions{}); err == nil || exists(path) {
		t.Errorf("Write with the wrong data length: %v", err)
	}
	w, _ := Create(path, good, WriteOptions{})
	if err := w.WriteSlices(make([]byte, 33)); err == nil {
		t.Errorf("partial slice accepted")
	}
	w.Abort()
}

// TestCompressionLevels: level 0 gives valid stored gzip, higher levels smaller files, and a
// plain .nii ignores the level.
func TestCompressionLevels(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := testHeader(Int16, 1, binary.LittleEndian, 64, 64, 16)
	data := formulaData(Int16, 64, 64, 16, 1)
	size := map[string]int64{}
	for _, c := range []struct {
		file  string
		level int
	}{{"l0.nii.gz", 0}, {"l1.nii.gz", 1}, {"l9.nii.gz", 9}, {"def.nii.gz", DefaultLevel}, {"plain.nii", 9}} {
		path := filepath.Join(dir, c.file)
		if err := Write(path, h, data, WriteOptions{Level: c.level, Workers: 3}); err != nil {
			t.Fatal(err)
		}
		if got := readAllRaw(t, path); !bytes.Equal(got, data) {
			t.Fatalf("%s: data differs", c.file)
		}
		st, _ := os.Stat(path)
		size[c.file] = st.Size()
	}
	raw := int64(len(data) + dataStart1)
	if size["plain.nii"] != raw || size["l0.nii.gz"] < raw || size["l1.nii.gz"] >= raw/2 || size["l9.nii.gz"] > size["l1.nii.gz"] {
		t.Errorf("sizes %v (raw %d)", size, raw)
	}
	if size["def.nii.gz"] != size["l1.nii.gz"] {
		t.Errorf("default level: %d bytes, level %d: %d", size["def.nii.gz"], defaultGzipLevel, size["l1.nii.gz"])
	}
}

type failingWriter struct{ after int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.after -= len(p); f.after < 0 {
		return 0, errors.New("disk full (simulated)")
	}
	return len(p), nil
}

// TestWriteErrorSurfaces: a failing disk under the gzip writer turns into an error from WriteSlices or
// Commit, the temporary goes, and no final file appears.
func TestWriteErrorSurfaces(t *testing.T) {
	t.Parallel()
	for _, ext := range []string{".nii", ".nii.gz"} {
		path := filepath.Join(t.TempDir(), "x"+ext)
		h := testHeader(Int16, 1, binary.LittleEndian, 256, 256, 8)
		w, err := Create(path, h, DefaultWriteOptions())
		if err != nil {
			t.Fatal(err)
		}
		w.bw.Reset(&failingWriter{after: 4 << 10})
		data := formulaData(Int16, 256, 256, 8, 1)
		werr := w.WriteSlices(data)
		cerr := w.Commit()
		if cerr == nil || (werr != nil && !strings.Contains(werr.Error(), "disk full")) || !strings.Contains(cerr.Error(), "disk full") {
			t.Errorf("%s: WriteSlices %v, Commit %v", ext, werr, cerr)
		}
		if exists(path) || len(temporaries(t, path)) != 0 {
			t.Errorf("%s: files left after a failed write", ext)
		}
	}
}

func TestTempPatternEscapesGlob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sub[1]*?.nii.gz")
	w, err := Create(path, testHeader(Uint8, 1, nil, 2, 2, 2), DefaultWriteOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if got := temporaries(t, path); len(got) != 1 {
		t.Errorf("TempPattern(%q) = %q matches %v", path, TempPattern(path), got)
	}
	if got := temporaries(t, filepath.Join(dir, "sub1.nii.gz")); len(got) != 0 {
		t.Errorf("pattern of another name matches %v", got)
	}
}
