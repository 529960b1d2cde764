package phantom

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"voxpipe/io/nifti"
)

func TestHeader(t *testing.T) {
	t.Parallel()
	cases := []struct {
		p               Params
		spacing, slices float64
		version         int
	}{
		{Params{NX: 96, NY: 96, NZ: 64, Seed: 5}, 2.5, 3, 1},
		{Params{NX: 256, NY: 256, NZ: 256}, 0.9375, 1.125, 1},
		{Params{NX: 512, NY: 512, NZ: 1000}, 0.46875, 0.5625, 1},
		{Params{NX: 100, NY: 80, NZ: 7}, float64(float32(2.4)), float64(float32(float64(float32(2.4)) * 1.2)), 1},
		{Params{NX: 40000, NY: 2, NZ: 2}, float64(float32(0.006)), float64(float32(float64(float32(0.006)) * 1.2)), 2},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%dx%dx%d", c.p.NX, c.p.NY, c.p.NZ), func(t *testing.T) {
			h := NewHeader(c.p)
			if h.Version != c.version || h.Datatype != nifti.Int16 || h.BitPix != 16 || h.ByteOrder != binary.LittleEndian {
				t.Errorf("version %d datatype %d bitpix %d order %v", h.Version, h.Datatype, h.BitPix, h.ByteOrder)
			}
			if h.Dim != [8]int64{3, int64(c.p.NX), int64(c.p.NY), int64(c.p.NZ), 1, 1, 1, 1} {
				t.Errorf("dim %v", h.Dim)
			}
			if h.NX() != c.p.NX || h.NY() != c.p.NY || h.NZ() != c.p.NZ {
				t.Errorf("NX/NY/NZ %d %d %d", h.NX(), h.NY(), h.NZ())
			}
			if h.PixDim[1] != c.spacing || h.PixDim[2] != c.spacing || h.PixDim[3] != c.slices {
				t.Errorf("pixdim %v, want %g %g %g", h.PixDim[1:4], c.spacing, c.spacing, c.slices)
			}
			if h.XYZTUnits != 2|8 || h.QformCode != 1 || h.SformCode != 1 {
				t.Errorf("units %d qform %d sform %d", h.XYZTUnits, h.QformCode, h.SformCode)
			}
			if want := fmt.Sprintf("seed=%d", c.p.Seed); !strings.Contains(h.Descrip, want) || len(h.Descrip) > 80 {
				t.Errorf("descrip %q, want it to name %s in at most 80 bytes", h.Descrip, want)
			}
			q := qformMatrix(h)
			s := [3][4]float64{h.SrowX, h.SrowY, h.SrowZ}
			for i := range 3 {
				for j := range 4 {
					if math.Abs(q[i][j]-s[i][j]) > 1e-6*(1+math.Abs(s[i][j])) {
						t.Errorf("qform[%d][%d] = %g, sform %g", i, j, q[i][j], s[i][j])
					}
				}
			}
			// RAS: i, j, k increase towards right, anterior, superior; centred on the volume.
			for i := range 3 {
				if s[i][i] <= 0 {
					t.Errorf("axis %d is not RAS: %v", i, s[i])
				}
				centre := s[i][3] + s[i][i]*float64(h.Dim[i+1]-1)/2
				if math.Abs(centre) > 1e-3*(1+math.Abs(s[i][3])) {
					t.Errorf("axis %d: volume centre at %g mm, want 0", i, centre)
				}
			}
			for _, v := range append(h.PixDim[:], h.QoffsetX, h.QoffsetY, h.QoffsetZ) {
				if v != float64(float32(v)) {
					t.Errorf("%v is not float32-exact: a NIfTI-1 round trip would change it", v)
				}
			}
		})
	}
}

// qformMatrix is the NIfTI-1 method-2 affine (quaternion, pixdim, qfac, offsets).
func qformMatrix(h *nifti.Header) [3][4]float64 {
	b, c, d := h.QuaternB, h.QuaternC, h.QuaternD
	a := math.Sqrt(max(0, 1-b*b-c*c-d*d))
	r := [3][3]float64{
		{a*a + b*b - c*c - d*d, 2 * (b*c - a*d), 2 * (b*d + a*c)},
		{2 * (b*c + a*d), a*a + c*c - b*b - d*d, 2 * (c*d - a*b)},
		{2 * (b*d - a*c), 2 * (c*d + a*b), a*a + d*d - c*c - b*b},
	}
	qfac := 1.0
	if h.PixDim[0] < 0 {
		qfac = -1
	}
	scale := [3]float64{h.PixDim[1], h.PixDim[2], h.PixDim[3] * qfac}
	off := [3]float64{h.QoffsetX, h.QoffsetY, h.QoffsetZ}
	var m [3][4]float64
	for i := range 3 {
		for j := range 3 {
			m[i][j] = r[i][j] * scale[j]
		}
		m[i][3] = off[i]
	}
	return m
}
