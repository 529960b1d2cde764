package provenance

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"voxpipe/internal/testexec"
	"voxpipe/io/nifti"
)

func writeVol(t *testing.T, path string, nx, ny, nz int, ext []nifti.Extension) {
	t.Helper()
	h := &nifti.Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: nifti.Uint8, BitPix: 8,
		Dim: [8]int64{3, int64(nx), int64(ny), int64(nz), 1, 1, 1, 1}, PixDim: [8]float64{1, 1, 1, 1},
		SclSlope: 1, Magic: "n+1", Extensions: ext}
	data := make([]byte, nx*ny*nz)
	for i := range data {
		data[i] = byte(i % 3)
	}
	if err := nifti.Write(path, h, data, nifti.WriteOptions{Level: 1}); err != nil {
		t.Fatal(err)
	}
}

// Hash is the documented tree: xxh128sum of each piece, the digests' bytes concatenated, and
// xxh128sum of that; pieces span file boundaries (a pair's .hdr and .img).
func TestHashIsTheDocumentedTree(t *testing.T) { // not parallel: it sets hashPiece
	if _, err := exec.LookPath("xxh128sum"); err != nil {
		t.Skip("xxh128sum not installed (Debian package xxhash)")
	}
	xxh := func(p string) []byte {
		out, err := testexec.Cmd(t, "xxh128sum", p).Output()
		if err != nil {
			t.Fatal(err)
		}
		b, err := hex.DecodeString(strings.Fields(string(out))[0])
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	dir := t.TempDir()
	old := hashPiece
	defer func() { hashPiece = old }()
	hashPiece = 64 << 10
	a, b := make([]byte, 100<<10+7), make([]byte, 150<<10+3)
	for i := range a {
		a[i] = byte(i * 31)
	}
	for i := range b {
		b[i] = byte(i*17 + 5)
	}
	pa, pb := filepath.Join(dir, "a.hdr"), filepath.Join(dir, "a.img")
	os.WriteFile(pa, a, 0o644)
	os.WriteFile(pb, b, 0o644)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	for _, files := range [][]string{{pa, pb}, {pb}, {empty}, {pa, empty, pb}} {
		var all []byte
		for _, f := range files {
			c, _ := os.ReadFile(f)
			all = append(all, c...)
		}
		var digests []byte
		for off := 0; off < len(all) || off == 0; off += hashPiece {
			piece := filepath.Join(dir, "piece")
			os.WriteFile(piece, all[off:min(off+hashPiece, len(all))], 0o644)
			digests = append(digests, xxh(piece)...)
		}
		tree := filepath.Join(dir, "digests")
		os.WriteFile(tree, digests, 0o644)
		want := hex.EncodeToString(xxh(tree))
		got, err := Hash(context.Background(), files)
		if err != nil || got != want {
			t.Errorf("%v: Hash %s %v, the tree by xxh128sum %s", files, got, err, want)
		}
	}
}

func TestRecordRoundTripAndCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	input := filepath.Join(dir, "in.nii")
	writeVol(t, input, 8, 6, 4, nil)
	cur, files, err := Stat(input)
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := os.Stat(input)
	if cur.XXH3, err = Hash(context.Background(), files); err != nil {
		t.Fatal(err)
	}
	model := ModelOf("m", []byte("weights"))
	rec := Record{Generator: Generator, Version: "v1", Model: model, Engine: "cpu", Precision: "fp32", Input: cur}
	mask := filepath.Join(dir, "in_mask.nii.gz")
	writeVol(t, mask, 8, 6, 4, []nifti.Extension{rec.Extension()})
	_, got, err := Read(mask)
	if err != nil || got.Input.XXH3 != cur.XXH3 || got.Model != model || !got.Input.SameFiles(cur) {
		t.Fatalf("Read: %+v %v", got, err)
	}
	if !IsVoxpipeOutput(mask) || IsVoxpipeOutput(input) {
		t.Error("IsVoxpipeOutput")
	}
	dims := [3]int{8, 6, 4}
	check := func(mask string, cur Input, model Model, opt Options) (Verdict, string) {
		return Check(context.Background(), mask, dims, cur, files, model, opt)
	}
	if v, why := check(mask, cur, model, Options{VerifyHash: true}); v != UpToDate {
		t.Fatalf("fresh mask: %v %s", v, why)
	}
	if v, why := check(filepath.Join(dir, "none.nii.gz"), cur, model, Options{}); v != Redo || why != "new" {
		t.Errorf("no mask: %v %s", v, why)
	}
	if v, why := check(mask, cur, ModelOf("m", []byte("other weights")), Options{}); v != Redo || !strings.Contains(why, "model changed") {
		t.Errorf("other model: %v %s", v, why)
	}
	// The input touched: same content, new mtime.
	later := time.Now().Add(time.Hour)
	os.Chtimes(input, later, later)
	touched, _, _ := Stat(input)
	if v, why := check(mask, touched, model, Options{}); v != Redo || !strings.Contains(why, "input changed") || !strings.Contains(why, "modified") {
		t.Errorf("touched input: %v %s", v, why)
	}
	// Content changed with size and mtime kept: only the hash sees it.
	b, _ := os.ReadFile(input)
	b[len(b)-1] ^= 1
	os.WriteFile(input, b, 0o644)
	os.Chtimes(input, orig.ModTime(), orig.ModTime())
	same, _, _ := Stat(input)
	if v, _ := check(mask, same, model, Options{}); v != UpToDate {
		t.Errorf("size and mtime kept: %v, want up to date without VerifyHash", v)
	}
	if v, why := check(mask, same, model, Options{VerifyHash: true}); v != Redo || !strings.Contains(why, "content changed") {
		t.Errorf("VerifyHash: %v %s", v, why)
	}
	// Other dims, or a mask cut short, are redone.
	if v, why := Check(context.Background(), mask, [3]int{8, 6, 5}, same, files, model, Options{}); v != Redo || !strings.Contains(why, "dims") {
		t.Errorf("other dims: %v %s", v, why)
	}
	cut := filepath.Join(dir, "cut_mask.nii")
	writeVol(t, cut, 8, 6, 4, []nifti.Extension{rec.Extension()})
	raw, _ := os.ReadFile(cut)
	os.WriteFile(cut, raw[:len(raw)-10], 0o644)
	if v, why := check(cut, same, model, Options{}); v != Redo && v != Conflict {
		t.Errorf("truncated mask: %v %s", v, why)
	}
}

// A DICOM series that grew since its mask was made is redone, and the reason says that it
// grew and names the new files, whether or not the dims tell it too.
func TestCheckSeriesGrew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var paths []string
	for _, n := range []string{"IM0001", "IM0002", "IM0003"} {
		p := filepath.Join(dir, n)
		os.WriteFile(p, []byte(n), 0o644)
		paths = append(paths, p)
	}
	series := &DICOMSeries{StudyInstanceUID: "1.2", SeriesInstanceUID: "1.2.3"}
	was, _, err := StatFiles(paths[:2])
	if err != nil {
		t.Fatal(err)
	}
	was.DICOM = series
	model := ModelOf("m", []byte("weights"))
	mask := filepath.Join(dir, "s_mask.nii.gz")
	writeVol(t, mask, 8, 6, 2, []nifti.Extension{Record{Generator: Generator, Model: model, Input: was}.Extension()})
	now, _, _ := StatFiles(paths)
	now.DICOM = series
	for _, dims := range [][3]int{{8, 6, 3}, {8, 6, 2}} {
		v, why := Check(context.Background(), mask, dims, now, paths, model, Options{})
		if v != Redo || !strings.Contains(why, "the DICOM series grew from 2 to 3 files; new: IM0003") {
			t.Errorf("dims %v: %v %q", dims, v, why)
		}
	}
}

// Whatever voxpipe did not write at the mask's path is a conflict, never up to date.
func TestCheckConflicts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	input := filepath.Join(dir, "in.nii")
	writeVol(t, input, 4, 4, 4, nil)
	cur, files, _ := Stat(input)
	model := ModelOf("m", nil)
	cases := map[string]func(p string){
		"empty file":   func(p string) { os.WriteFile(p, nil, 0o644) },
		"garbage":      func(p string) { os.WriteFile(p, []byte(strings.Repeat("garbage ", 100)), 0o644) },
		"folder":       func(p string) { os.Mkdir(p, 0o755) },
		"foreign mask": func(p string) { writeVol(t, p, 4, 4, 4, nil) },
		"fifo":         func(p string) { testexec.Cmd(t, "mkfifo", p).Run() },
	}
	for name, make := range cases {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+"_mask.nii.gz")
		make(p)
		if _, err := os.Lstat(p); err != nil {
			t.Skipf("%s: %v", name, err)
		}
		if v, why := Check(context.Background(), p, [3]int{4, 4, 4}, cur, files, model, Options{}); v != Conflict {
			t.Errorf("%s: %v (%s), want conflict", name, v, why)
		}
	}
}

// BenchmarkHash hashes a 256 MiB file (page cache): the cost of the input's fingerprint.
func BenchmarkHash(b *testing.B) {
	p := filepath.Join(b.TempDir(), "big")
	data := make([]byte, 256<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	os.WriteFile(p, data, 0o644)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Hash(context.Background(), []string{p}); err != nil {
			b.Fatal(err)
		}
	}
}

// A mask made from one input is not another input's with the same name: a/x.nii and b/x.nii
// under one output folder are two patients. The second is a conflict naming both; the first
// input, changed, is still redone; a mask of an older version (no path) is judged as before.
func TestCheckOtherInputIsAConflict(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "a"), 0o755)
	os.MkdirAll(filepath.Join(dir, "b"), 0o755)
	a, b := filepath.Join(dir, "a", "x.nii"), filepath.Join(dir, "b", "x.nii")
	writeVol(t, a, 4, 4, 4, nil)
	writeVol(t, b, 4, 4, 4, nil)
	curA, files, err := Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	curB, filesB, _ := Stat(b)
	if curA.Path == "" || curA.Path == curB.Path {
		t.Fatalf("Stat records paths %q and %q", curA.Path, curB.Path)
	}
	model := ModelOf("m", nil)
	rec := Record{Generator: Generator, Version: "v1", Model: model, Engine: "cpu", Precision: "fp32", Input: curA}
	mask := filepath.Join(dir, "x_mask.nii.gz")
	writeVol(t, mask, 4, 4, 4, []nifti.Extension{rec.Extension()})
	dims := [3]int{4, 4, 4}
	v, why := Check(context.Background(), mask, dims, curB, filesB, model, Options{})
	if v != Conflict || !strings.Contains(why, a) || !strings.Contains(why, b) {
		t.Errorf("another input's mask: %v %q; want a conflict naming %s and %s", v, why, a, b)
	}
	// The same input through a relative path or a link to its folder is the same input.
	link := filepath.Join(dir, "link")
	os.Symlink(filepath.Join(dir, "a"), link)
	viaLink, linkFiles, _ := Stat(filepath.Join(link, "x.nii"))
	if v, why := Check(context.Background(), mask, dims, viaLink, linkFiles, model, Options{}); v != UpToDate {
		t.Errorf("the input through a link: %v %s", v, why)
	}
	later := time.Now().Add(time.Hour)
	os.Chtimes(a, later, later)
	touched, _, _ := Stat(a)
	if v, why := Check(context.Background(), mask, dims, touched, files, model, Options{}); v != Redo || !strings.Contains(why, "input changed") {
		t.Errorf("the mask's own input changed: %v %s", v, why)
	}
	old := rec
	old.Input.Path = ""
	oldMask := filepath.Join(dir, "old_mask.nii.gz")
	writeVol(t, oldMask, 4, 4, 4, []nifti.Extension{old.Extension()})
	if v, why := Check(context.Background(), oldMask, dims, touched, files, model, Options{}); v != Redo {
		t.Errorf("a mask without a recorded path: %v %s", v, why)
	}
}
