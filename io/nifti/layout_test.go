package nifti

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The Layout of a written file places every slab where the file holds it: the bytes at
// Slab(v, z0, z1) of the .nii (or .img) are those slices of volume v, and the file ends at End.
func TestLayoutMatchesWrittenFile(t *testing.T) {
	t.Parallel()
	const nx, ny, nz, nt = 5, 3, 4, 3
	for _, name := range []string{"v.nii", "v.img"} {
		for _, version := range []int{1, 2} {
			path := filepath.Join(t.TempDir(), name)
			h := testHeader(Int16, version, hostOrder, nx, ny, nz, nt)
			h.Extensions = []Extension{{Code: ExtCodeComment, Data: []byte("layout")}}
			data := formulaData(Int16, nx, ny, nz, nt)
			if err := Write(path, h, data, WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			got, err := ReadHeader(path)
			if err != nil {
				t.Fatal(err)
			}
			lay, err := LayoutOf(got)
			if err != nil {
				t.Fatal(err)
			}
			files, err := Files(path)
			if err != nil {
				t.Fatal(err)
			}
			file, err := os.ReadFile(files[len(files)-1])
			if err != nil {
				t.Fatal(err)
			}
			if lay.End() != int64(len(file)) || lay.DataBytes() != int64(len(data)) || lay.Depth != nz || lay.Volumes != nt {
				t.Fatalf("%s v%d: layout %+v (end %d, %d data bytes), the file has %d bytes and %d of data",
					name, version, lay, lay.End(), lay.DataBytes(), len(file), len(data))
			}
			slice := int64(nx * ny * 2)
			for v := range int64(nt) {
				for z0 := range nz + 1 {
					for z1 := z0; z1 <= nz; z1++ {
						start, end := lay.Slab(v, z0, z1)
						at := v*int64(nz)*slice + int64(z0)*slice
						if want := data[at : at+int64(z1-z0)*slice]; !bytes.Equal(file[start:end], want) {
							t.Fatalf("%s v%d: volume %d slices %d..%d at %d..%d hold other bytes", name, version, v, z0, z1, start, end)
						}
					}
				}
				vs, ve := lay.Volume(v)
				if s, e := lay.Slab(v, 0, nz); s != vs || e != ve {
					t.Errorf("volume %d: Volume gives %d..%d, Slab of all its slices %d..%d", v, vs, ve, s, e)
				}
				if z := lay.SliceAt(3*slice - 1); z != 2 {
					t.Errorf("SliceAt(%d) = %d, want 2", 3*slice-1, z)
				}
			}
		}
	}
}

// LayoutOf refuses what Open refuses of a header's geometry and vox_offset, and bounds the
// largest offsets it can give far from overflow.
func TestLayoutOfRefusesBadHeaders(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		change func(*Header)
		want   error
	}{
		{"datatype", func(h *Header) { h.Datatype = 128 }, ErrUnsupportedDatatype},
		{"dim0", func(h *Header) { h.Dim[0] = 0 }, ErrCorrupt},
		{"zero dim", func(h *Header) { h.Dim[2] = 0 }, ErrCorrupt},
		{"huge dim", func(h *Header) { h.Dim[1] = MaxDim + 1 }, ErrTooLarge},
		{"too many voxels", func(h *Header) { h.Dim = [8]int64{7, MaxDim, MaxDim, MaxDim, MaxDim, MaxDim, MaxDim, MaxDim} }, ErrTooLarge},
		{"negative vox_offset", func(h *Header) { h.VoxOffset = -1 }, ErrCorrupt},
		{"vox_offset past 2^53", func(h *Header) { h.VoxOffset = maxVoxOffset + 1 }, ErrCorrupt},
	} {
		h := testHeader(Float64, 2, binary.LittleEndian, 4, 4, 4)
		h.VoxOffset = 544
		c.change(h)
		if _, err := LayoutOf(h); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// The largest header accepted: every offset stays below 2^54.
	h := testHeader(Float64, 2, binary.LittleEndian, 1<<12, 1<<11, 1<<11, 1<<6)
	h.VoxOffset = maxVoxOffset
	lay, err := LayoutOf(h)
	if err != nil {
		t.Fatal(err)
	}
	if end := lay.End(); end <= 0 || end > 1<<54 || end != maxVoxOffset+(1<<40)*8 {
		t.Errorf("end of the largest layout: %d", end)
	}
}
