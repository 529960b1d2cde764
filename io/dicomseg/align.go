package dicomseg

import (
	"fmt"
	"math"

	"voxpipe/io/dicom"
	"voxpipe/io/nifti"
)

// Align brings a label mask read from a NIfTI file (header h, uint8 labels in its own voxel
// order) onto the grid of series s, in io/dicom's layout: the mask must lie on that grid,
// voxel for voxel, in any of the 48 axis orders and directions (a mask written by dcm2niix,
// by voxpipe, or reoriented by another tool), else ErrGrid says where it differs. Nothing is
// resampled: a mask on another grid is refused, not interpolated.
func Align(h *nifti.Header, labels []byte, s *dicom.Series) ([]byte, error) {
	nz := len(s.Slices)
	dst := [3]int{s.Columns, s.Rows, nz}
	src := [3]int{h.NX(), h.NY(), h.NZ()}
	if len(labels) != src[0]*src[1]*src[2] {
		return nil, fmt.Errorf("%w: %d labels for %dx%dx%d voxels", ErrGrid, len(labels), src[0], src[1], src[2])
	}
	A, B := h.Affine(), s.Affine
	// tolerance: a hundredth of the series' smallest voxel size, in mm
	tol := 0.01 * min(s.Spacing[0], s.Spacing[1], s.Spacing[2])
	var axis [3]int  // series axis a is mask axis axis[a]
	var flip [3]bool // ... running the other way
	used := [3]bool{}
	for a := range 3 {
		found := false
		for b := range 3 {
			if used[b] {
				continue
			}
			for _, sign := range []float64{1, -1} {
				if close3(B, a, A, b, sign, tol) {
					axis[a], flip[a], used[b], found = b, sign < 0, true, true
					break
				}
			}
			if found {
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: the series' %s axis (%s mm a voxel) is none of the mask's axes (affine %v)", ErrGrid, "ijk"[a:a+1], fmtVec(B, a), fmtAffine(A))
		}
		if src[axis[a]] != dst[a] {
			return nil, fmt.Errorf("%w: the series has %d voxels along its %s axis, the mask %d", ErrGrid, dst[a], "ijk"[a:a+1], src[axis[a]])
		}
	}
	// the series' first voxel must be the mask voxel it maps to
	var first [3]int
	for a := range 3 {
		if flip[a] {
			first[axis[a]] = dst[a] - 1
		}
	}
	for r := range 3 {
		w := A[r][3]
		for b := range 3 {
			w += A[r][b] * float64(first[b])
		}
		if math.Abs(w-B[r][3]) > tol {
			return nil, fmt.Errorf("%w: the series' first voxel lies at %.3f mm along axis %d, the mask's voxel there at %.3f mm", ErrGrid, B[r][3], r, w)
		}
	}
	out := make([]byte, len(labels))
	stride := [3]int{1, src[0], src[0] * src[1]}
	var step [3]int
	base := 0
	for a := range 3 {
		step[a] = stride[axis[a]]
		if flip[a] {
			base += (dst[a] - 1) * stride[axis[a]]
			step[a] = -step[a]
		}
	}
	i := 0
	for z := range dst[2] {
		for y := range dst[1] {
			o := base + z*step[2] + y*step[1]
			for range dst[0] {
				out[i] = labels[o]
				o += step[0]
				i++
			}
		}
	}
	return out, nil
}

// close3 reports whether column a of B equals sign times column b of A within tol.
func close3(B nifti.Affine, a int, A nifti.Affine, b int, sign, tol float64) bool {
	for r := range 3 {
		if math.Abs(B[r][a]-sign*A[r][b]) > tol {
			return false
		}
	}
	return true
}

func fmtVec(m nifti.Affine, c int) string {
	return fmt.Sprintf("(%.3f, %.3f, %.3f)", m[0][c], m[1][c], m[2][c])
}

func fmtAffine(m nifti.Affine) string {
	return fmt.Sprintf("i %s j %s k %s", fmtVec(m, 0), fmtVec(m, 1), fmtVec(m, 2))
}
