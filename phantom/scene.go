package phantom

import "math"

// Partial-volume transitions are smoothsteps over [-pvHalf, pvHalf] voxels; the cortical rim's
// inner edge over [-rimHalf, rimHalf].
const (
	pvHalf  = 1.0
	rimHalf = 0.75
)

// field is a smooth scalar field: a linear gradient plus plane waves a*cos(k.p + phase) in
// arbitrary directions. cos(kx*x + theta) = cos(kx*x)cos(theta) - sin(kx*x)sin(theta), with
// theta = ky*y + kz*z + phase fixed along a row, so a voxel costs two multiply-adds per wave
// with per-x tables and per-row coefficients.
type field struct {
	waves    []wave // k in radians per voxel
	xc, xs   []float64
	gradient [3]float64 // per voxel, about the volume's centre
	centre   [3]float64
}

func newField(nx, ny, nz int, gradient [3]float64, waves []wave) field {
	f := field{waves: waves, gradient: gradient}
	f.centre = [3]float64{float64(nx-1) / 2, float64(ny-1) / 2, float64(nz-1) / 2}
	k := len(waves)
	f.xc, f.xs = make([]float64, nx*k), make([]float64, nx*k)
	for x := range nx {
		for t, w := range waves {
			f.xc[x*k+t] = math.Cos(w.k[0] * float64(x))
			f.xs[x*k+t] = math.Sin(w.k[0] * float64(x))
		}
	}
	return f
}

// coefLen is the length of the row coefficients of f.
func (f *field) coefLen() int { return 2*len(f.waves) + 1 }

// rowCoef writes the coefficients of row (y, z) into coef: amp*cos(theta), amp*sin(theta)
// per wave, then the gradient's value at x = centre.
func (f *field) rowCoef(y, z int, coef []float64) {
	fy, fz := float64(y), float64(z)
	for t, w := range f.waves {
		theta := w.k[1]*fy + w.k[2]*fz + w.phase
		coef[2*t] = w.amp * math.Cos(theta)
		coef[2*t+1] = w.amp * math.Sin(theta)
	}
	coef[2*len(f.waves)] = f.gradient[1]*(fy-f.centre[1]) + f.gradient[2]*(fz-f.centre[2])
}

func (f *field) at(x int, coef []float64) float64 {
	k := len(f.waves)
	xc, xs := f.xc[x*k:x*k+k], f.xs[x*k:x*k+k]
	s := coef[2*k] + f.gradient[0]*(float64(x)-f.centre[0])
	for t := range xc {
		s += coef[2*t]*xc[t] - coef[2*t+1]*xs[t]
	}
	return s
}

// planeWaves draws n waves in random directions, wavelengths in [lo, hi] (in units scaled
// per axis by unit: voxels, or fractions of the volume's extent) and amplitudes in
// [aLo, aHi].
func planeWaves(s *stream, n int, lo, hi float64, unit [3]float64, aLo, aHi float64) []wave {
	ws := make([]wave, n)
	for i := range ws {
		d := s.unit()
		k := 2 * math.Pi / s.uniform(lo, hi)
		ws[i] = wave{
			k:     [3]float64{k * d[0] / unit[0], k * d[1] / unit[1], k * d[2] / unit[2]},
			amp:   s.uniform(aLo, aHi),
			phase: s.uniform(0, 2*math.Pi),
		}
	}
	return ws
}

// scene is everything drawn from the seed before rendering. Rendering reads it only.
type scene struct {
	nx, ny, nz int
	noiseKey   uint64

	head    blob
	fluids  []blob // ventricles and cysts
	lesions []blob

	base       float64 // tissue intensity before bias and texture
	fluidLevel float64 // fluid intensity relative to base
	sigma      float64 // Rician noise level
	rimDepth   float64 // voxels of darker cortex-like tissue under the head surface
	rimDrop    float64 // its relative darkening
	headInner  float64 // how deep under the head surface its distance must be known

	bias    field // log of the multiplicative bias field
	texture field // relative tissue texture
}

// sizeScale is the volume's linear size relative to the 96x96x64 fixtures.
func sizeScale(nx, ny, nz int) float64 {
	return math.Cbrt(float64(nx) * float64(ny) * float64(nz) / (96 * 96 * 64))
}

// newScene draws the scene from p.Seed. Each step draws from its own stream, so the steps
// do not change each other's draws.
func newScene(p Params) *scene {
	s := sizeScale(p.NX, p.NY, p.NZ)
	sc := &scene{nx: p.NX, ny: p.NY, nz: p.NZ, noiseKey: newStream(p.Seed, tagNoise).next()}
	n := [3]float64{float64(p.NX), float64(p.NY), float64(p.NZ)}
	sc.drawLevels(p.Seed)
	h := sc.drawHead(p.Seed, n)
	sc.drawVentricles(p.Seed, h)
	sc.drawSpots(p.Seed, h, s)
	sc.drawFields(p, n, s)
	return sc
}

// drawLevels draws the intensities: tissue, fluid, noise and the rim's darkening.
func (sc *scene) drawLevels(seed uint64) {
	lv := newStream(seed, tagLevels)
	sc.base = lv.uniform(900, 1100)
	sc.fluidLevel = lv.uniform(0.25, 0.4)
	sc.sigma = sc.base * lv.uniform(0.035, 0.06)
	sc.rimDrop = lv.uniform(0.10, 0.18)
}

// headFrame is the head's normalised frame: centre c, semi-axes a and rotation r in voxels.
type headFrame struct {
	c, a [3]float64
	r    [3][3]float64
}

// at maps a point given in the head's normalised frame to voxels.
func (h headFrame) at(u [3]float64) [3]float64 {
	v := h.c
	for i := range 3 {
		for j := range 3 {
			v[i] += h.r[i][j] * u[j] * h.a[j]
		}
	}
	return v
}

// scaled is the semi-axes w, given as fractions of the head's, in voxels, times f.
func (h headFrame) scaled(w [3]float64, f float64) [3]float64 {
	return [3]float64{w[0] * h.a[0] * f, w[1] * h.a[1] * f, w[2] * h.a[2] * f}
}

// matMul is the matrix product a b.
func matMul(a, b [3][3]float64) (c [3][3]float64) {
	for i := range 3 {
		for j := range 3 {
			for k := range 3 {
				c[i][j] += a[i][k] * b[k][j]
			}
		}
	}
	return c
}

// drawHead draws the head (an ellipsoid, slightly off centre and rotated, with a wobbly
// surface) in the n[0] x n[1] x n[2] grid, and its cortex-like rim.
func (sc *scene) drawHead(seed uint64, n [3]float64) headFrame {
	hs := newStream(seed, tagHead)
	ha := [3]float64{n[0] * hs.uniform(0.37, 0.41), n[1] * hs.uniform(0.40, 0.44), n[2] * hs.uniform(0.38, 0.42)}
	hc := [3]float64{}
	for i := range hc {
		hc[i] = (n[i]-1)/2 + n[i]*hs.uniform(-0.015, 0.015)
	}
	yaw, pitch, roll := hs.uniform(-0.12, 0.12), hs.uniform(-0.08, 0.08), hs.uniform(-0.06, 0.06)
	headWaves := randomWaves(hs, 5, 0.04, 1.5, 4)
	hr := fittingRotation(ha, hc, n, 1.04, yaw, pitch, roll)
	sc.rimDepth = hs.uniform(0.05, 0.07) * (ha[0] + ha[1] + ha[2]) / 3
	sc.headInner = max(sc.rimDepth+rimHalf, pvHalf)
	sc.head = newBlob(hc, ha, hr, 0, headWaves, pvHalf)
	return headFrame{c: hc, a: ha, r: hr}
}

// drawVentricles draws two curved lateral ventricles (a butterfly in axial slices), a thin
// third, a small fourth; all in the head's frame, enlarged together by a random factor.
func (sc *scene) drawVentricles(seed uint64, h headFrame) {
	fs := newStream(seed, tagFluid)
	enlarge := fs.uniform(0.9, 1.35)
	sep := fs.uniform(0.10, 0.14)
	for _, side := range []float64{-1, 1} {
		off := [3]float64{side * sep, fs.uniform(-0.02, 0.06), fs.uniform(0.10, 0.18)}
		w := [3]float64{fs.uniform(0.10, 0.13), fs.uniform(0.30, 0.36), fs.uniform(0.16, 0.22)}
		r := matMul(h.r, rotation(side*fs.uniform(0.10, 0.22), 0, 0))
		bend := fs.uniform(0.2, 0.35)
		sc.fluids = append(sc.fluids, newBlob(h.at(off), h.scaled(w, enlarge), r, bend,
			randomWaves(fs, 3, 0.08, 2, 5), pvHalf))
	}
	third := [3]float64{fs.uniform(0.035, 0.045), fs.uniform(0.14, 0.18), fs.uniform(0.12, 0.16)}
	sc.fluids = append(sc.fluids, newBlob(h.at([3]float64{0, fs.uniform(-0.05, 0), fs.uniform(-0.02, 0.04)}),
		h.scaled(third, enlarge), h.r, 0, nil, pvHalf))
	fourth := [3]float64{fs.uniform(0.07, 0.09), fs.uniform(0.04, 0.06), fs.uniform(0.06, 0.08)}
	sc.fluids = append(sc.fluids, newBlob(h.at([3]float64{0, fs.uniform(-0.38, -0.32), fs.uniform(-0.38, -0.30)}),
		h.scaled(fourth, enlarge), h.r, 0, nil, pvHalf))
	for i := range sc.fluids {
		sc.fluids[i].level = sc.fluidLevel
	}
}

// drawSpots draws the lesions (bright) and cysts (dark, fluid): small blobs inside the
// tissue, apart from the ventricles and each other. Radii are 2-6 voxels, as the issue
// specifies lesions, at any volume size (s: sizeScale); bigger volumes get more of them,
// small volumes fewer and smaller.
func (sc *scene) drawSpots(seed uint64, h headFrame, s float64) {
	ls := newStream(seed, tagLesion)
	rmax := 6.0
	if s < 1 {
		rmax = max(3, 6*s)
	}
	nLesions := min(1000, max(1, int(math.Round(float64(ls.intn(6, 10))*s*s))))
	nCysts := ls.intn(0, 2) + int(s/2)
	placed := make([]blob, 0, nLesions+nCysts)
	for range nLesions {
		if b, ok := sc.placeSpot(ls, h, placed, 2, max(2, rmax)); ok {
			b.level = ls.uniform(1.4, 1.8)
			placed = append(placed, b)
			sc.lesions = append(sc.lesions, b)
		}
	}
	for range nCysts {
		if b, ok := sc.placeSpot(ls, h, placed, 2, 4*math.Sqrt(max(s, 1))); ok {
			b.level = sc.fluidLevel
			placed = append(placed, b)
			sc.fluids = append(sc.fluids, b)
		}
	}
}

// placeSpot draws a blob of radius in [rlo, rhi] and up to 60 places for it in the head; it
// reports false when none was clear of the head's surface, the fluids and the placed blobs.
func (sc *scene) placeSpot(ls *stream, h headFrame, placed []blob, rlo, rhi float64) (blob, bool) {
	r := ls.logUniform(rlo, rhi)
	a := [3]float64{r * ls.uniform(0.8, 1.25), r * ls.uniform(0.8, 1.25), r * ls.uniform(0.8, 1.25)}
	rot := rotation(ls.uniform(0, 2*math.Pi), ls.uniform(-math.Pi/2, math.Pi/2), ls.uniform(0, 2*math.Pi))
	b := newBlob([3]float64{}, a, rot, 0, randomWaves(ls, 3, 0.12, 2, 4), pvHalf)
	for range 60 {
		d := ls.unit()
		rr := 0.8 * math.Cbrt(ls.float())
		b.c = h.at([3]float64{d[0] * rr, d[1] * rr, d[2] * rr})
		if !b.clearOf(&sc.head, true) {
			continue
		}
		ok := true
		for i := range sc.fluids {
			ok = ok && b.clearOf(&sc.fluids[i], false)
		}
		for i := range placed {
			ok = ok && b.clearOf(&placed[i], false)
		}
		if ok {
			return b, true
		}
	}
	return b, false
}

// drawFields draws the bias: a gradient of up to +-15% from the centre to each face plus four
// slow waves (wavelengths 1.2-2.5 times the volume), about +-30% in all; and the texture: ten
// faster waves of a few percent (wavelengths 5-16 voxels, longer in big volumes), standing in
// for the structure of grey and white matter. The log-bias stays within +-0.85 (expSmall
// needs 1).
func (sc *scene) drawFields(p Params, n [3]float64, s float64) {
	fl := newStream(p.Seed, tagFields)
	var gradient [3]float64
	for i := range gradient {
		gradient[i] = fl.uniform(-0.3, 0.3) / n[i]
	}
	sc.bias = newField(p.NX, p.NY, p.NZ, gradient, planeWaves(fl, 4, 1.2, 2.5, n, 0.05, 0.1))
	wl := math.Sqrt(max(s, 1))
	sc.texture = newField(p.NX, p.NY, p.NZ, [3]float64{}, planeWaves(fl, 10, 5*wl, 16*wl, [3]float64{1, 1, 1}, 0.02, 0.035))
}

// clearOf reports whether b stays apart from o: inside it (with margin) when inside is set,
// otherwise outside it. Distances are the conservative estimates of blob.dist.
func (b *blob) clearOf(o *blob, inside bool) bool {
	margin := b.reach + 1
	d := o.dist(b.c[0], b.c[1], b.c[2], math.Inf(1), math.Inf(1))
	if inside {
		return d <= -margin
	}
	return d >= margin
}

// fittingRotation returns the rotation by (yaw, pitch, roll), damped until the ellipsoid
// (semi-axes a scaled by grow, centre c) fits in the n[0] x n[1] x n[2] grid: rotating a
// long axis into a short one would otherwise cut the head off at the volume's edge.
func fittingRotation(a, c, n [3]float64, grow, yaw, pitch, roll float64) [3][3]float64 {
	for range 12 {
		r := rotation(yaw, pitch, roll)
		fits := true
		for i := range 3 {
			e := 0.0
			for j := range 3 {
				e += r[i][j] * r[i][j] * a[j] * a[j]
			}
			e = math.Sqrt(e) * grow
			fits = fits && c[i]-e >= 0 && c[i]+e <= n[i]-1
		}
		if fits {
			return r
		}
		yaw, pitch, roll = yaw*0.6, pitch*0.6, roll*0.6
	}
	return rotation(0, 0, 0)
}
