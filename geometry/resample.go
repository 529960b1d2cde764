package geometry

//go:generate go run ./asm -out combine_amd64.s -stubs combine_amd64.go

import (
	"fmt"
	"math"
	"runtime"
)

// SpacingTolerance is how far, relatively, a volume's voxel size along an axis may differ from
// the model's before that axis is resampled: 10 %, about the spread of slice thickness within
// one protocol, and well inside the factor of 2 at which a 3x3x3 network sees different
// structures.
const SpacingTolerance = 0.10

// Resample maps a volume on one grid to the same field of view on a grid of another voxel
// size, axis by axis. Voxel centres are placed so that the grids' outer faces coincide (as
// scipy.ndimage.zoom with grid_mode=True and nnU-Net do): output index o sits at input
// coordinate (o+0.5)*In/Out - 0.5.
//
// The image is filtered with a linear (tent) kernel whose width is the larger of the two voxel
// sizes: plain linear interpolation when upsampling, and an antialiasing triangle filter when
// downsampling, so that fine structure averages into a coarse voxel instead of aliasing into
// it. Labels come back to the input grid by nearest neighbour: the engines emit labels (the
// argmax is fused into the last kernel), and the nearest coarse voxel keeps every boundary
// within half a model voxel of where the model put it.
type Resample struct {
	In, Out [3]int
	taps    [3][]taps
}

// taps are the input indices first..first+len(w)-1 and their weights for one output index.
type taps struct {
	first int
	w     []float32
}

// NewResample plans the resampling of a volume of dims in, voxel size inMM, to voxel size
// wantMM, leaving alone each axis whose size is within SpacingTolerance of the wanted one.
func NewResample(in [3]int, inMM, wantMM [3]float64) (*Resample, error) {
	r := &Resample{In: in}
	for a := range 3 {
		if in[a] < 1 || !(inMM[a] > 0) || !(wantMM[a] > 0) || math.IsInf(inMM[a], 0) || math.IsInf(wantMM[a], 0) {
			return nil, fmt.Errorf("%w: resample axis %d: %d voxels of %v mm to %v mm", ErrDegenerate, a, in[a], inMM[a], wantMM[a])
		}
		r.Out[a] = in[a]
		if !withinTolerance(inMM[a], wantMM[a]) {
			r.Out[a] = max(1, int(math.Round(float64(in[a])*inMM[a]/wantMM[a])))
		}
		r.taps[a] = axisTaps(in[a], r.Out[a])
	}
	return r, nil
}

func withinTolerance(have, want float64) bool {
	return math.Abs(have/want-1) <= SpacingTolerance
}

// NeedsResample reports whether any axis of a volume of voxel size haveMM is beyond
// SpacingTolerance of wantMM.
func NeedsResample(haveMM, wantMM [3]float64) bool {
	for a := range 3 {
		if !withinTolerance(haveMM[a], wantMM[a]) {
			return true
		}
	}
	return false
}

// Identity reports whether the resampling leaves every axis as it is.
func (r *Resample) Identity() bool { return r.In == r.Out }

// OutSpacing is the output's voxel size given the input's: the field of view is kept exactly,
// so it differs from the wanted size by the rounding of the voxel count.
func (r *Resample) OutSpacing(inMM [3]float64) [3]float64 {
	var s [3]float64
	for a := range 3 {
		s[a] = inMM[a] * float64(r.In[a]) / float64(r.Out[a])
	}
	return s
}

func axisTaps(nIn, nOut int) []taps {
	t := make([]taps, nOut)
	f := float64(nIn) / float64(nOut)
	support := math.Max(f, 1)
	for o := range nOut {
		if nIn == nOut {
			t[o] = taps{o, []float32{1}}
			continue
		}
		c := (float64(o)+0.5)*f - 0.5
		lo := max(0, int(math.Ceil(c-support)))
		hi := min(nIn-1, int(math.Floor(c+support)))
		var w []float32
		var sum float64
		first := -1
		for i := lo; i <= hi; i++ {
			wi := 1 - math.Abs(float64(i)-c)/support
			if wi <= 0 {
				if first < 0 {
					continue
				}
				break
			}
			if first < 0 {
				first = i
			}
			w = append(w, float32(wi))
			sum += wi
		}
		if first < 0 { // c outside [0, nIn-1] by more than the support: the nearest edge voxel
			first, w, sum = min(nIn-1, max(0, int(math.Round(c)))), []float32{1}, 1
		}
		for i := range w {
			w[i] = float32(float64(w[i]) / sum)
		}
		t[o] = taps{first, w}
	}
	return t
}

// ImageBytes is the memory Image allocates: the volume after the z and y passes, the output
// when x is resampled too, and one plane of scratch per worker when y is, all float32.
func (r *Resample) ImageBytes() int64 {
	in, out := r.In, r.Out
	n := int64(in[0]) * int64(out[1]) * int64(out[2]) // after z and y
	if out[1] != in[1] {
		n += int64(min(runtime.GOMAXPROCS(0), out[2])) * int64(in[0]) * int64(in[1])
	}
	if out[0] != in[0] {
		n += int64(out[0]) * int64(out[1]) * int64(out[2])
	}
	return 4 * n
}

// Image resamples src (In's dims, x fastest) into a new float32 volume of Out's dims, one
// separable pass per axis, on up to GOMAXPROCS goroutines. The passes run z, y, x: the first
// two combine whole planes and rows (streaming), and the x pass, the one that gathers, works on
// the already reduced volume. Each worker makes one output plane at a time: the z pass into a
// plane of scratch, chunk by chunk so that the sums stay in the first-level cache, then the y
// pass from it, so that the z-resampled volume is never made whole. Each value is summed in
// the same order as imageReference (the test file) does, so both give the same bits.
func Image[T int16 | float32](r *Resample, src []T) []float32 {
	in, out := r.In, r.Out
	if len(src) != in[0]*in[1]*in[2] {
		panic(fmt.Sprintf("geometry.Image: %d values for dims %v", len(src), in))
	}
	plane, yPlane := in[0]*in[1], in[0]*out[1]
	resampleY := out[1] != in[1]
	b := make([]float32, yPlane*out[2])
	parallelPlanes(out[2], plane, func(z0, z1 int) {
		var scratch []float32
		if resampleY {
			scratch = make([]float32, plane)
		}
		for o := z0; o < z1; o++ {
			dp := b[o*yPlane : (o+1)*yPlane]
			if !resampleY {
				combine(dp, src, plane, r.taps[2][o])
				continue
			}
			combine(scratch, src, plane, r.taps[2][o])
			for oy, t := range r.taps[1] {
				combine(dp[oy*in[0]:(oy+1)*in[0]], scratch, in[0], t)
			}
		}
	})
	// x: (in0, out1, out2) -> out
	if out[0] == in[0] {
		return b
	}
	c := make([]float32, out[0]*out[1]*out[2])
	rows := out[1] * out[2]
	parallelPlanes(rows, max(in[0], out[0]), func(r0, r1 int) {
		for row := r0; row < r1; row++ {
			s := b[row*in[0] : (row+1)*in[0]]
			d := c[row*out[0] : (row+1)*out[0]]
			for o, t := range r.taps[0] {
				var acc float32
				for k, w := range t.w {
					acc += float32(w * s[t.first+k])
				}
				d[o] = acc
			}
		}
	})
	return c
}

// combineChunk is how many values combine sums at a time: 16 KiB of float32 sums, which stay in
// the first-level cache while every tap's row adds to them.
const combineChunk = 4096

// combine sets d to the weighted sum of the rows (or planes) t.first.. of length n in s, chunk
// by chunk; each value is w0*s0 + w1*s1 + ..., summed in that order, each product rounded
// before it is added.
func combine[T int16 | float32](d []float32, s []T, n int, t taps) {
	for c0 := 0; c0 < n; c0 += combineChunk {
		c1 := min(n, c0+combineChunk)
		dc := d[c0:c1]
		combineRow(dc, s[t.first*n+c0:t.first*n+c1], t.w[0], false)
		for k := 1; k < len(t.w); k++ {
			combineRow(dc, s[(t.first+k)*n+c0:(t.first+k)*n+c1], t.w[k], true)
		}
	}
}

// combineRow sets d[i] to w*float32(s[i]), or adds it (add), for i < len(d): the vector
// kernels where the CPU has them (combineVector), the rest in Go. s must be as long as d.
func combineRow[T int16 | float32](d []float32, s []T, w float32, add bool) {
	s = s[:len(d)]
	done := combineVector(d, s, w, add)
	combineGo(d[done:], s[done:], w, add)
}

// combineGo is combineRow in Go, the reference of the vector kernels. The conversion of each
// product forbids its fusion with the add (FMA), whatever GOAMD64 allows.
func combineGo[T int16 | float32](d []float32, s []T, w float32, add bool) {
	s = s[:len(d)]
	if add {
		for i, v := range s {
			d[i] += float32(w * float32(v))
		}
		return
	}
	for i, v := range s {
		d[i] = w * float32(v)
	}
}

// nearest maps each input index along an axis of nIn voxels to the output index (of nOut) whose
// voxel contains its centre.
func nearest(nIn, nOut int) []int {
	t := make([]int, nIn)
	f := float64(nOut) / float64(nIn)
	for i := range nIn {
		j := int(math.Floor((float64(i) + 0.5) * f))
		t[i] = min(nOut-1, max(0, j))
	}
	return t
}

// LabelsBack writes to dst, a volume on the grid a file stores (dims ro.In), the labels src
// holds on the model's grid: src was made from that file by the reorientation ro and then the
// resampling rs (nil for none). Each voxel takes the label of the model voxel containing its
// centre.
func LabelsBack(dst, src []uint8, ro Reorient, rs *Resample) {
	canon := ro.OutDims()
	model := canon
	var near [3][]int
	for a := range 3 {
		if rs != nil {
			model[a] = rs.Out[a]
			near[a] = nearest(canon[a], model[a])
		} else {
			near[a] = nearest(canon[a], canon[a])
		}
	}
	if len(dst) != ro.In[0]*ro.In[1]*ro.In[2] || len(src) != model[0]*model[1]*model[2] {
		panic(fmt.Sprintf("geometry.LabelsBack: %d and %d labels for dims %v and %v", len(dst), len(src), ro.In, model))
	}
	stride := [3]int{1, model[0], model[0] * model[1]}
	// File axis b is canonical axis a with Perm[a] == b.
	var t [3][]int
	for a := range 3 {
		b := ro.Perm[a]
		t[b] = make([]int, ro.In[b])
		for i := range t[b] {
			t[b][i] = near[a][ro.along(a, i)] * stride[a]
		}
	}
	gather(dst, src, ro.In, t)
}
