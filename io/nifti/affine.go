package nifti

import "math"

// Affine maps voxel indices (i, j, k, 1) to world millimetres (x, y, z, 1) in the NIfTI RAS+
// frame. Row 3 is always (0, 0, 0, 1).
type Affine [4][4]float64

// Affine is the header's voxel-to-world transform, chosen as nibabel and the NIfTI-1 standard
// do: the sform when sform_code > 0, else the qform (method 2) when qform_code > 0, else the
// pixdim scaling alone (method 1, "analyze" orientation).
func (h *Header) Affine() Affine {
	switch {
	case h.SformCode > 0:
		return Affine{h.SrowX, h.SrowY, h.SrowZ, {0, 0, 0, 1}}
	case h.QformCode > 0:
		return h.QformAffine()
	default:
		return Affine{
			{pixdimOr1(h.PixDim[1]), 0, 0, 0},
			{0, pixdimOr1(h.PixDim[2]), 0, 0},
			{0, 0, pixdimOr1(h.PixDim[3]), 0},
			{0, 0, 0, 1},
		}
	}
}

// QformAffine is the transform the quaternion fields describe (NIfTI-1 method 2), whatever
// qform_code says.
func (h *Header) QformAffine() Affine {
	b, c, d := h.QuaternB, h.QuaternC, h.QuaternD
	a := 1 - (b*b + c*c + d*d)
	if a < 1e-7 { // rounding: the standard's own fix-up (nifti1_io.c)
		n := 1 / math.Sqrt(b*b+c*c+d*d)
		b, c, d, a = b*n, c*n, d*n, 0
	} else {
		a = math.Sqrt(a)
	}
	qfac := 1.0
	if h.PixDim[0] < 0 {
		qfac = -1
	}
	dx, dy, dz := pixdimOr1(h.PixDim[1]), pixdimOr1(h.PixDim[2]), pixdimOr1(h.PixDim[3])*qfac
	return Affine{
		{(a*a + b*b - c*c - d*d) * dx, 2 * (b*c - a*d) * dy, 2 * (b*d + a*c) * dz, h.QoffsetX},
		{2 * (b*c + a*d) * dx, (a*a + c*c - b*b - d*d) * dy, 2 * (c*d - a*b) * dz, h.QoffsetY},
		{2 * (b*d - a*c) * dx, 2 * (c*d + a*b) * dy, (a*a + d*d - c*c - b*b) * dz, h.QoffsetZ},
		{0, 0, 0, 1},
	}
}

// pixdimOr1 is the standard's reading of a voxel size: zero (unset) counts as 1, and the sign
// is dropped.
func pixdimOr1(v float64) float64 {
	if v == 0 || math.IsNaN(v) {
		return 1
	}
	return math.Abs(v)
}

// VoxelSizes are the lengths of the affine's first three columns: the voxel's extent along i,
// j and k in mm.
func (a Affine) VoxelSizes() [3]float64 {
	var s [3]float64
	for c := range 3 {
		s[c] = math.Sqrt(a[0][c]*a[0][c] + a[1][c]*a[1][c] + a[2][c]*a[2][c])
	}
	return s
}

// MMPerUnit is how many millimetres one spatial unit of the header is (xyzt_units): 1000 for
// metres, 0.001 for micrometres, 1 for mm and for unknown (0), which the standard leaves to the
// reader and every common tool reads as mm.
func (h *Header) MMPerUnit() float64 {
	switch h.XYZTUnits & 7 {
	case 1:
		return 1000
	case 3:
		return 0.001
	default:
		return 1
	}
}

// SetAffine stores a as both the sform and the qform, with the given code (1: scanner
// coordinates), and sets pixdim[1..3] to its voxel sizes and qfac (pixdim[0]) to its
// handedness, as nifti1_io's nifti_mat44_to_quatern does. The qform can only hold a rotation:
// a's columns are taken as orthogonal (true of affines built from DICOM direction cosines).
func (h *Header) SetAffine(a Affine, code int32) {
	h.SformCode, h.QformCode = code, code
	h.SrowX, h.SrowY, h.SrowZ = a[0], a[1], a[2]
	h.QoffsetX, h.QoffsetY, h.QoffsetZ = a[0][3], a[1][3], a[2][3]
	var r [3][3]float64
	size := a.VoxelSizes()
	for c := range 3 {
		if size[c] == 0 {
			size[c] = 1
		}
		for i := range 3 {
			r[i][c] = a[i][c] / size[c]
		}
	}
	det := r[0][0]*(r[1][1]*r[2][2]-r[1][2]*r[2][1]) - r[0][1]*(r[1][0]*r[2][2]-r[1][2]*r[2][0]) + r[0][2]*(r[1][0]*r[2][1]-r[1][1]*r[2][0])
	qfac := 1.0
	if det < 0 {
		qfac = -1
		for i := range 3 {
			r[i][2] = -r[i][2]
		}
	}
	var qa, qb, qc, qd float64
	if t := r[0][0] + r[1][1] + r[2][2] + 1; t > 0.5 {
		qa = 0.5 * math.Sqrt(t)
		qb, qc, qd = 0.25*(r[2][1]-r[1][2])/qa, 0.25*(r[0][2]-r[2][0])/qa, 0.25*(r[1][0]-r[0][1])/qa
	} else if xd, yd := 1+r[0][0]-(r[1][1]+r[2][2]), 1+r[1][1]-(r[0][0]+r[2][2]); xd > 1 {
		qb = 0.5 * math.Sqrt(xd)
		qc, qd, qa = 0.25*(r[0][1]+r[1][0])/qb, 0.25*(r[0][2]+r[2][0])/qb, 0.25*(r[2][1]-r[1][2])/qb
	} else if yd > 1 {
		qc = 0.5 * math.Sqrt(yd)
		qb, qd, qa = 0.25*(r[0][1]+r[1][0])/qc, 0.25*(r[1][2]+r[2][1])/qc, 0.25*(r[0][2]-r[2][0])/qc
	} else {
		qd = 0.5 * math.Sqrt(1+r[2][2]-(r[0][0]+r[1][1]))
		qb, qc, qa = 0.25*(r[0][2]+r[2][0])/qd, 0.25*(r[1][2]+r[2][1])/qd, 0.25*(r[1][0]-r[0][1])/qd
	}
	if qa < 0 {
		qb, qc, qd = -qb, -qc, -qd
	}
	h.QuaternB, h.QuaternC, h.QuaternD = qb, qc, qd
	h.PixDim[0], h.PixDim[1], h.PixDim[2], h.PixDim[3] = qfac, size[0], size[1], size[2]
}
