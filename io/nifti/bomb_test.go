package nifti

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"voxpipe/internal/gzbomb"
)

const bombN = 64 // the bombs' volume: 64^3 int16, 512 KiB

// bombVolume writes the 64^3 int16 formula volume as name (.nii, .nii.gz, .hdr.gz...) in dir
// and returns the uncompressed bytes of its data file (header and voxels, or the voxels of a
// pair's .img).
func bombVolume(t *testing.T, dir, name string) []byte {
	t.Helper()
	path := filepath.Join(dir, name)
	h := testHeader(Int16, 1, binary.LittleEndian, bombN, bombN, bombN)
	if err := Write(path, h, formulaData(Int16, bombN, bombN, bombN, 1), DefaultWriteOptions()); err != nil {
		t.Fatal(err)
	}
	data := path
	if names := namesOf(path); names.pair {
		data = names.images[0]
	}
	f, err := os.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readAllSlices opens path and reads every slice (in slabs of 8), returning the bytes read,
// whether the Reader was Seekable (inflated whole) and the first error other than io.EOF.
func readAllSlices(path string, opts ...OpenOption) ([]byte, bool, error) {
	r, err := Open(path, opts...)
	if err != nil {
		return nil, false, err
	}
	defer r.Close()
	var out []byte
	buf := make([]byte, 8*r.SliceVoxels()*2)
	for {
		k, err := r.ReadSlicesRaw(buf, 8)
		out = append(out, buf[:k*r.SliceVoxels()*2]...)
		if err == io.EOF {
			return out, r.Seekable(), nil
		}
		if err != nil {
			return out, r.Seekable(), err
		}
	}
}

// TestGzipBomb: a data file whose gzip stream inflates to far more than its header implies
// (4 GiB more with a consistent trailer, or 1 GiB more) is refused with ErrCorrupt on every
// path: the parallel inflate (which gives up early, then the stream is read in order), the
// streaming decoder, and the .img.gz of a pair. Quickly, and with allocations far below the
// stream's size. (The other memory involved, outside the heap, is sized by the header and the
// compressed file: the inflate's destination and the mapped file.) Before, the parallel path
// allocated GBs and both accepted the file.
func TestGzipBomb(t *testing.T) {
	inflateAlways(t)
	dir := t.TempDir()
	single := bombVolume(t, dir, "v.nii.gz")
	pair := bombVolume(t, dir, "p.hdr.gz")
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, open, data string // data: the file at fault
		implied          int
		wholeTried       bool // the parallel inflate takes it (trailer consistent)
	}{
		{"consistent trailer", "", write("c.nii.gz", gzbomb.Zeros(single, 4096)), len(single), true},
		{"1 GiB longer", "", write("l.nii.gz", gzbomb.Zeros(single, 1024)), len(single), false},
		{"pair", filepath.Join(dir, "p.hdr.gz"), write("p.img.gz", gzbomb.Zeros(pair, 4096)), len(pair), true},
	}
	var mapped int
	afterGzipMapped = func(string) { mapped++ }
	t.Cleanup(func() { afterGzipMapped = nil })
	for _, c := range cases {
		open := c.open
		if open == "" {
			open = c.data
		}
		for _, threads := range []int{0, 1, 4} {
			t.Run(fmt.Sprintf("%s/threads=%d", c.name, threads), func(t *testing.T) {
				mapped = 0
				var got []byte
				var err error
				start, startCPU := time.Now(), processCPU()
				alloc := allocatedDuring(func() { got, _, err = readAllSlices(open, WithInflateThreads(threads)) })
				cpu := processCPU() - startCPU
				t.Logf("%v, %d KiB allocated in %v (%v of CPU)", err, alloc>>10, time.Since(start), cpu)
				wantErr(t, err, ErrCorrupt, c.data)
				if want := fmt.Sprintf("holds more than the %d bytes its header implies", c.implied); !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
				if len(got) != bombN*bombN*bombN*2 {
					t.Errorf("%d bytes read before the error, want the volume's %d", len(got), bombN*bombN*bombN*2)
				}
				if wantTried := c.wholeTried && threads > 1; (mapped > 0) != wantTried {
					t.Errorf("the parallel inflate was tried %d times, want it tried: %v", mapped, wantTried)
				}
				if alloc > 64<<20 {
					t.Errorf("%d MiB allocated", alloc>>20)
				}
				// In CPU time: the wall clock counts the neighbours on a shared machine.
				if cpu > 3*time.Second {
					t.Errorf("took %v of CPU", cpu)
				}
			})
		}
	}
}

// A stream that is exactly as long as the header implies, or longer by at most gzipSlack,
// reads as before (the exact one inflated whole where asked); one byte more is refused, and
// a short one is truncated.
func TestGzipSlack(t *testing.T) {
	inflateAlways(t)
	dir := t.TempDir()
	file := bombVolume(t, dir, "v.nii.gz")
	voxels := file[len(file)-bombN*bombN*bombN*2:]
	cases := []struct {
		name  string
		extra int // zero bytes after the implied data; < 0: bytes missing
		want  error
	}{
		{"exact", 0, nil},
		{"within slack", gzipSlack, nil},
		{"past slack", gzipSlack + 1, ErrCorrupt},
		{"short", -1000, ErrTruncated},
	}
	for _, c := range cases {
		b := append(bytes.Clone(file), make([]byte, max(c.extra, 0))...)
		b = b[:len(b)+min(c.extra, 0)]
		path := filepath.Join(dir, c.name+".nii.gz")
		if err := os.WriteFile(path, gzipBytes(t, b), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, threads := range []int{0, 4} {
			got, seekable, err := readAllSlices(path, WithInflateThreads(threads))
			if c.want != nil {
				wantErr(t, err, c.want, path)
				continue
			}
			if err != nil {
				t.Fatalf("%s, %d threads: %v", c.name, threads, err)
			}
			if !bytes.Equal(got, voxels) {
				t.Errorf("%s, %d threads: the voxels differ", c.name, threads)
			}
			if want := threads > 1 && c.extra == 0; seekable != want {
				t.Errorf("%s, %d threads: inflated whole %v, want %v", c.name, threads, seekable, want)
			}
		}
	}
}
