package dicomseg

import (
	"bytes"
	"errors"
	"testing"

	"voxpipe/io/nifti"
)

// reorient returns the mask with its axes permuted (new axis n is old axis perm[n]) and
// flipped, and the affine that keeps every voxel where it was in the world.
func reorient(a nifti.Affine, dims [3]int, data []byte, perm [3]int, flip [3]bool) (nifti.Affine, [3]int, []byte) {
	var b nifti.Affine
	var nd [3]int
	b[3] = [4]float64{0, 0, 0, 1}
	for r := range 3 {
		b[r][3] = a[r][3]
	}
	for n := range 3 {
		o := perm[n]
		nd[n] = dims[o]
		for r := range 3 {
			b[r][n] = a[r][o]
			if flip[n] {
				b[r][n] = -a[r][o]
				b[r][3] += a[r][o] * float64(dims[o]-1)
			}
		}
	}
	out := make([]byte, len(data))
	var idx [3]int
	for k := range nd[2] {
		for j := range nd[1] {
			for i := range nd[0] {
				for n, v := range [3]int{i, j, k} {
					if flip[n] {
						v = nd[n] - 1 - v
					}
					idx[perm[n]] = v
				}
				out[i+nd[0]*(j+nd[1]*k)] = data[idx[0]+dims[0]*(idx[1]+dims[1]*idx[2])]
			}
		}
	}
	return b, nd, out
}

func headerOf(a nifti.Affine, d [3]int) *nifti.Header {
	h := &nifti.Header{Version: 1, Dim: [8]int64{3, int64(d[0]), int64(d[1]), int64(d[2]), 1, 1, 1, 1}, Datatype: nifti.Uint8, BitPix: 8}
	h.SetAffine(a, 1)
	return h
}

func TestAlignUndoesAnyReorientation(t *testing.T) {
	t.Parallel()
	_, s := writeSeries(t, geometries[3]) // oblique
	mask := testMask(s, 3)
	dims := [3]int{s.Columns, s.Rows, len(s.Slices)}
	for _, c := range []struct {
		perm [3]int
		flip [3]bool
	}{
		{[3]int{0, 1, 2}, [3]bool{}},
		{[3]int{0, 1, 2}, [3]bool{true, true, false}},
		{[3]int{2, 0, 1}, [3]bool{false, true, true}},
		{[3]int{1, 2, 0}, [3]bool{true, false, true}},
	} {
		a, d, data := reorient(s.Affine, dims, mask, c.perm, c.flip)
		got, err := Align(headerOf(a, d), data, s)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if !bytes.Equal(got, mask) {
			t.Fatalf("%+v: the aligned mask differs from the original", c)
		}
	}
}

func TestAlignRefusesAnotherGrid(t *testing.T) {
	t.Parallel()
	_, s := writeSeries(t, geometries[0])
	mask := testMask(s, 3)
	dims := [3]int{s.Columns, s.Rows, len(s.Slices)}
	shifted := s.Affine
	shifted[0][3] += s.Spacing[0] // one voxel along x
	scaled := s.Affine
	for r := range 3 {
		scaled[r][2] *= 2
	}
	turned, _, _ := reorient(s.Affine, dims, mask, [3]int{1, 0, 2}, [3]bool{})
	for name, c := range map[string]struct {
		a    nifti.Affine
		d    [3]int
		data []byte
	}{
		"shifted by a voxel":         {shifted, dims, mask},
		"slices twice apart":         {scaled, dims, mask},
		"one slice more":             {s.Affine, [3]int{dims[0], dims[1], dims[2] + 1}, append(bytes.Clone(mask), make([]byte, dims[0]*dims[1])...)},
		"axes swapped, not the data": {turned, dims, mask},
	} {
		if _, err := Align(headerOf(c.a, c.d), c.data, s); !errors.Is(err, ErrGrid) {
			t.Errorf("%s: error %v, want ErrGrid", name, err)
		}
	}
}
