package phantom

import "math"

// wave is one term of a blob's surface wobble: amp*cos(k·dir + phase) over the unit
// direction dir from the blob's centre (in its normalised frame).
type wave struct {
	k          [3]float64
	amp, phase float64
}

// blob is a perturbed, optionally bent ellipsoid in voxel coordinates. Every shape of the
// phantom (head, ventricles, cysts, lesions) is one.
type blob struct {
	c      [3]float64    // centre, voxels
	m      [3][3]float64 // voxel offset -> normalised frame: diag(1/semi-axes) * R^T
	bend   float64       // u.z += bend*u.y^2 in the normalised frame (curved ventricles)
	waves  []wave
	wobMax float64 // sum of |amp|: the surface lies at rho in [1-wobMax, 1+wobMax]
	amin   float64 // smallest semi-axis: |grad rho| <= 1/amin when unbent
	reach  float64 // bounding radius in voxels, including the partial-volume band
	level  float64 // intensity relative to the tissue base (fluid and lesions)
}

// rotation returns Rz(yaw)*Ry(pitch)*Rx(roll).
func rotation(yaw, pitch, roll float64) [3][3]float64 {
	cy, sy := math.Cos(yaw), math.Sin(yaw)
	cp, sp := math.Cos(pitch), math.Sin(pitch)
	cr, sr := math.Cos(roll), math.Sin(roll)
	return [3][3]float64{
		{cy * cp, cy*sp*sr - sy*cr, cy*sp*cr + sy*sr},
		{sy * cp, sy*sp*sr + cy*cr, sy*sp*cr - cy*sr},
		{-sp, cp * sr, cp * cr},
	}
}

// newBlob builds a blob with semi-axes a (voxels) rotated by r about centre c.
func newBlob(c, a [3]float64, r [3][3]float64, bend float64, waves []wave, band float64) blob {
	b := blob{c: c, bend: bend, waves: waves}
	for i := range 3 {
		for j := range 3 {
			b.m[i][j] = r[j][i] / a[i]
		}
	}
	for _, w := range waves {
		b.wobMax += math.Abs(w.amp)
	}
	amax := max(a[0], a[1], a[2])
	b.amin = min(a[0], a[1], a[2])
	// Unbending the surface (rho' <= 1+wobMax) moves points by at most |bend|*(1+wobMax)^2
	// along the normalised z; band distances stretch by up to zBlur across slices.
	rmax := 1 + b.wobMax
	b.reach = amax*rmax*(1+math.Abs(bend)*rmax) + band*zBlur + 1
	return b
}

// randomWaves draws n wobble terms of total amplitude at most amp with spatial frequencies
// in [fLo, fHi] (radians per unit of normalised direction).
func randomWaves(s *stream, n int, amp, fLo, fHi float64) []wave {
	ws := make([]wave, n)
	for i := range ws {
		d := s.unit()
		f := s.uniform(fLo, fHi)
		ws[i] = wave{
			k:     [3]float64{d[0] * f, d[1] * f, d[2] * f},
			amp:   amp / float64(n) * s.uniform(0.5, 1),
			phase: s.uniform(0, 2*math.Pi),
		}
	}
	return ws
}

// zBlur widens the partial-volume transition across slices: slices are thicker than the
// in-plane spacing (pixdim z = 1.2 x), so their profile is too.
const zBlur = 1.3

// dist returns an approximate signed distance in voxels from p to the blob's surface
// (negative inside), z-steps counted 1/zBlur. It uses the first-order estimate
// (rho-R)/|grad rho|, which is accurate near the surface, where it matters. Far from the
// surface it only promises the sign and the side of the band: any value >= outer means
// "at least outer outside", any value <= -inner "at least inner inside"; the wobble (the
// costly part) is evaluated only in between.
func (b *blob) dist(px, py, pz, outer, inner float64) float64 {
	dx, dy, dz := px-b.c[0], py-b.c[1], pz-b.c[2]
	m := &b.m
	ux := m[0][0]*dx + m[0][1]*dy + m[0][2]*dz
	uy := m[1][0]*dx + m[1][1]*dy + m[1][2]*dz
	uz := m[2][0]*dx + m[2][1]*dy + m[2][2]*dz
	if b.bend != 0 {
		uz += b.bend * uy * uy
	}
	rho := math.Sqrt(ux*ux + uy*uy + uz*uz)
	if rho < 1e-9 {
		return -inner
	}
	// |grad rho| <= (1 + 2|bend*uy|)/amin bounds |d| from below without computing the
	// gradient or the wobble; this settles most voxels, all of the background ones.
	inv := b.amin
	if b.bend != 0 {
		inv /= 1 + 2*math.Abs(b.bend*uy)
	}
	if (rho-1-b.wobMax)*inv >= outer {
		return outer
	}
	if (rho-1+b.wobMax)*inv <= -inner {
		return -inner
	}
	vx, vy, vz := ux/rho, uy/rho, uz/rho
	// grad rho = M^T J^T v, J the Jacobian of the bend.
	wy := vy
	if b.bend != 0 {
		wy += 2 * b.bend * uy * vz
	}
	gx := m[0][0]*vx + m[1][0]*wy + m[2][0]*vz
	gy := m[0][1]*vx + m[1][1]*wy + m[2][1]*vz
	gz := (m[0][2]*vx + m[1][2]*wy + m[2][2]*vz) / zBlur
	g := math.Sqrt(gx*gx + gy*gy + gz*gz)
	if d := (rho - 1 - b.wobMax) / g; d >= outer {
		return outer
	}
	if d := (rho - 1 + b.wobMax) / g; d <= -inner {
		return -inner
	}
	r := 1.0
	for i := range b.waves {
		w := &b.waves[i]
		r += w.amp * math.Cos(w.k[0]*vx+w.k[1]*vy+w.k[2]*vz+w.phase)
	}
	return (rho - r) / g
}

// coverage is the fraction of a voxel at signed distance d that lies inside the surface,
// blurred over [-halfWidth, halfWidth] voxels: partial volume plus the scanner's PSF.
func coverage(d, halfWidth float64) float64 {
	t := (halfWidth - d) / (2 * halfWidth)
	switch {
	case t <= 0:
		return 0
	case t >= 1:
		return 1
	}
	return t * t * (3 - 2*t)
}
