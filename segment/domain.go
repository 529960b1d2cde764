package segment

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Domain verdicts, as summary.csv's domain column writes them: DomainOK, or "warn: " and the
// reasons.
const (
	DomainOK   = "ok"
	DomainWarn = "warn"
)

// DomainInput is what the domain check knows about one volume, as the model sees it.
type DomainInput struct {
	Dims        int        // the file's number of dimensions (dim[0])
	Volumes     int64      // volumes in a 4D file, 1 otherwise
	SpacingMM   [3]float64 // voxel size along the model's axes, after reorientation and any resampling
	Resampled   bool       // SpacingMM was reached by resampling
	ModelDims   [3]int     // the dims the model sees (for resampling's rounding)
	Orientation bool       // the header gives an orientation (qform or sform code > 0)
	Constant    bool       // every voxel holds the same value
	Quantiles   []float64  // normalised intensity at QuantileLevels (VolumeQuantiles)
}

// Verdict is the outcome of the domain check: no reasons means ok.
type Verdict struct {
	Reasons []string
}

// OK reports whether nothing was found.
func (v Verdict) OK() bool { return len(v.Reasons) == 0 }

// String is DomainOK or "warn: " with the reasons joined by "; ".
func (v Verdict) String() string {
	if v.OK() {
		return DomainOK
	}
	return DomainWarn + ": " + strings.Join(v.Reasons, "; ")
}

// CheckDomain compares a volume with the card's training domain. A nil card is itself a reason:
// nothing can be checked.
func CheckDomain(card *Card, in DomainInput) Verdict {
	var v Verdict
	add := func(format string, a ...any) { v.Reasons = append(v.Reasons, fmt.Sprintf(format, a...)) }
	if in.Dims > 3 {
		add("%d dimensions: only volume 0 of %d is segmented", in.Dims, in.Volumes)
	}
	if in.Constant {
		add("constant volume: every voxel holds the same value, there is nothing to segment")
	}
	if !in.Orientation {
		add("no orientation in the header (qform_code and sform_code are 0): axes taken as RAS")
	}
	if card == nil {
		add("the model has no card: spacing and intensity cannot be checked")
		return v
	}
	d := card.Domain
	var out []string
	for a := range 3 {
		lo, hi := d.SpacingMinMM[a], d.SpacingMaxMM[a]
		if in.Resampled {
			// Resampling keeps the field of view, so it reaches the card's spacing up to the
			// rounding of the voxel count: half a voxel in n.
			slack := 0.5 / float64(max(1, in.ModelDims[a]))
			lo, hi = math.Min(lo, card.SpacingMM[a])*(1-slack), math.Max(hi, card.SpacingMM[a])*(1+slack)
		}
		if s := in.SpacingMM[a]; s < lo*(1-1e-6) || s > hi*(1+1e-6) {
			out = append(out, fmt.Sprintf("%c %.3g mm not in [%.3g, %.3g]", "xyz"[a], s, lo, hi))
		}
	}
	if len(out) > 0 {
		add("spacing outside training: %s", strings.Join(out, ", "))
	}
	if !in.Constant && len(in.Quantiles) == len(d.QuantileMin) {
		out = out[:0]
		tol := d.QuantileTolerance
		for i, q := range in.Quantiles {
			if lo, hi := d.QuantileMin[i]-tol, d.QuantileMax[i]+tol; q < lo || q > hi || math.IsNaN(q) {
				out = append(out, fmt.Sprintf("p%g %.2f not in [%.2f, %.2f]", 100*QuantileLevels[i], q, lo, hi))
			}
		}
		if len(out) > 0 {
			add("intensity far from training (normalised): %s", strings.Join(out, ", "))
		}
	}
	return v
}

// quantileSample is about how many voxels VolumeQuantiles looks at: enough for the 1st and
// 99th percentiles to be stable to a few hundredths of a standard deviation.
const quantileSample = 1 << 20

// VolumeQuantiles is the normalised intensity of vol (vol.Norm applied) at QuantileLevels,
// interpolated linearly between order statistics (numpy's default), over a regular sample of
// about a million voxels. Non-finite values are left out; none left gives NaNs.
func VolumeQuantiles(vol *Volume) []float64 {
	n := vol.NX * vol.NY * vol.NZ
	step := max(1, n/quantileSample)
	if step > 1 && step%2 == 0 {
		step++ // odd, so the sample does not lock onto even rows or planes
	}
	var sample []float64
	if vol.I16 != nil {
		// A histogram of the stored values: exact, and no sort.
		var hist [1 << 16]int32
		count := 0
		for i := 0; i < n; i += step {
			hist[uint16(vol.I16[i])^0x8000]++
			count++
		}
		return quantilesFromHistogram(&hist, count, vol.Norm)
	}
	sample = make([]float64, 0, n/step+1)
	for i := 0; i < n; i += step {
		v := vol.F32[i]
		if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
			sample = append(sample, float64(vol.Norm.Apply(v)))
		}
	}
	slices.Sort(sample)
	q := make([]float64, len(QuantileLevels))
	for i, p := range QuantileLevels {
		q[i] = quantileSorted(len(sample), p, func(k int) float64 { return sample[k] })
	}
	return q
}

// quantileSorted is numpy's linear quantile of n sorted values read through at.
func quantileSorted(n int, p float64, at func(int) float64) float64 {
	if n == 0 {
		return math.NaN()
	}
	pos := p * float64(n-1)
	k := int(math.Floor(pos))
	if k >= n-1 {
		return at(n - 1)
	}
	lo := at(k)
	hi := at(k + 1) // after at(k): the histogram's at only walks forward
	return lo + (pos-float64(k))*(hi-lo)
}

func quantilesFromHistogram(hist *[1 << 16]int32, n int, norm Norm) []float64 {
	// at(k) is the k-th smallest sampled value; the levels ask for increasing k, so one walk.
	bin, below := 0, 0 // values in bins < bin: below
	at := func(k int) float64 {
		for below+int(hist[bin]) <= k {
			below += int(hist[bin])
			bin++
		}
		return float64(norm.Apply(float32(int16(uint16(bin) ^ 0x8000))))
	}
	q := make([]float64, len(QuantileLevels))
	for i, p := range QuantileLevels {
		q[i] = quantileSorted(n, p, at)
	}
	return q
}
