// Package geometry brings a volume to the grid a model was trained on and labels back: the
// closest canonical orientation of an affine (nibabel's io_orientation and aff2axcodes),
// reorientation by axis permutations and flips (no interpolation), and resampling to another
// voxel size with an antialiased separable linear filter, labels coming back by nearest
// neighbour.
//
// It is written here because no maintained Go library does NIfTI orientation; the orientation
// rules follow nibabel (nibabel.orientations) so that voxpipe, the PyTorch twin and the user's
// own tools agree on what "closest canonical" means.
//
// The resampling's inner step (d += w*s over a row) runs AVX2 kernels generated with avo
// (geometry/asm, the same way as engine/cpu's) where the CPU has them: the Go compiler does not
// vectorise, and at 512x512x1000 that step is most of the resampling's time. They give the Go
// code's bits (each product rounded before it is added); the tests compare them.
package geometry

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"voxpipe/io/nifti"
)

// Errors.
var (
	// ErrDegenerate: the affine's 3x3 part is singular or not finite, so no orientation follows.
	ErrDegenerate = errors.New("geometry: degenerate affine")
	// ErrAxcodes: an orientation string is not three axis codes naming each axis once.
	ErrAxcodes = errors.New("geometry: bad axis codes")
)

// Canonical is the orientation voxpipe models are trained in unless their card says otherwise.
const Canonical = "RAS"

// axisLetters[k] holds the codes for the positive and negative direction of world axis k.
var axisLetters = [3][2]byte{{'R', 'L'}, {'A', 'P'}, {'S', 'I'}}

// Axcodes is the closest canonical orientation of the affine's voxel axes: for each of i, j, k
// the world direction (R/L, A/P, S/I) it points to, as nibabel.aff2axcodes gives it. Like
// nibabel's io_orientation, it takes the orthogonal matrix nearest to the direction cosines
// (polar decomposition), then assigns world axes greedily in voxel-axis order, each world axis
// once.
func Axcodes(a nifti.Affine) (string, error) {
	var m [3][3]float64
	for c := range 3 {
		n := math.Sqrt(a[0][c]*a[0][c] + a[1][c]*a[1][c] + a[2][c]*a[2][c])
		if n == 0 {
			n = 1
		}
		for r := range 3 {
			m[r][c] = a[r][c] / n
		}
	}
	q, err := polar(m)
	if err != nil {
		return "", err
	}
	codes := make([]byte, 3)
	for c := range 3 {
		best, bestAbs := -1, 0.0
		for r := range 3 {
			if v := math.Abs(q[r][c]); v > bestAbs {
				best, bestAbs = r, v
			}
		}
		if best < 0 {
			return "", fmt.Errorf("%w: voxel axis %d has no direction", ErrDegenerate, c)
		}
		sign := 0
		if q[best][c] < 0 {
			sign = 1
		}
		codes[c] = axisLetters[best][sign]
		for k := range 3 { // each world axis once
			q[best][k] = 0
		}
	}
	return string(codes), nil
}

// polar returns the orthogonal factor of m (m = Q S, S symmetric positive definite), by Newton's
// iteration Q <- (Q + Q^-T) / 2, which converges quadratically for any non-singular m.
func polar(m [3][3]float64) ([3][3]float64, error) {
	q := m
	for range 100 {
		inv, ok := inverse(q)
		if !ok {
			return q, fmt.Errorf("%w: singular direction cosines %v", ErrDegenerate, m)
		}
		var next [3][3]float64
		diff := 0.0
		for r := range 3 {
			for c := range 3 {
				next[r][c] = (q[r][c] + inv[c][r]) / 2
				diff = math.Max(diff, math.Abs(next[r][c]-q[r][c]))
			}
		}
		q = next
		if diff < 1e-12 {
			return q, nil
		}
	}
	return q, nil
}

func inverse(m [3][3]float64) ([3][3]float64, bool) {
	var inv [3][3]float64
	inv[0][0] = m[1][1]*m[2][2] - m[1][2]*m[2][1]
	inv[0][1] = m[0][2]*m[2][1] - m[0][1]*m[2][2]
	inv[0][2] = m[0][1]*m[1][2] - m[0][2]*m[1][1]
	inv[1][0] = m[1][2]*m[2][0] - m[1][0]*m[2][2]
	inv[1][1] = m[0][0]*m[2][2] - m[0][2]*m[2][0]
	inv[1][2] = m[0][2]*m[1][0] - m[0][0]*m[1][2]
	inv[2][0] = m[1][0]*m[2][1] - m[1][1]*m[2][0]
	inv[2][1] = m[0][1]*m[2][0] - m[0][0]*m[2][1]
	inv[2][2] = m[0][0]*m[1][1] - m[0][1]*m[1][0]
	det := m[0][0]*inv[0][0] + m[0][1]*inv[1][0] + m[0][2]*inv[2][0]
	if !(math.Abs(det) > 1e-9) { // also NaN
		return inv, false
	}
	for r := range 3 {
		for c := range 3 {
			inv[r][c] /= det
		}
	}
	return inv, true
}

// worldAxis returns which world axis a code names and whether it is the negative direction.
func worldAxis(code byte) (axis int, negative bool, ok bool) {
	for k, l := range axisLetters {
		switch code {
		case l[0]:
			return k, false, true
		case l[1]:
			return k, true, true
		}
	}
	return 0, false, false
}

// Reorient maps a volume stored in one orientation to another by permuting and flipping its
// axes; no value is interpolated. Output axis a is input axis Perm[a], reversed when Flip[a].
type Reorient struct {
	In   [3]int // input dims (x, y, z)
	Perm [3]int
	Flip [3]bool
}

// NewReorient is the reorientation of a volume of dims in orientation from (axis codes such as
// "LPS") to orientation to.
func NewReorient(from, to string, dims [3]int) (Reorient, error) {
	r := Reorient{In: dims}
	fromAxes, err := parseCodes(from)
	if err != nil {
		return r, err
	}
	toAxes, err := parseCodes(to)
	if err != nil {
		return r, err
	}
	for a := range 3 {
		for b := range 3 {
			if fromAxes[b].axis == toAxes[a].axis {
				r.Perm[a] = b
				r.Flip[a] = fromAxes[b].neg != toAxes[a].neg
			}
		}
	}
	return r, nil
}

type code struct {
	axis int
	neg  bool
}

func parseCodes(s string) ([3]code, error) {
	var out [3]code
	if len(s) != 3 {
		return out, fmt.Errorf("%w: %q", ErrAxcodes, s)
	}
	seen := [3]bool{}
	for i := range 3 {
		axis, neg, ok := worldAxis(s[i])
		if !ok || seen[axis] {
			return out, fmt.Errorf("%w: %q", ErrAxcodes, s)
		}
		seen[axis] = true
		out[i] = code{axis, neg}
	}
	return out, nil
}

// Identity reports whether the reorientation leaves the volume as it is.
func (r Reorient) Identity() bool {
	return r.Perm == [3]int{0, 1, 2} && r.Flip == [3]bool{}
}

// OutDims are the dims of the reoriented volume.
func (r Reorient) OutDims() [3]int {
	return [3]int{r.In[r.Perm[0]], r.In[r.Perm[1]], r.In[r.Perm[2]]}
}

// Spacing permutes per-axis voxel sizes of the input into the output's axis order.
func (r Reorient) Spacing(s [3]float64) [3]float64 {
	return [3]float64{s[r.Perm[0]], s[r.Perm[1]], s[r.Perm[2]]}
}

// Inverse maps the reoriented volume back.
func (r Reorient) Inverse() Reorient {
	inv := Reorient{In: r.OutDims()}
	for a := range 3 {
		inv.Perm[r.Perm[a]] = a
		inv.Flip[r.Perm[a]] = r.Flip[a]
	}
	return inv
}

// Affine is the voxel-to-world transform of the reoriented grid, given the input's: the same
// world positions, reached from the new indices.
func (r Reorient) Affine(in nifti.Affine) nifti.Affine {
	// input index i[b] = Flip ? n_b-1-o[a] : o[a] with b = Perm[a]: i = T o + t.
	var out nifti.Affine
	out[3][3] = 1
	for row := range 3 {
		out[row][3] = in[row][3]
		for a := range 3 {
			b := r.Perm[a]
			if r.Flip[a] {
				out[row][a] = -in[row][b]
				out[row][3] += in[row][b] * float64(r.In[b]-1)
			} else {
				out[row][a] = in[row][b]
			}
		}
	}
	return out
}

// tables returns, per output axis, the input offset of each output index: the gather is
// dst[o0 + n0*o1 + n0*n1*o2] = src[t0[o0] + t1[o1] + t2[o2]].
func (r Reorient) tables() [3][]int {
	stride := [3]int{1, r.In[0], r.In[0] * r.In[1]}
	var t [3][]int
	for a := range 3 {
		b := r.Perm[a]
		t[a] = make([]int, r.In[b])
		for o := range t[a] {
			t[a][o] = r.along(a, o) * stride[b]
		}
	}
	return t
}

// along maps an index along output axis a to the index along input axis Perm[a], and back (a
// flip is its own inverse).
func (r Reorient) along(a, o int) int {
	if r.Flip[a] {
		return r.In[r.Perm[a]] - 1 - o
	}
	return o
}

// Apply writes the reoriented src into dst; both hold In's voxel count, x fastest. It runs on
// up to GOMAXPROCS goroutines.
func Apply[T any](r Reorient, dst, src []T) {
	n := r.In[0] * r.In[1] * r.In[2]
	if len(src) != n || len(dst) != n {
		panic(fmt.Sprintf("geometry.Apply: %d and %d values for dims %v", len(dst), len(src), r.In))
	}
	gather(dst, src, r.OutDims(), r.tables())
}

// gather is dst[o0 + n0*o1 + n0*n1*o2] = src[t0[o0] + t1[o1] + t2[o2]], planes split over
// goroutines. A plane whose t2 equals the previous plane's is a copy of it, and so is a row
// whose t1+t2 equals the previous row's: labels brought back from a coarser grid repeat each
// model plane and row several times (5 planes and rows at 512x512x1000 from 2.5 mm), and a copy
// costs a fraction of the gather.
func gather[T any](dst, src []T, out [3]int, t [3][]int) {
	plane := out[0] * out[1]
	parallelPlanes(out[2], plane, func(z0, z1 int) {
		for z := z0; z < z1; z++ {
			row := dst[z*plane : (z+1)*plane]
			tz := t[2][z]
			if z > z0 && tz == t[2][z-1] {
				copy(row, dst[(z-1)*plane:z*plane])
				continue
			}
			for y := range out[1] {
				base := tz + t[1][y]
				d := row[y*out[0] : (y+1)*out[0]]
				if y > 0 && t[1][y] == t[1][y-1] {
					copy(d, row[(y-1)*out[0]:y*out[0]])
					continue
				}
				for x, tx := range t[0] {
					d[x] = src[base+tx]
				}
			}
		}
	})
}

// parallelPlanes calls f on contiguous ranges of [0, nz) from up to GOMAXPROCS goroutines,
// alone when the volume is small (planeVoxels * nz below ~1 M voxels).
func parallelPlanes(nz, planeVoxels int, f func(z0, z1 int)) {
	workers := runtime.GOMAXPROCS(0)
	if workers > nz {
		workers = nz
	}
	if planeVoxels*nz < 1<<20 || workers <= 1 {
		f(0, nz)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		z0, z1 := nz*w/workers, nz*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(z0, z1)
		}()
	}
	wg.Wait()
}

// InPlaceXY reports whether the reorientation only reverses x and/or y: it can then be done in
// place, plane by plane (FlipXY), and undone on any range of planes.
func (r Reorient) InPlaceXY() bool {
	return r.Perm == [3]int{0, 1, 2} && !r.Flip[2] && !r.Identity()
}

// FlipXY reverses the x and/or y axis of the planes in v (dims nx, ny and any number of planes,
// x fastest), in place, on up to GOMAXPROCS goroutines. It is its own inverse.
func FlipXY[T any](v []T, nx, ny int, flipX, flipY bool) {
	plane := nx * ny
	if plane == 0 || len(v)%plane != 0 {
		panic(fmt.Sprintf("geometry.FlipXY: %d values for planes of %dx%d", len(v), nx, ny))
	}
	parallelPlanes(len(v)/plane, plane, func(z0, z1 int) {
		for z := z0; z < z1; z++ {
			p := v[z*plane : (z+1)*plane]
			if flipY {
				for y := range ny / 2 {
					a, b := p[y*nx:(y+1)*nx], p[(ny-1-y)*nx:(ny-y)*nx]
					for x := range a {
						a[x], b[x] = b[x], a[x]
					}
				}
			}
			if flipX {
				for y := range ny {
					slices.Reverse(p[y*nx : (y+1)*nx])
				}
			}
		}
	})
}
