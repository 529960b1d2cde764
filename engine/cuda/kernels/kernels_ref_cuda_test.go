//go:build cuda

package kernels

import (
	"math"
	"testing"

	"gorgonia.org/cu"
)

// Float64 references of the kernels and the checks of their outputs against them, for
// kernels_cuda_test.go.

// uploadStored copies vals to a new device buffer as int16 or float32 stored values.
func uploadStored(t *testing.T, vals []float64, asInt16 bool) cu.DevicePtr {
	t.Helper()
	if asInt16 {
		v := make([]int16, len(vals))
		for i := range v {
			v[i] = int16(vals[i])
		}
		in := alloc(t, int64(2*len(v)))
		put(t, in, v)
		return in
	}
	v := make([]float32, len(vals))
	for i := range v {
		v[i] = float32(vals[i])
	}
	in := alloc(t, int64(4*len(v)))
	put(t, in, v)
	return in
}

// conv1Geom is a conv1 launch's slab: e planes [0, nzE) are global z zE0+p, of ePlanes.
type conv1Geom struct{ nx, ny, nz, zE0, nzE, ePlanes int }

// checkConv1 compares conv1's e (got, [Channels][ePlanes][ny][nx]) with the float64 reference
// from x (normalised input by global z, y, x; 0 outside the volume): planes beyond nzE must be
// untouched (NaN), channels c.. and planes outside the volume 0. It returns the largest relative
// error.
func checkConv1(t *testing.T, asInt16 bool, got []float32, w *Weights, c int, g conv1Geom, x func(z, y, xx int) float64) float64 {
	t.Helper()
	plane := g.nx * g.ny
	var maxErr float64
	for co := 0; co < Channels; co++ {
		for p := 0; p < g.ePlanes; p++ {
			for y := 0; y < g.ny; y++ {
				for xx := 0; xx < g.nx; xx++ {
					v := got[(co*g.ePlanes+p)*plane+y*g.nx+xx]
					if p >= g.nzE {
						if !math.IsNaN(float64(v)) {
							t.Fatalf("int16=%v: e plane %d (beyond nzE) written: %g", asInt16, p, v)
						}
						continue
					}
					z := g.zE0 + p
					want := 0.0
					if co < c && z >= 0 && z < g.nz {
						acc := float64(w.C1B[co])
						for dz := 0; dz < 3; dz++ {
							for dy := 0; dy < 3; dy++ {
								for dx := 0; dx < 3; dx++ {
									acc += float64(w.C1W[co*27+(dz*3+dy)*3+dx]) * x(z+dz-1, y+dy-1, xx+dx-1)
								}
							}
						}
						want = math.Max(acc, 0)
					}
					if err := relErr(v, want); err > 1e-5 || math.IsNaN(float64(v)) {
						t.Fatalf("int16=%v: e[%d] plane %d y %d x %d = %g, want %g", asInt16, co, p, y, xx, v, want)
					} else {
						maxErr = math.Max(maxErr, err)
					}
				}
			}
		}
	}
	return maxErr
}

// convCCGeom is a conv2/convg launch's sizes: e has ePlanes planes, the output oPlanes, of which
// the first nzOut are computed.
type convCCGeom struct{ nx, ny, ePlanes, nzOut, oPlanes int }

// checkConvCC compares a conv's output (got, [Channels][oPlanes][ny][nx]) with the float64
// reference from e (ev) with weights w, b of c channels and dilation dil: planes beyond nzOut
// must be untouched (NaN). It returns the largest relative error.
func checkConvCC(t *testing.T, name string, got, ev, w, b []float32, c, dil int, g convCCGeom) float64 {
	t.Helper()
	plane := g.nx * g.ny
	at := func(ci, p, y, x int) float64 {
		if y < 0 || y >= g.ny || x < 0 || x >= g.nx {
			return 0
		}
		return float64(ev[(ci*g.ePlanes+p)*plane+y*g.nx+x])
	}
	var maxErr float64
	for co := 0; co < Channels; co++ {
		for o := 0; o < g.oPlanes; o++ {
			for y := 0; y < g.ny; y++ {
				for x := 0; x < g.nx; x++ {
					v := got[(co*g.oPlanes+o)*plane+y*g.nx+x]
					if o >= g.nzOut {
						if !math.IsNaN(float64(v)) {
							t.Fatalf("%s: plane %d beyond nzOut written", name, o)
						}
						continue
					}
					acc := float64(b[co])
					for ci := 0; ci < c; ci++ {
						for dz := 0; dz < 3; dz++ {
							for dy := 0; dy < 3; dy++ {
								for dx := 0; dx < 3; dx++ {
									acc += float64(w[(co*c+ci)*27+(dz*3+dy)*3+dx]) *
										at(ci, o+2+(dz-1)*dil, y+(dy-1)*dil, x+(dx-1)*dil)
								}
							}
						}
					}
					want := math.Max(acc, 0)
					if err := relErr(v, want); err > 1e-4 || math.IsNaN(float64(v)) {
						t.Fatalf("%s: out[%d] plane %d y %d x %d = %g, want %g", name, co, o, y, x, v, want)
					} else {
						maxErr = math.Max(maxErr, err)
					}
				}
			}
		}
	}
	return maxErr
}

// confTally is the confidence of gate_head's labels from the float64 logits: foreground voxels,
// margin units (each within one unit of the kernel's float32 margin), low-margin voxels, those
// near a unit's edge, labels per class, and the labels that differ at near-ties.
type confTally struct {
	fg, margin, low, near uint64
	labels                []uint64
	ties                  int
}

// addMargin counts a sampled foreground voxel's margin: its logits l, best the top class.
func (c *confTally) addMargin(l []float64, best int) {
	second := math.Inf(-1)
	for kk, v := range l {
		if kk != best {
			second = math.Max(second, v)
		}
	}
	u := math.Min(math.Floor((l[best]-second)*MarginScale), MarginCapUnits)
	c.fg, c.margin = c.fg+1, c.margin+uint64(u)
	if u < LowMarginUnits {
		c.low++
	}
	if f := (l[best] - second) * MarginScale; f-math.Floor(f) < 1e-3 || math.Ceil(f)-f < 1e-3 || math.Abs(l[best]-second-1) < 1e-4 {
		c.near++
	}
}

// gateHeadRef is the float64 reference of gate, head and argmax for one voxel whose s and g
// channels are s(ch), g(ch): the k logits and the top class (the lowest on ties).
func gateHeadRef(w *Weights, c, k int, s, g func(ch int) float64) (l []float64, best int) {
	p := float64(w.PsiB[0])
	for j := 0; j < c/2; j++ {
		ax, ag := float64(w.WXB[j]), float64(w.WGB[j])
		for ch := 0; ch < c; ch++ {
			ax += float64(w.WXW[j*c+ch]) * s(ch)
			ag += float64(w.WGW[j*c+ch]) * g(ch)
		}
		p += float64(w.PsiW[j]) * math.Max(ax+ag, 0)
	}
	a := 1 / (1 + math.Exp(-p))
	l = make([]float64, k)
	for kk := 0; kk < k; kk++ {
		acc := float64(w.HeadB[kk])
		for ch := 0; ch < c; ch++ {
			acc += float64(w.HeadW[kk*c+ch]) * (a*s(ch) + g(ch))
		}
		l[kk] = acc
		if acc > l[best] {
			best = kk
		}
	}
	return l, best
}

// checkConfidence compares the kernels' confidence counters with the reference tally of k
// classes: the label counts exactly, the margins within what near-ties and unit edges allow.
func checkConfidence(t *testing.T, gotConf []uint64, ref *confTally, k int) {
	t.Helper()
	tol := ref.near + uint64(ref.ties)*LowMarginUnits
	if d := int64(gotConf[ConfForeground]) - int64(ref.fg); d*d > int64(ref.ties*ref.ties) {
		t.Errorf("gate_head: %d foreground voxels, reference %d", gotConf[ConfForeground], ref.fg)
	}
	if d := int64(gotConf[ConfMargin]) - int64(ref.margin); uint64(max(d, -d)) > tol {
		t.Errorf("gate_head: margin units %d, reference %d", gotConf[ConfMargin], ref.margin)
	}
	if d := int64(gotConf[ConfLow]) - int64(ref.low); uint64(max(d, -d)) > ref.near+uint64(ref.ties) {
		t.Errorf("gate_head: %d low-margin voxels, reference %d", gotConf[ConfLow], ref.low)
	}
	for kk := range MaxClasses {
		want := uint64(0)
		if kk < k {
			want = ref.labels[kk]
		}
		if gotConf[ConfLabels+kk] != want {
			t.Errorf("count_confidence: class %d: %d voxels, the labels have %d", kk, gotConf[ConfLabels+kk], want)
		}
	}
}
