// Package enginetest holds what the engines' tests share: the network computed straight from
// its specification in float64 (RefLogits), and volumes to run it on. It is imported by tests
// only.
package enginetest

import (
	"context"
	"math"
	"runtime"
	"sort"
	"sync"
	"testing"
	"voxpipe/engine/engine"
	"voxpipe/model"
	"voxpipe/phantom"
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
func RefLogits(m *model.Model, vol *model.Volume) [][]float64 {
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

func Argmax(l []float64) int {
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
func NearTie(l []float64, a, b int, eps float64) (gap float64, ok bool) {
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

// randomVolume makes a test volume: a smooth blob pattern plus noise, so the network sees
// structure at several scales, stored as int16 (with a slope, to exercise the folding) or float32.
func RandomVolume(nx, ny, nz int, seed uint64, asInt16 bool) *model.Volume {
	rng := model.SplitMix64{State: seed}
	vol := &model.Volume{NX: nx, NY: ny, NZ: nz}
	n := nx * ny * nz
	vals := make([]float64, n)
	cx, cy, cz := float64(nx)*rng.Float64(), float64(ny)*rng.Float64(), float64(nz)*rng.Float64()
	for z := range nz {
		for y := range ny {
			for x := range nx {
				r2 := (float64(x)-cx)*(float64(x)-cx) + (float64(y)-cy)*(float64(y)-cy) + (float64(z)-cz)*(float64(z)-cz)
				vals[(z*ny+y)*nx+x] = 800*math.Exp(-r2/20) + 300*math.Sin(float64(x+2*y)/3) + 200*(rng.Float64()-0.5) + 100
			}
		}
	}
	var st model.Stats
	slope, inter := 1.0, 0.0
	if asInt16 {
		slope, inter = 0.5, -20
		vol.I16 = make([]int16, n)
		for i, v := range vals {
			vol.I16[i] = int16(math.Round((v - inter) / slope))
		}
		st.AddInt16(vol.I16)
	} else {
		vol.F32 = make([]float32, n)
		for i, v := range vals {
			vol.F32[i] = float32(v)
		}
		st.AddFloat32(vol.F32)
	}
	vol.Norm = st.Norm(slope, inter)
	return vol
}

func SegmentWhole(t testing.TB, e engine.Engine, vol *model.Volume, slab int) []uint8 {
	t.Helper()
	out := make([]uint8, vol.NX*vol.NY*vol.NZ)
	if err := e.Segment(context.Background(), vol, out, engine.Options{Slab: slab}); err != nil {
		t.Fatalf("Segment: %v", err)
	}
	return out
}

// smoothVolume is a random-but-smooth int16 volume: a few random 3D waves and blobs plus noise,
// values like an MRI's (0..~3000).
func SmoothVolume(nx, ny, nz int, seed uint64) *model.Volume {
	rng := model.SplitMix64{State: seed}
	n := nx * ny * nz
	vol := &model.Volume{NX: nx, NY: ny, NZ: nz, I16: make([]int16, n)}
	type wave struct{ kx, ky, kz, ph, amp float64 }
	waves := make([]wave, 6)
	for i := range waves {
		waves[i] = wave{rng.Float64() * 0.08, rng.Float64() * 0.08, rng.Float64() * 0.05, rng.Float64() * 6.3, 150 + 250*rng.Float64()}
	}
	// Separable tables: sin(a+b+c) expanded would need products; instead sum per-axis terms and
	// pairwise products, enough structure at several scales.
	tx := make([][]float64, len(waves))
	ty := make([][]float64, len(waves))
	tz := make([][]float64, len(waves))
	for i, w := range waves {
		tx[i], ty[i], tz[i] = make([]float64, nx), make([]float64, ny), make([]float64, nz)
		for x := range nx {
			tx[i][x] = math.Sin(w.kx*float64(x) + w.ph)
		}
		for y := range ny {
			ty[i][y] = math.Cos(w.ky*float64(y) - w.ph)
		}
		for z := range nz {
			tz[i][z] = math.Sin(w.kz*float64(z) + 2*w.ph)
		}
	}
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for wkr := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := model.SplitMix64{State: seed ^ uint64(wkr+1)*0x9e3779b97f4a7c15}
			for z := wkr; z < nz; z += workers {
				for y := range ny {
					row := vol.I16[(z*ny+y)*nx : (z*ny+y+1)*nx]
					for x := range row {
						v := 1200.0
						for i, w := range waves {
							v += w.amp * tx[i][x] * ty[i][y] * tz[i][z]
						}
						v += 60 * (float64(r.Next()>>11)/(1<<53) - 0.5)
						row[x] = int16(max(0, min(v, 32767)))
					}
				}
			}
		}()
	}
	wg.Wait()
	var st model.Stats
	st.AddInt16(vol.I16)
	vol.Norm = st.Norm(1, 0)
	return vol
}

// phantomVolume generates phantom p and returns it with its int16 volume, normalised as the
// pipeline does.
func PhantomVolume(t *testing.T, p phantom.Params) (*phantom.Phantom, *model.Volume) {
	t.Helper()
	ph, err := phantom.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	var st model.Stats
	st.AddInt16(ph.Image)
	return ph, &model.Volume{NX: p.NX, NY: p.NY, NZ: p.NZ, I16: ph.Image, Norm: st.Norm(ph.Header.SclSlope, ph.Header.SclInter)}
}

// refLogitsAt is refLogits (reference_test.go) for the one voxel (z, y, x): the float64
// network on the neighbourhood it reads, e from x, s and g from e, then gate and head.
func RefLogitsAt(m *model.Model, vol *model.Volume, z, y, x int) []float64 {
	c, gw, k := m.Channels, m.Gate(), m.Classes
	xAt := func(z, y, x int) float64 {
		if z < 0 || z >= vol.NZ || y < 0 || y >= vol.NY || x < 0 || x >= vol.NX {
			return 0
		}
		i := (z*vol.NY+y)*vol.NX + x
		var v float32
		if vol.I16 != nil {
			v = float32(vol.I16[i])
		} else {
			v = vol.F32[i]
		}
		prod := v * vol.Norm.Scale // float32 multiply, rounded
		return float64(prod + vol.Norm.Shift)
	}
	eAt := func(ch, z, y, x int) float64 {
		if z < 0 || z >= vol.NZ || y < 0 || y >= vol.NY || x < 0 || x >= vol.NX {
			return 0
		}
		acc := float64(m.C1B[ch])
		for t := 0; t < 27; t++ {
			acc += float64(m.C1W[ch*27+t]) * xAt(z+t/9-1, y+t/3%3-1, x+t%3-1)
		}
		return math.Max(acc, 0)
	}
	// e on the 5x5x5 neighbourhood, [ch][dz][dy][dx] with offsets -2..2.
	var e [16][5][5][5]float64
	for ch := 0; ch < c; ch++ {
		for dz := 0; dz < 5; dz++ {
			for dy := 0; dy < 5; dy++ {
				for dx := 0; dx < 5; dx++ {
					e[ch][dz][dy][dx] = eAt(ch, z+dz-2, y+dy-2, x+dx-2)
				}
			}
		}
	}
	conv := func(w, b []float32, co, dil int) float64 {
		acc := float64(b[co])
		for ci := 0; ci < c; ci++ {
			for t := 0; t < 27; t++ {
				acc += float64(w[(co*c+ci)*27+t]) * e[ci][2+(t/9-1)*dil][2+(t/3%3-1)*dil][2+(t%3-1)*dil]
			}
		}
		return math.Max(acc, 0)
	}
	s, g := make([]float64, c), make([]float64, c)
	for co := 0; co < c; co++ {
		s[co], g[co] = conv(m.C2W, m.C2B, co, 1), conv(m.CGW, m.CGB, co, 2)
	}
	p := float64(m.PsiB[0])
	for j := 0; j < gw; j++ {
		ax, ag := float64(m.WXB[j]), float64(m.WGB[j])
		for ch := 0; ch < c; ch++ {
			ax += float64(m.WXW[j*c+ch]) * s[ch]
			ag += float64(m.WGW[j*c+ch]) * g[ch]
		}
		p += float64(m.PsiW[j]) * math.Max(ax+ag, 0)
	}
	a := 1 / (1 + math.Exp(-p))
	l := make([]float64, k)
	for kk := 0; kk < k; kk++ {
		acc := float64(m.HeadB[kk])
		for ch := 0; ch < c; ch++ {
			acc += float64(m.HeadW[kk*c+ch]) * (a*s[ch] + g[ch])
		}
		l[kk] = acc
	}
	return l
}
