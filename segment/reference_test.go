package segment

import (
	"math"
	"sort"
)

// This file is the independent check of the engines: the network computed straight from the
// specification in model.go, in float64, one voxel at a time, with the PyTorch weight layouts
// indexed directly (no transposes, no padded buffers). Only x is computed in float32, exactly as
// the specification defines it.

type refVolume struct {
	nx, ny, nz int
	c          int
	data       []float64 // [channel][z][y][x]
}

func (v *refVolume) at(ch, z, y, x int) float64 {
	if z < 0 || z >= v.nz || y < 0 || y >= v.ny || x < 0 || x >= v.nx {
		return 0 // each convolution's own zero padding
	}
	return v.data[((ch*v.nz+z)*v.ny+y)*v.nx+x]
}

func (v *refVolume) set(ch, z, y, x int, val float64) {
	v.data[((ch*v.nz+z)*v.ny+y)*v.nx+x] = val
}

func newRefVolume(nx, ny, nz, c int) *refVolume {
	return &refVolume{nx: nx, ny: ny, nz: nz, c: c, data: make([]float64, c*nx*ny*nz)}
}

// refConv3 is a 3x3x3 convolution with the given dilation and zero padding = dilation, then ReLU.
func refConv3(in *refVolume, w, b []float32, cout, dil int) *refVolume {
	out := newRefVolume(in.nx, in.ny, in.nz, cout)
	for co := 0; co < cout; co++ {
		for z := 0; z < in.nz; z++ {
			for y := 0; y < in.ny; y++ {
				for x := 0; x < in.nx; x++ {
					acc := float64(b[co])
					for ci := 0; ci < in.c; ci++ {
						for dz := 0; dz < 3; dz++ {
							for dy := 0; dy < 3; dy++ {
								for dx := 0; dx < 3; dx++ {
									wv := w[(((co*in.c+ci)*3+dz)*3+dy)*3+dx]
									acc += float64(wv) * in.at(ci, z+(dz-1)*dil, y+(dy-1)*dil, x+(dx-1)*dil)
								}
							}
						}
					}
					out.set(co, z, y, x, math.Max(acc, 0))
				}
			}
		}
	}
	return out
}

// refLogits returns the float64 logits [voxel][class] of the whole volume.
func refLogits(m *Model, vol *Volume) [][]float64 {
	nx, ny, nz := vol.NX, vol.NY, vol.NZ
	x := newRefVolume(nx, ny, nz, 1)
	for i := range x.data {
		var v float32
		if vol.I16 != nil {
			v = float32(vol.I16[i])
		} else {
			v = vol.F32[i]
		}
		prod := v * vol.Norm.Scale // float32 multiply, rounded
		x.data[i] = float64(prod + vol.Norm.Shift)
	}
	c, g, k := m.Channels, m.Gate(), m.Classes
	e := refConv3(x, m.C1W, m.C1B, c, 1)
	s := refConv3(e, m.C2W, m.C2B, c, 1)
	gg := refConv3(e, m.CGW, m.CGB, c, 2)
	n := nx * ny * nz
	logits := make([][]float64, n)
	for i := 0; i < n; i++ {
		p := float64(m.PsiB[0])
		for j := 0; j < g; j++ {
			ax, ag := float64(m.WXB[j]), float64(m.WGB[j])
			for ch := 0; ch < c; ch++ {
				ax += float64(m.WXW[j*c+ch]) * s.data[ch*n+i]
				ag += float64(m.WGW[j*c+ch]) * gg.data[ch*n+i]
			}
			p += float64(m.PsiW[j]) * math.Max(ax+ag, 0)
		}
		a := 1 / (1 + math.Exp(-p))
		l := make([]float64, k)
		for kk := 0; kk < k; kk++ {
			acc := float64(m.HeadB[kk])
			for ch := 0; ch < c; ch++ {
				f := a*s.data[ch*n+i] + gg.data[ch*n+i]
				acc += float64(m.HeadW[kk*c+ch]) * f
			}
			l[kk] = acc
		}
		logits[i] = l
	}
	return logits
}

func argmax(l []float64) int {
	best := 0
	for k := range l {
		if l[k] > l[best] {
			best = k
		}
	}
	return best
}

// nearTie reports whether labels a and b are both within eps (relative to the logits' scale) of
// the best float64 logit, i.e. float32 rounding may legitimately pick either.
func nearTie(l []float64, a, b int, eps float64) (gap float64, ok bool) {
	sorted := append([]float64(nil), l...)
	sort.Float64s(sorted)
	scale := 1.0
	for _, v := range l {
		scale = math.Max(scale, math.Abs(v))
	}
	top := sorted[len(sorted)-1]
	gap = math.Max(top-l[a], top-l[b]) / scale
	return gap, gap <= eps
}
