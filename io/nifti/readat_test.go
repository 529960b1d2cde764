package nifti

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// readAt reads the whole volume by position, in chunks of `chunk` slices from as many
// goroutines, into one buffer (the way the pipeline reads). per is the number of T a voxel
// takes (its size for raw bytes, else 1).
func readAt[T any](t *testing.T, r *Reader, chunk, per int, read func(dst []T, z, n int) (int, error)) []T {
	t.Helper()
	plane, nz := r.SliceVoxels()*per, r.Depth()
	out := make([]T, plane*nz)
	var wg sync.WaitGroup
	errs := make(chan error, nz)
	for z := 0; z < nz; z += chunk {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := read(out[z*plane:], z, chunk)
			if err == nil && k != min(chunk, nz-z) {
				err = fmt.Errorf("read %d slices at z %d, want %d", k, z, min(chunk, nz-z))
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return out
}

// readSeq reads the whole volume with the sequential API, one call.
func readSeq[T any](t *testing.T, path string, opts []OpenOption, per int, read func(r *Reader, dst []T, n int) (int, error)) []T {
	t.Helper()
	r, err := Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := make([]T, r.SliceVoxels()*r.Depth()*per)
	if _, err := read(r, out, r.Depth()); err != nil {
		t.Fatal(err)
	}
	return out
}

// Positional reads from concurrent goroutines give exactly the sequential API's values, for
// every datatype, both byte orders, NIfTI-1 and -2, single files and .hdr/.img pairs (also with
// a gzipped header), scaled files (unscaled values, same Scaling) and a volume of a 4D file.
func TestReadAtMatchesSequential(t *testing.T) {
	t.Parallel()
	for _, c := range readAtCases() {
		name := fmt.Sprintf("%s_n%d_%s%s_slope%v_vol%dof%d", c.dt, c.version, orderName(c.order), c.ext, c.slope, c.vol, c.nt)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			readAtMatches(t, c)
		})
	}
}

// readAtCase is a file of TestReadAtMatchesSequential.
type readAtCase struct {
	dt      DataType
	order   binary.ByteOrder
	version int
	ext     string
	slope   float64
	nt, vol int
}

// readAtCases: every datatype in both byte orders, then the other versions, layouts,
// scaling and volumes of 4D files.
func readAtCases() []readAtCase {
	var cases []readAtCase
	for _, dt := range allDatatypes {
		for _, order := range byteOrders {
			cases = append(cases, readAtCase{dt, order, 1, ".nii", 1, 1, 0})
		}
	}
	cases = append(cases,
		readAtCase{Int16, binary.BigEndian, 2, ".nii", 1, 1, 0},
		readAtCase{Int16, binary.LittleEndian, 1, ".hdr", 1, 1, 0},
		readAtCase{Float64, binary.BigEndian, 2, ".img", 1, 1, 0},
		readAtCase{Uint8, binary.BigEndian, 1, ".hdr", 1, 1, 0},
		readAtCase{Int16, binary.LittleEndian, 1, ".nii", 2.5, 1, 0}, // scaled
		readAtCase{Float32, binary.BigEndian, 1, ".nii", -0.5, 1, 0},
		readAtCase{Int16, binary.BigEndian, 2, ".nii", 1, 3, 2}, // volume 2 of a 4D file
		readAtCase{Uint32, binary.LittleEndian, 1, ".nii", 1, 2, 1},
	)
	return cases
}

// readAtMatches writes c's file and checks that the positional reads, in chunks of several
// sizes, give what the sequential reads give, and that the two kinds of reads leave each
// other's position alone.
func readAtMatches(t *testing.T, c readAtCase) {
	const nx, ny, nz = 61, 47, 19 // 19 float64 slices are 436 KB: two 256 KiB conversion chunks
	dir := t.TempDir()
	path := filepath.Join(dir, "v"+c.ext)
	dims := []int64{nx, ny, nz}
	if c.nt > 1 {
		dims = append(dims, int64(c.nt))
	}
	h := testHeader(c.dt, c.version, c.order, dims...)
	h.SclSlope, h.SclInter = c.slope, 0
	if c.slope != 1 {
		h.SclInter = 7
	}
	if err := Write(path, h, formulaData(c.dt, nx, ny, nz, c.nt), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	var opts []OpenOption
	if c.nt > 1 {
		opts = append(opts, WithVolume(c.vol))
	}
	r, err := Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.Seekable() {
		t.Fatal("uncompressed data not Seekable")
	}
	if slope, inter := r.Scaling(); c.slope != 1 && (slope != c.slope || inter != 7) {
		t.Errorf("Scaling %v %v", slope, inter)
	}
	for _, chunk := range []int{1, 4, nz, nz + 3} {
		raw := readAt(t, r, chunk, c.dt.Size(), r.ReadSlicesRawAt)
		if want := readSeq(t, path, opts, c.dt.Size(), (*Reader).ReadSlicesRaw); !bytes.Equal(raw, want) {
			t.Errorf("chunk %d: raw bytes differ from the sequential read", chunk)
		}
		f32 := readAt(t, r, chunk, 1, r.ReadSlicesFloat32At)
		if want := readSeq(t, path, opts, 1, (*Reader).ReadSlicesFloat32); !bytes.Equal(bytesOf(f32), bytesOf(want)) {
			t.Errorf("chunk %d: float32 values differ from the sequential read", chunk)
		}
		if Int16Exact(c.dt) {
			i16 := readAt(t, r, chunk, 1, r.ReadSlicesInt16At)
			if want := readSeq(t, path, opts, 1, (*Reader).ReadSlicesInt16); !bytes.Equal(bytesOf(i16), bytesOf(want)) {
				t.Errorf("chunk %d: int16 values differ from the sequential read", chunk)
			}
		} else if _, err := r.ReadSlicesInt16At(make([]int16, nx*ny), 0, 1); !errors.Is(err, ErrUnsupportedDatatype) {
			t.Errorf("ReadSlicesInt16At of %s: %v, want ErrUnsupportedDatatype", c.dt, err)
		}
	}
	// Positional reads leave the sequential position alone, and the other way round.
	if _, err := r.ReadSlicesRaw(make([]byte, 2*nx*ny*c.dt.Size()), 2); err != nil {
		t.Fatal(err)
	}
	whole := readSeq(t, path, opts, c.dt.Size(), (*Reader).ReadSlicesRaw)
	rest := make([]byte, (nz-2)*nx*ny*c.dt.Size())
	if k, err := r.ReadSlicesRaw(rest, nz); k != nz-2 || err != nil || !bytes.Equal(rest, whole[2*nx*ny*c.dt.Size():]) {
		t.Errorf("sequential read after positional reads: %d slices, %v, equal %v", k, err, bytes.Equal(rest, whole[2*nx*ny*c.dt.Size():]))
	}
}

// Gzipped data cannot be read by position: ErrNotSeekable naming the file, while the
// sequential API reads it as usual.
func TestReadAtGzipNotSeekable(t *testing.T) {
	t.Parallel()
	for _, ext := range []string{".nii.gz", ".hdr.gz", ".img.gz"} {
		t.Run(ext, func(t *testing.T) {
			path := writeFormula(t, "v"+ext, Int16, 6, 5, 4, DefaultWriteOptions())
			r, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Seekable() {
				t.Error("gzip data Seekable")
			}
			_, err = r.ReadSlicesInt16At(make([]int16, 120), 0, 4)
			wantErr(t, err, ErrNotSeekable, filepath.Dir(path))
			_, err = r.ReadSlicesFloat32At(make([]float32, 120), 0, 4)
			wantErr(t, err, ErrNotSeekable, "")
			if k, err := r.ReadSlicesInt16(make([]int16, 120), 4); k != 4 || err != nil {
				t.Errorf("sequential read: %d, %v", k, err)
			}
		})
	}
}

func TestReadAtArguments(t *testing.T) {
	t.Parallel()
	path := writeFormula(t, "a.nii", Int16, 4, 3, 5, WriteOptions{})
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]int16, 60)
	if _, err := r.ReadSlicesInt16At(buf[:23], 0, 2); !errors.Is(err, io.ErrShortBuffer) {
		t.Errorf("short buffer: %v", err)
	}
	for _, zn := range [][2]int{{0, 0}, {-1, 1}, {6, 1}} {
		if _, err := r.ReadSlicesInt16At(buf, zn[0], zn[1]); err == nil || errors.Is(err, io.EOF) {
			t.Errorf("z %d n %d: %v, want an error", zn[0], zn[1], err)
		}
	}
	if k, err := r.ReadSlicesInt16At(buf, 5, 1); k != 0 || err != io.EOF {
		t.Errorf("at the end: %d, %v, want 0, io.EOF", k, err)
	}
	if k, err := r.ReadSlicesInt16At(buf, 3, 10); k != 2 || err != nil {
		t.Errorf("past the end: %d, %v, want the 2 slices left", k, err)
	}
	r.Close()
	if _, err := r.ReadSlicesInt16At(buf, 0, 1); err == nil {
		t.Error("read after Close succeeded")
	}
}

// A file cut short after Open (Open checked its size) reports ErrTruncated naming the file and
// the slice, not short data.
func TestReadAtFileShrunkAfterOpen(t *testing.T) {
	t.Parallel()
	path := writeFormula(t, "a.nii", Int16, 6, 5, 4, WriteOptions{})
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := os.Truncate(path, 352+60*2+10); err != nil { // ends inside z-slice 2
		t.Fatal(err)
	}
	if k, err := r.ReadSlicesInt16At(make([]int16, 60), 0, 2); k != 2 || err != nil {
		t.Errorf("slices before the cut: %d, %v", k, err)
	}
	_, err = r.ReadSlicesInt16At(make([]int16, 60), 2, 2)
	wantErr(t, err, ErrTruncated, path)
	if !bytes.Contains([]byte(err.Error()), []byte("z-slice 2")) {
		t.Errorf("error %q does not name z-slice 2", err)
	}
	_, err = r.ReadSlicesFloat32At(make([]float32, 60), 3, 1)
	wantErr(t, err, ErrTruncated, path)
}
