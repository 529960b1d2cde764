package nifti

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSlabsMatchWholeVolume reads volumes in slabs of 1, 7, depth and depth+5 slices through
// every API and checks the bytes equal one whole-volume read.
func TestSlabsMatchWholeVolume(t *testing.T) {
	t.Parallel()
	cases := []struct {
		dt         DataType
		order      binary.ByteOrder
		version    int
		nx, ny, nz int
	}{
		{Int16, binary.LittleEndian, 1, 9, 11, 13},
		{Uint8, binary.BigEndian, 2, 9, 11, 13},
		{Float64, binary.BigEndian, 1, 5, 3, 20},
		{Int16, binary.BigEndian, 2, 128, 128, 40}, // > 1 MiB: several read-ahead blocks and conversion chunks
	}
	for _, c := range cases {
		for _, ext := range []string{".nii", ".nii.gz", ".hdr.gz"} {
			name := fmt.Sprintf("%s_n%d_%s_%dx%dx%d%s", c.dt, c.version, orderName(c.order), c.nx, c.ny, c.nz, ext)
			t.Run(name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "v"+ext)
				h := testHeader(c.dt, c.version, c.order, int64(c.nx), int64(c.ny), int64(c.nz))
				h.SclSlope = 0 // ReadFloat32 then returns stored values too
				data := formulaData(c.dt, c.nx, c.ny, c.nz, 1)
				if err := Write(path, h, data, DefaultWriteOptions()); err != nil {
					t.Fatal(err)
				}
				wholeRaw := readAllRaw(t, path)
				_, wholeF32, err := ReadFloat32(path)
				if err != nil {
					t.Fatal(err)
				}
				for _, slab := range []int{1, 7, c.nz, c.nz + 5} {
					raw := readInSlabs(t, path, slab, c.nz, func(r *Reader, n int) ([]byte, int, error) {
						buf := make([]byte, n*r.SliceVoxels()*c.dt.Size())
						k, err := r.ReadSlicesRaw(buf, n)
						return buf[:k*r.SliceVoxels()*c.dt.Size()], k, err
					})
					if !bytes.Equal(raw, wholeRaw) {
						t.Errorf("slab %d: raw bytes differ from the whole-volume read", slab)
					}
					f32 := readInSlabs(t, path, slab, c.nz, func(r *Reader, n int) ([]byte, int, error) {
						buf := make([]float32, n*r.SliceVoxels())
						k, err := r.ReadSlicesFloat32(buf, n)
						return bytesOf(buf[:k*r.SliceVoxels()]), k, err
					})
					if !bytes.Equal(f32, bytesOf(wholeF32)) {
						t.Errorf("slab %d: float32 bytes differ from ReadFloat32", slab)
					}
					if Int16Exact(c.dt) {
						i16 := readInSlabs(t, path, slab, c.nz, func(r *Reader, n int) ([]byte, int, error) {
							buf := make([]int16, n*r.SliceVoxels())
							k, err := r.ReadSlicesInt16(buf, n)
							return bytesOf(buf[:k*r.SliceVoxels()]), k, err
						})
						want := make([]int16, len(wholeF32))
						for i, v := range wholeF32 {
							want[i] = int16(v)
						}
						if !bytes.Equal(i16, bytesOf(want)) {
							t.Errorf("slab %d: int16 values differ from the whole-volume read", slab)
						}
					}
				}
			})
		}
	}
}

// readInSlabs opens path and calls read with n = slab until io.EOF, checking the counts.
func readInSlabs(t *testing.T, path string, slab, depth int, read func(*Reader, int) ([]byte, int, error)) []byte {
	t.Helper()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var all []byte
	left := depth
	for {
		b, k, err := read(r, slab)
		if err == io.EOF {
			if k != 0 || left != 0 {
				t.Fatalf("io.EOF with k=%d and %d slices left", k, left)
			}
			return all
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := min(slab, left); k != want {
			t.Fatalf("read %d slices, want %d", k, want)
		}
		left -= k
		all = append(all, b...)
	}
}

func TestReadSlicesArguments(t *testing.T) {
	t.Parallel()
	path := writeFormula(t, "a.nii", Float32, 4, 3, 5, WriteOptions{})
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.SliceVoxels() != 12 || r.Depth() != 5 || r.Path() != path || r.Datatype() != Float32 {
		t.Fatalf("SliceVoxels %d Depth %d Path %q Datatype %v", r.SliceVoxels(), r.Depth(), r.Path(), r.Datatype())
	}
	if _, err := r.ReadSlicesFloat32(make([]float32, 23), 2); !errors.Is(err, io.ErrShortBuffer) {
		t.Errorf("short buffer: %v", err)
	}
	if _, err := r.ReadSlicesRaw(make([]byte, 100), 0); err == nil {
		t.Errorf("n = 0 accepted")
	}
	// A short buffer is the caller's mistake, not the stream's: reading goes on.
	buf := make([]float32, 60)
	if k, err := r.ReadSlicesFloat32(buf, 10); k != 5 || err != nil {
		t.Fatalf("ReadSlicesFloat32 after errors: %d, %v", k, err)
	}
	if !slices.Equal(bytesOf(buf), formulaData(Float32, 4, 3, 5, 1)) {
		t.Errorf("data differs")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := r.ReadSlicesFloat32(buf, 1); err == nil {
		t.Errorf("read after Close succeeded")
	}
}

// TestCloseMidStream closes a gzip reader with read-ahead in flight (the goroutine must stop).
func TestCloseMidStream(t *testing.T) {
	t.Parallel()
	path := writeFormula(t, "a.nii.gz", Int16, 256, 256, 20, DefaultWriteOptions())
	for range 20 {
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.ReadSlicesInt16(make([]int16, 256*256), 1); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGzipTrailingBytes: zero padding after the gzip member (Python's gzip skips it too) reads
// fine; a second member carrying part of the data is read across.
func TestGzipTrailingBytes(t *testing.T) {
	t.Parallel()
	plain := validFile(t, 1, binary.LittleEndian)
	padded := append(gzipBytes(t, plain), make([]byte, 64)...)
	twoMembers := append(gzipBytes(t, plain[:400]), gzipBytes(t, plain[400:])...)
	for name, b := range map[string][]byte{"padded": padded, "two members": twoMembers} {
		path := filepath.Join(t.TempDir(), "a.nii.gz")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, got, err := ReadFloat32(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, v := range got {
			if want := float32(sampleAt(formulaData(Int16, 6, 5, 4, 1), Int16, i)); v != want {
				t.Fatalf("%s: voxel %d = %v, want %v", name, i, v, want)
			}
		}
	}
}

func TestReadHeaderAndVolumes(t *testing.T) {
	t.Parallel()
	h, err := ReadHeader("testdata/interop/int16_n1_le_4d.nii.gz")
	if err != nil {
		t.Fatal(err)
	}
	if h.Volumes() != 3 || h.NX() != 5 || h.NZ() != 3 {
		t.Errorf("Volumes %d NX %d NZ %d", h.Volumes(), h.NX(), h.NZ())
	}
	h, err = ReadHeader("testdata/interop/int16_n1_le_4d1.nii")
	if err != nil || h.Volumes() != 1 || h.Dim[0] != 4 {
		t.Errorf("4D with one volume: %v, %v", h, err)
	}
}
