// Package volstats computes per-label statistics of a segmentation: for every label of the
// model, its voxel count, its volume in mL, the mean and standard deviation of the input image
// inside it, its bounding box and its number of connected components (26-connectivity).
//
// Everything comes from one pass over the mask and the image, in parallel over z-ranges. Each
// row of the mask is cut into runs of equal label (x-runs); a run adds to its label's count,
// bounding box and intensity sums at once, and is a node of a union-find that joins runs of the
// same label touching in the eight neighbouring rows. Only two planes of runs are held per
// z-range (the union-find is compacted plane by plane), plus its first and last plane, which
// the z-ranges are joined through at the end. This is written by hand rather than with a
// labelling library because a labelling of one int32 per voxel would take 1 GiB at
// 512x512x1000 (four times the mask) and no Go library offers run-based labelling.
//
// Choices, for the users of statistics.csv and statistics.json:
//   - Every label the model has gets a result, absent ones with zero voxels, so tables are
//     rectangular. Background (label 0) is included in Stats and the CSV (the voxel counts then
//     add up to the volume's); the per-volume JSON leaves it out, as TotalSegmentator's
//     statistics.json does.
//   - Intensities are in the image's scaled units (stored*slope+inter; slope 0 means unscaled, as
//     in NIfTI). NaN and infinite image voxels count in the label's voxels and volume but not in
//     its intensity mean and std, which are over IntensityVoxels finite voxels (NaN when none).
//     The standard deviation is the population one (divided by n).
//   - Volumes come from pixdim (|pixdim[1..3]|, 0 counting as 1, in the header's spatial units),
//     as nibabel's header zooms and TotalSegmentator do, not from the affine.
package volstats

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"voxpipe/io/nifti"
	"voxpipe/model"
)

// Errors, compared with errors.Is.
var (
	// ErrDims: the grid's extents are not positive, or the mask or image length differs from
	// their product.
	ErrDims = errors.New("volstats: mask, image and dims disagree")
	// ErrLabels: the label list has a value outside 0..255 or a value twice.
	ErrLabels = errors.New("volstats: bad label list")
	// ErrUnknownLabel: the mask holds a value that the label list does not name.
	ErrUnknownLabel = errors.New("volstats: mask value not among the labels")
)

// Grid is the geometry and scaling the statistics need.
type Grid struct {
	Dims [3]int // nx, ny, nz; x fastest in the mask and the image
	// VoxelMM is the voxel's extent along x, y and z in mm.
	VoxelMM [3]float64
	// Slope and Inter map the image's stored values to its units (v*Slope+Inter); Slope 0 means
	// unscaled, as scl_slope 0 does in NIfTI.
	Slope, Inter float64
}

// GridOf is the grid of a NIfTI header: dims 1..3 (1 beyond dim[0]), |pixdim[1..3]| (0 or NaN
// counting as 1) times the spatial unit in mm, and the effective scaling.
func GridOf(h *nifti.Header) Grid {
	var g Grid
	unit := h.MMPerUnit()
	for i := range 3 {
		g.Dims[i] = 1
		if int64(i+1) <= h.Dim[0] {
			g.Dims[i] = int(h.Dim[i+1])
		}
		p := math.Abs(h.PixDim[i+1])
		if p == 0 || math.IsNaN(p) {
			p = 1
		}
		g.VoxelMM[i] = p * unit
	}
	g.Slope, g.Inter = h.EffectiveScaling()
	return g
}

// VoxelML is the volume of one voxel in mL (cm³).
func (g Grid) VoxelML() float64 {
	return g.VoxelMM[0] * g.VoxelMM[1] * g.VoxelMM[2] / 1000
}

// Stats are one label's statistics.
type Stats struct {
	Value    int
	Name     string
	Voxels   int64
	VolumeML float64
	// IntensityVoxels are the label's voxels with a finite image value, which the mean and the
	// population standard deviation (scaled units) are over; both are NaN when it is 0.
	IntensityVoxels int64
	IntensityMean   float64
	IntensityStd    float64
	// BBoxMin and BBoxMax are the smallest and largest voxel index along x, y and z, inclusive;
	// -1 when the label is absent.
	BBoxMin, BBoxMax [3]int
	// Components: connected components, voxels sharing a face, edge or corner (26-connectivity).
	Components int
}

// Volume is the statistics of one mask, one Stats per label in the order given.
type Volume struct {
	Grid   Grid
	Labels []Stats
}

// Options tune Compute; the zero value is ready to use.
type Options struct {
	// Workers is the number of goroutines; <= 0 means GOMAXPROCS. It never changes the result.
	Workers int
}

// Compute returns the statistics of mask (one label value per voxel) for every label in labels,
// with the intensities of image on the same grid; image may be empty (intensities NaN).
func Compute[T int16 | float32](mask []uint8, image []T, g Grid, labels []model.Label, opts Options) (*Volume, error) {
	if err := checkDims(g, len(mask), len(image)); err != nil {
		return nil, err
	}
	lut, err := labelLUT(labels)
	if err != nil {
		return nil, err
	}
	nx, ny, nz := g.Dims[0], g.Dims[1], g.Dims[2]
	s := &scan{nx: nx, ny: ny, nz: nz, mask: mask, nl: len(labels) + 1, lut: lut,
		moments: make([]moment, nz*(len(labels)+1))}
	switch img := any(image).(type) {
	case []int16:
		if len(img) > 0 {
			s.sum = func(i0, i1 int, m *moment) { sumInt16(img[i0:i1], m) }
		}
	case []float32:
		if len(img) > 0 {
			s.sum = func(i0, i1 int, m *moment) { sumFloat32(img[i0:i1], m) }
		}
	}

	acc := joinChunks(s.runChunks(opts.Workers), s.nl, lut)
	if sink := acc.voxels[len(labels)]; sink > 0 {
		// Name one offending value: the first in the mask that no label lists.
		for _, v := range mask {
			if lut[v] == len(labels) {
				return nil, fmt.Errorf("%w: %d voxels, value %d among them", ErrUnknownLabel, sink, v)
			}
		}
	}
	return s.volume(acc, g, labels), nil
}

// checkDims checks g's dimensions and that the mask (and the image, unless empty) hold that
// many voxels.
func checkDims(g Grid, maskLen, imageLen int) error {
	nx, ny, nz := g.Dims[0], g.Dims[1], g.Dims[2]
	if nx < 1 || ny < 1 || nz < 1 || nx > math.MaxInt32 || ny > math.MaxInt32 ||
		nx > math.MaxInt/ny || nx*ny > math.MaxInt/nz {
		return fmt.Errorf("%w: dims %v", ErrDims, g.Dims)
	}
	if n := nx * ny * nz; maskLen != n || (imageLen != 0 && imageLen != n) {
		return fmt.Errorf("%w: dims %dx%dx%d (%d voxels), mask %d, image %d", ErrDims, nx, ny, nz, n, maskLen, imageLen)
	}
	return nil
}

// labelLUT maps a mask value to its label's index; values not listed go to the sink, index
// len(labels), which must stay empty.
func labelLUT(labels []model.Label) (*[256]int, error) {
	var lut [256]int
	for v := range lut {
		lut[v] = len(labels)
	}
	for i, l := range labels {
		if l.Value < 0 || l.Value > 255 {
			return nil, fmt.Errorf("%w: label %q has value %d, want 0..255", ErrLabels, l.Name, l.Value)
		}
		if lut[l.Value] != len(labels) {
			return nil, fmt.Errorf("%w: value %d is listed twice", ErrLabels, l.Value)
		}
		lut[l.Value] = i
	}
	return &lut, nil
}

// runChunks scans the volume in z-ranges on workers goroutines (GOMAXPROCS when <= 0) and
// returns the ranges' results in z order.
func (s *scan) runChunks(workers int) []*chunk {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// Several z-ranges per worker balance the load; each range costs two planes of runs kept
	// for the join, and its result does not depend on the split.
	chunks := splitZ(s.nz, min(s.nz, 4*workers))
	results := make([]*chunk, len(chunks))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, len(chunks)) {
		wg.Go(func() {
			for {
				k := int(next.Add(1)) - 1
				if k >= len(chunks) {
					return
				}
				results[k] = s.run(chunks[k][0], chunks[k][1])
			}
		})
	}
	wg.Wait()
	return results
}

// volume is the statistics of each label from the joined scan acc, intensities in g's
// scaled units.
func (s *scan) volume(acc *totals, g Grid, labels []model.Label) *Volume {
	vol := &Volume{Grid: g, Labels: make([]Stats, len(labels))}
	slope, inter := g.Slope, g.Inter
	if slope == 0 || math.IsNaN(slope) || math.IsInf(slope, 0) {
		slope, inter = 1, 0
	}
	if math.IsNaN(inter) || math.IsInf(inter, 0) {
		inter = 0
	}
	voxelML := g.VoxelML()
	for i, l := range labels {
		st := Stats{Value: l.Value, Name: l.Name, Voxels: acc.voxels[i], Components: acc.components[i],
			BBoxMin: [3]int{-1, -1, -1}, BBoxMax: [3]int{-1, -1, -1}}
		st.VolumeML = float64(st.Voxels) * voxelML
		if st.Voxels > 0 {
			for a := range 3 {
				st.BBoxMin[a], st.BBoxMax[a] = int(acc.bbox[i].min[a]), int(acc.bbox[i].max[a])
			}
		}
		// The planes' moments merged in z order: the same sums whatever the workers did.
		var m merged
		for z := range s.nz {
			m.add(s.moments[z*s.nl+i])
		}
		st.IntensityVoxels = m.n
		st.IntensityMean, st.IntensityStd = math.NaN(), math.NaN()
		if m.n > 0 {
			st.IntensityMean = m.mean*slope + inter
			st.IntensityStd = math.Sqrt(max(m.m2, 0)/float64(m.n)) * math.Abs(slope)
		}
		vol.Labels[i] = st
	}
	return vol
}

// splitZ cuts [0, nz) into n contiguous ranges of nearly equal size.
func splitZ(nz, n int) [][2]int {
	r := make([][2]int, n)
	for k := range n {
		r[k] = [2]int{k * nz / n, (k + 1) * nz / n}
	}
	return r
}

// moment is one plane's sums for one label: n finite values, summed relative to shift (the
// plane's first finite value for the label), which keeps the sums of int16 planes exact and
// those of float planes free of the cancellation a large offset would cause.
type moment struct {
	n      int64
	shift  float64
	s1, s2 float64 // sums of v-shift and (v-shift)²
}

// merged combines moments (Chan et al.'s pairwise update of mean and M2).
type merged struct {
	n        int64
	mean, m2 float64
}

func (m *merged) add(p moment) {
	if p.n == 0 {
		return
	}
	n := float64(p.n)
	mean := p.shift + p.s1/n
	m2 := max(p.s2-p.s1*p.s1/n, 0)
	if m.n == 0 {
		m.n, m.mean, m.m2 = p.n, mean, m2
		return
	}
	tot := m.n + p.n
	d := mean - m.mean
	m.m2 += m2 + d*d*float64(m.n)*n/float64(tot)
	m.mean += d * n / float64(tot)
	m.n = tot
}

// sumInt16 adds a run's values to m. Four partial sums break the dependency chain; sums of
// int16 differences stay exact in float64 (below 2^53) for planes up to 2 M voxels, so their
// order does not matter there.
func sumInt16(v []int16, m *moment) {
	if len(v) == 0 {
		return
	}
	if m.n == 0 {
		m.shift = float64(v[0])
	}
	sh := m.shift
	var a0, a1, a2, a3, q0, q1, q2, q3 float64
	i := 0
	for ; i+4 <= len(v); i += 4 {
		d0, d1, d2, d3 := float64(v[i])-sh, float64(v[i+1])-sh, float64(v[i+2])-sh, float64(v[i+3])-sh
		a0, a1, a2, a3 = a0+d0, a1+d1, a2+d2, a3+d3
		q0, q1, q2, q3 = q0+d0*d0, q1+d1*d1, q2+d2*d2, q3+d3*d3
	}
	for ; i < len(v); i++ {
		d := float64(v[i]) - sh
		a0 += d
		q0 += d * d
	}
	m.n += int64(len(v))
	m.s1 += (a0 + a1) + (a2 + a3)
	m.s2 += (q0 + q1) + (q2 + q3)
}

// sumFloat32 adds a run's finite values to m, in order.
func sumFloat32(v []float32, m *moment) {
	sh, n := m.shift, m.n
	var a, q float64
	for _, x := range v {
		d := float64(x)
		if d-d != 0 { // NaN or ±Inf
			continue
		}
		if n == 0 {
			sh, m.shift = d, d
		}
		d -= sh
		a += d
		q += d * d
		n++
	}
	m.n = n
	m.s1 += a
	m.s2 += q
}
