package dicom

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"voxpipe/internal/dicomtest"
	"voxpipe/internal/regular"
)

// writeFiles writes specs as dir/IM<i> and returns their paths.
func writeFiles(t *testing.T, dir string, specs []sliceSpec) []string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i, sp := range specs {
		p := filepath.Join(dir, "IM"+strconv.Itoa(i))
		if err := os.WriteFile(p, sp.file(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// seriesWithUID returns the series of the scan with the UID.
func seriesWithUID(scan *Scan, uid string) []*Series {
	var out []*Series
	for _, s := range scan.Series {
		if s.UID == uid {
			out = append(out, s)
		}
	}
	return out
}

func truncate(t *testing.T, path string, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n < 0 {
		n += len(b)
	}
	if err := os.WriteFile(path, b[:n], 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrokenMemberFailsSeries: a series with a truncated, undecodable or unreadable member
// fails, its error naming the file and wrapping the reason; the file is not listed as skipped
// (it is DICOM), and a series in another folder is read as usual. A member that names no
// series (cut inside its meta group, or that cannot be opened) fails the series of its folder.
func TestBrokenMemberFailsSeries(t *testing.T) {
	t.Parallel()
	inc := func(k int) int { return k + 1 }
	// appendBadSequence appends, after the pixel data, a sequence whose item is not an item.
	appendBadSequence := func(t *testing.T, path string) {
		bad := dicomtest.NewEnc(dicomtest.ExplicitVRLittleEndian).Header(0x00091001, "SQ", undefinedLength)
		bad.Tag(0x00100010).U32(0)
		b, _ := os.ReadFile(path)
		os.WriteFile(path, append(b, bad.Bytes()...), 0o644)
	}
	cases := []struct {
		name   string
		broken int
		damage func(t *testing.T, path string)
		want   error
	}{
		{"truncated first", 0, func(t *testing.T, p string) { truncate(t, p, -5) }, ErrTruncated},
		{"truncated last", 4, func(t *testing.T, p string) { truncate(t, p, -5) }, ErrTruncated},
		{"truncated middle", 2, func(t *testing.T, p string) { truncate(t, p, -5) }, ErrTruncated},
		{"corrupt after the pixels", 4, appendBadSequence, ErrCorrupt},
		{"cut in the meta group", 0, func(t *testing.T, p string) { truncate(t, p, 150) }, ErrTruncated},
		{"gone", 3, func(t *testing.T, p string) { os.Remove(p) }, fs.ErrNotExist},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			a := writeFiles(t, filepath.Join(dir, "a"), stack(5, inc, nil))
			b := writeFiles(t, filepath.Join(dir, "b"), stack(3, inc, func(k int, sp *sliceSpec) { sp.uid = "9.9" }))
			tc.damage(t, a[tc.broken])
			scan := ScanFiles(append(a, b...), 2)
			bad := seriesWithUID(scan, "1.2.3")
			if len(bad) == 0 {
				t.Fatalf("no series 1.2.3 in %d series", len(scan.Series))
			}
			for _, s := range bad {
				if s.Err == nil {
					t.Fatalf("series of %d slices read without error; want it to fail naming %s", len(s.Slices), a[tc.broken])
				}
				if !errors.Is(s.Err, tc.want) || !strings.Contains(s.Err.Error(), a[tc.broken]) {
					t.Errorf("error %q: want %v, naming %s", s.Err, tc.want, a[tc.broken])
				}
			}
			for _, sk := range scan.Skipped {
				if sk.Path == a[tc.broken] {
					t.Errorf("the broken member is listed as skipped: %v", sk.Err)
				}
			}
			good := seriesWithUID(scan, "9.9")
			if len(good) != 1 || good[0].Err != nil || len(good[0].Slices) != 3 {
				t.Errorf("the other folder's series: %d series, %v", len(good), good)
			}
		})
	}
}

// TestUnreadableMemberFailsSeries: a member the process may not read (chmod 000) fails the
// series of its folder, named. Root reads anything: the case is then covered by "gone".
func TestUnreadableMemberFailsSeries(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("root reads files whatever their mode")
	}
	for _, broken := range []int{0, 4} {
		dir := t.TempDir()
		a := writeFiles(t, dir, stack(5, func(k int) int { return k + 1 }, nil))
		if err := os.Chmod(a[broken], 0); err != nil {
			t.Fatal(err)
		}
		scan := ScanFiles(a, 2)
		if len(scan.Series) != 1 || scan.Series[0].Err == nil || !errors.Is(scan.Series[0].Err, fs.ErrPermission) ||
			!strings.Contains(scan.Series[0].Err.Error(), a[broken]) {
			t.Errorf("file %d unreadable: %d series, %v", broken, len(scan.Series), scan.Series)
		}
	}
}

// TestSeriesErrorsNameFiles: each series-level error names the files involved: the two on
// either side of a gap or of a spacing that changes, the first and last of a tilted series, the
// files that share a position.
func TestSeriesErrorsNameFiles(t *testing.T) {
	t.Parallel()
	inc := func(k int) int { return k + 1 }
	cases := map[string]struct {
		mod  func(k int, sp *sliceSpec)
		want []int
	}{
		"missing": {func(k int, sp *sliceSpec) {
			if k >= 2 {
				sp.pos[2] += 2
			}
		}, []int{1, 2}},
		"varies": {func(k int, sp *sliceSpec) {
			if k >= 3 {
				sp.pos[2] += 0.7
			}
		}, []int{2, 3}},
		"tilt":     {func(k int, sp *sliceSpec) { sp.pos[1] += 0.3 * float64(k) }, []int{0, 5}},
		"repeated": {func(k int, sp *sliceSpec) { sp.pos[2] = 10 + 2*float64(k/2) }, []int{0, 1}},
		"repeated later": {func(k int, sp *sliceSpec) {
			if k == 4 {
				sp.pos[2] = 16
			}
		}, []int{3, 4}},
	}
	for name, tc := range cases {
		dir := t.TempDir()
		paths := writeFiles(t, dir, stack(6, inc, tc.mod))
		scan := ScanFiles(paths, 2)
		if len(scan.Series) != 1 || scan.Series[0].Err == nil {
			t.Errorf("%s: %d series, want one that fails", name, len(scan.Series))
			continue
		}
		msg := scan.Series[0].Err.Error()
		for _, i := range tc.want {
			if !strings.Contains(msg, paths[i]+" ") && !strings.HasSuffix(msg, paths[i]) && !strings.Contains(msg, paths[i]+",") && !strings.Contains(msg, paths[i]+")") {
				t.Errorf("%s: %q does not name %s", name, msg, paths[i])
			}
		}
	}
}

// TestDuplicateFiles: a byte-identical copy of a member (another name, the same SOP Instance
// UID) is dropped; two different files with one SOP Instance UID fail the series, naming both.
func TestDuplicateFiles(t *testing.T) {
	t.Parallel()
	specs := stack(5, func(k int) int { return k + 1 }, func(k int, sp *sliceSpec) { sp.sop = "1.2.3.4." + strconv.Itoa(k) })
	dir := t.TempDir()
	paths := writeFiles(t, dir, specs)
	cp := filepath.Join(dir, "IM2 copy")
	b, _ := os.ReadFile(paths[2])
	os.WriteFile(cp, b, 0o644)
	scan := ScanFiles(append(paths, cp), 2)
	if len(scan.Series) != 1 || scan.Series[0].Err != nil || len(scan.Series[0].Slices) != 5 {
		t.Fatalf("exact duplicate: %d series, %v; want one of 5 slices", len(scan.Series), scan.Series)
	}
	if d := scan.Series[0].Duplicates; len(d) != 1 || d[0] != cp {
		t.Errorf("Duplicates = %q, want [%s]", d, cp)
	}

	other := specs[2]
	other.pixels = make([]uint16, len(other.pixels)) // another image under the same SOP Instance UID
	diff := filepath.Join(dir, "IM2 other")
	os.WriteFile(diff, other.file(), 0o644)
	scan = ScanFiles(append(paths, diff), 2)
	if len(scan.Series) != 1 || scan.Series[0].Err == nil {
		t.Fatalf("two different files with one SOP Instance UID: %d series, %v; want one that fails", len(scan.Series), scan.Series)
	}
	if msg := scan.Series[0].Err.Error(); !errors.Is(scan.Series[0].Err, ErrDuplicate) || !strings.Contains(msg, paths[2]) || !strings.Contains(msg, diff) {
		t.Errorf("%q does not name %s and %s", msg, paths[2], diff)
	}
}

// bombs are deflated files of a few KiB to 1 MiB that inflate to up to 1 GiB, or end or break
// where they should not, with the error each must fail with.
func bombs(uid string) map[string]struct {
	b    []byte
	want error
} {
	img := sliceSpec{syntax: ExplicitVRLittleEndian, uid: uid, instance: 1, orient: axial, rows: 3, cols: 4, bitsStored: 16, pixels: make([]uint16, 12)}
	ds := img.dataset()
	// A private OB element declaring 1 GiB, which follows, before the image.
	blob := dicomtest.NewEnc(dicomtest.ExplicitVRLittleEndian).Header(0x00091010, "OB", 1<<30)
	// An image declaring 4096x4096 pixels, of which 8 MiB follow.
	big := img
	big.uid = uid + ".3"
	big.rows, big.cols, big.pixels = 4096, 4096, nil
	bigDS := big.dataset()
	bigHead := bigDS[:len(bigDS)-12] // up to the pixel data's length, which the file then declares
	bigHead = append(bigHead, 0, 0, 0, 2)
	// A second pixel data element declaring 1 GiB, which follows.
	img.uid = uid + ".4"
	second := dicomtest.NewEnc(dicomtest.ExplicitVRLittleEndian).Raw(img.dataset())
	second.Header(uint32(tagPixelData), "OW", 1<<30)
	// Garbage after a good start: not a deflate stream.
	garbage := dicomtest.DeflatedBomb(ds[:40], 0, nil)
	garbage = append(garbage[:len(garbage)-8], bytes.Repeat([]byte{0xFF}, 4096)...)
	img.uid = uid + ".2"
	ds2 := img.dataset()
	return map[string]struct {
		b    []byte
		want error
	}{
		"1 GiB after the pixels":   {dicomtest.DeflatedBomb(ds2, 1024, nil), ErrTooLarge},
		"1 GiB private element":    {dicomtest.DeflatedBomb(blob.Bytes(), 1024, ds), ErrTooLarge},
		"1 GiB second pixel data":  {dicomtest.DeflatedBomb(second.Bytes(), 1024, nil), ErrTooLarge},
		"image cut short":          {dicomtest.DeflatedBomb(bigHead, 8, nil), ErrTruncated},
		"damaged stream":           {garbage, ErrCorrupt},
		"256 MiB after the pixels": {dicomtest.DeflatedBomb(ds, 256, nil), ErrTooLarge},
	}
}

// TestDeflateBombs: deflated files that inflate far beyond what they declare, or end early,
// fail at the scan with the right error naming them, each after inflating at most what its
// pixel data declares and MaxInflated bytes more, while the scan (on 8 goroutines) allocates a
// few MiB in all: the data set is parsed as it inflates, nothing of it kept but the window and
// the attributes.
func TestDeflateBombs(t *testing.T) {
	var paths []string
	want := map[string]error{}
	for i := range 2 {
		for name, b := range bombs("6.6." + strconv.Itoa(i)) {
			dir := t.TempDir() // a folder each, so that each fails a series of its own
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, b.b, 0o644); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
			want[p] = b.want
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	scan := ScanFiles(paths, 8)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("scanning %d bombs allocated %d MiB", len(paths), alloc>>20)
	}
	t.Logf("%d bombs scanned in %v", len(paths), took)
	failed := map[string]error{}
	for _, s := range scan.Series {
		for _, f := range s.Files {
			failed[f.Path] = s.Err
		}
	}
	for _, p := range paths {
		err := failed[p]
		if err == nil || !errors.Is(err, want[p]) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: series error %v, want %v naming the file", filepath.Base(p), err, want[p])
		}
	}
	if len(scan.Skipped) != 0 {
		t.Errorf("skipped %v: a bomb is DICOM, its series must fail", scan.Skipped)
	}
}

// deflatedStack writes n deflated slices of rows x cols pixels as dir/IM<i>.
func deflatedStack(t *testing.T, dir string, n, rows, cols int) []string {
	return writeFiles(t, dir, stack(n, func(k int) int { return k + 1 }, func(k int, sp *sliceSpec) {
		sp.syntax, sp.rows, sp.cols = DeflatedExplicitVRLE, rows, cols
		sp.pixels = make([]uint16, rows*cols)
		for i := range sp.pixels {
			sp.pixels[i] = uint16(k*7 + i%1000)
		}
	}))
}

// TestDeflatedSeriesStreams: a deflated series is scanned holding no inflated data set (the
// old parser kept each file inflated), and read straight into the caller's buffer with the
// right values; a file whose stream is damaged, or inflates past what it held at the scan,
// fails the read naming it.
func TestDeflatedSeriesStreams(t *testing.T) {
	dir := t.TempDir()
	paths := deflatedStack(t, dir, 4, 1024, 1024) // 2 MiB inflated per file
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	scan := ScanFiles(paths, 4)
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("scanning 4 deflated files of 2 MiB allocated %d KiB", alloc>>10)
	}
	if len(scan.Series) != 1 || scan.Series[0].Err != nil {
		t.Fatalf("%d series, %v", len(scan.Series), scan.Series)
	}
	s := scan.Series[0]
	dst := make([]byte, s.Voxels()*2)
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := s.ReadRaw(dst, 2); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("reading 8 MiB of deflated slices allocated %d KiB besides the volume", alloc>>10)
	}
	vox := unsafe.Slice((*uint16)(unsafe.Pointer(&dst[0])), len(dst)/2)
	for k := range 4 {
		// voxel (i, j) of slice k is DICOM row 1023-j: pixel index (1023-j)*1024+i.
		if i, j := 5, 3; vox[k*1024*1024+j*1024+i] != uint16(k*7+((1023-j)*1024+i)%1000) {
			t.Fatalf("slice %d: voxel = %d", k, vox[k*1024*1024+j*1024+i])
		}
	}

	// Damage after the scan: bytes of the stream flipped, or more data appended.
	good, _ := os.ReadFile(paths[2])
	flipped := bytes.Clone(good)
	for i := len(flipped) / 2; i < len(flipped)/2+64; i++ {
		flipped[i] ^= 0xA5
	}
	longer := dicomtest.DeflatedBomb(stack(1, func(int) int { return 3 }, nil)[0].dataset(), 4, nil)
	for name, b := range map[string][]byte{"flipped": flipped, "longer": longer, "cut": good[:len(good)-100]} {
		os.WriteFile(paths[2], b, 0o644)
		_, err := s.ReadRaw(dst, 2)
		if err == nil || !strings.Contains(err.Error(), paths[2]) || !wrapsSentinel(err) {
			t.Errorf("%s after the scan: %v, want an error of the package naming %s", name, err, paths[2])
		}
	}
}

// TestScanFIFO: a FIFO in a DICOM folder is listed as skipped, not opened (a FIFO with no
// writer blocks an open for reading forever), and a FIFO named on its own is an error.
func TestScanFIFO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, stack(3, func(k int) int { return k + 1 }, nil))
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	type result struct {
		scan *Scan
		err  error
	}
	scanned := func(paths ...string) result {
		done := make(chan result, 1)
		go func() {
			scan, err := ScanPaths(paths, 2)
			done <- result{scan, err}
		}()
		select {
		case r := <-done:
			return r
		case <-time.After(20 * time.Second): // a bound, not a timing: the scan blocked on the FIFO
			t.Fatalf("ScanPaths(%v) blocked", paths)
			return result{}
		}
	}
	r := scanned(dir)
	if r.err != nil || len(r.scan.Series) != 1 || r.scan.Series[0].Err != nil || len(r.scan.Skipped) != 1 ||
		r.scan.Skipped[0].Path != fifo || !errors.Is(r.scan.Skipped[0].Err, regular.ErrNotRegular) {
		t.Errorf("folder with a FIFO: %v, %+v", r.err, r.scan)
	}
	if r := scanned(fifo); !errors.Is(r.err, regular.ErrNotRegular) {
		t.Errorf("a FIFO named: %v, want regular.ErrNotRegular", r.err)
	}
}

// TestCutAfterMetaGroup: a file with a meta group that names no transfer syntax, cut right
// after it, is DICOM cut short (it fails the series of its folder), not "not DICOM".
func TestCutAfterMetaGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	paths := writeFiles(t, dir, stack(3, func(k int) int { return k + 1 }, nil))
	meta := dicomtest.NewEnc(dicomtest.ExplicitVRLittleEndian).Str(uint32(tagMediaStorageSOPClass), "UI", dicomtest.MRImageStorage)
	cut := filepath.Join(dir, "IM9")
	os.WriteFile(cut, append(append(make([]byte, 128), "DICM"...), meta.Bytes()...), 0o644)
	scan := ScanFiles(append(paths, cut), 1)
	if len(scan.Skipped) != 0 || len(scan.Series) != 1 || !errors.Is(scan.Series[0].Err, ErrTruncated) || !strings.Contains(scan.Series[0].Err.Error(), cut) {
		t.Errorf("skipped %v, series %v", scan.Skipped, scan.Series)
	}
}
