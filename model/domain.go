package model

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// DomainLevel is the domain check's verdict on a volume, from the least to the most severe. The
// pipeline writes it, with the reasons, in summary.csv's domain column and fails out-of-domain
// volumes under --strict-domain.
type DomainLevel string

// Domain levels.
const (
	// DomainOK: nothing found.
	DomainOK DomainLevel = "ok"
	// DomainWarn: the model can be applied, but something about the input may lower the mask's
	// quality or could not be checked (a 4D file, no orientation, spacing slightly outside
	// training, intensity quantiles outside training, a model without a card, a reader's
	// warning).
	DomainWarn DomainLevel = "warn"
	// DomainOutOfDomain: the input is unlike anything the model was trained on (field of view,
	// spacing far outside training, an intensity histogram far from training, a constant
	// volume) or the model's own confidence on it is below anything seen in training: its mask
	// is not to be trusted.
	DomainOutOfDomain DomainLevel = "out-of-domain"
)

// DomainLevels lists the levels, least severe first.
var DomainLevels = []DomainLevel{DomainOK, DomainWarn, DomainOutOfDomain}

func (l DomainLevel) rank() int { return slices.Index(DomainLevels, l) }

// AtLeast reports whether l is as severe as o or more.
func (l DomainLevel) AtLeast(o DomainLevel) bool { return l.rank() >= o.rank() }

// DomainInput is what the domain check knows about one volume, as the model sees it.
type DomainInput struct {
	Dims        int        // the file's number of dimensions (dim[0])
	Volumes     int64      // volumes in a 4D file, 1 otherwise
	Volume      int64      // the volume segmented (0-based; --volume)
	SpacingMM   [3]float64 // voxel size along the model's axes, after reorientation and any resampling
	Resampled   bool       // SpacingMM was reached by resampling
	ModelDims   [3]int     // the dims the model sees (for resampling's rounding)
	FOVMM       [3]float64 // field of view along the model's axes: the input's voxels times its voxel size (resampling keeps it); zero: unknown
	Orientation bool       // the header gives an orientation (qform or sform code > 0)
	Constant    bool       // every voxel holds the same value
	Quantiles   []float64  // normalised intensity at QuantileLevels (VolumeIntensity)
	Histogram   []float64  // normalised intensity histogram over HistogramBins (VolumeIntensity); nil: not checked
	// Warnings are the reader's warnings about the input (e.g. "scl_slope NaN in FILE"): each
	// makes the verdict at least DomainWarn.
	Warnings []string
	// Confidence is the model's confidence on the volume (Options.Confidence) once it is
	// segmented; nil before (the verdict then rests on the input alone).
	Confidence *Confidence
}

// Reason is one finding of the domain check and how severe it is.
type Reason struct {
	Level DomainLevel
	Text  string
}

// Verdict is the outcome of the domain check: its level is that of its most severe reason, ok
// without any.
type Verdict struct {
	Reasons []Reason
}

// Level is the verdict's level.
func (v Verdict) Level() DomainLevel {
	l := DomainOK
	for _, r := range v.Reasons {
		if r.Level.rank() > l.rank() {
			l = r.Level
		}
	}
	return l
}

// OK reports whether nothing was found.
func (v Verdict) OK() bool { return len(v.Reasons) == 0 }

// String is summary.csv's domain column: "ok", or the level, ": " and every reason joined by
// "; ", the most severe first: "out-of-domain: field of view unlike training: ...; no
// orientation in the header ...".
func (v Verdict) String() string {
	if v.OK() {
		return string(DomainOK)
	}
	rs := slices.Clone(v.Reasons)
	slices.SortStableFunc(rs, func(a, b Reason) int { return b.Level.rank() - a.Level.rank() })
	texts := make([]string, len(rs))
	for i, r := range rs {
		texts[i] = r.Text
	}
	return string(v.Level()) + ": " + strings.Join(texts, "; ")
}

// ParseVerdictLevel is the level at the start of a domain column written by Verdict.String; ""
// for an empty column (files written before the domain check) or an unknown level.
func ParseVerdictLevel(s string) DomainLevel {
	head, _, _ := strings.Cut(s, ":")
	if l := DomainLevel(head); l.rank() >= 0 {
		return l
	}
	return ""
}

// CheckDomain compares a volume with the card's training domain. A nil card is itself a reason
// (warn): nothing but the volume itself can be checked.
func CheckDomain(card *Card, in DomainInput) Verdict {
	var v Verdict
	add := func(l DomainLevel, format string, a ...any) {
		v.Reasons = append(v.Reasons, Reason{l, fmt.Sprintf(format, a...)})
	}
	for _, w := range in.Warnings {
		add(DomainWarn, "%s", w)
	}
	if in.Dims > 3 {
		add(DomainWarn, "%d dimensions: volume %d of %d is segmented", in.Dims, in.Volume, in.Volumes)
	}
	if in.Constant {
		add(DomainOutOfDomain, "constant volume: every voxel holds the same value, there is nothing to segment")
	}
	if !in.Orientation {
		add(DomainWarn, "no orientation in the header (qform_code and sform_code are 0): axes taken as RAS")
	}
	if card == nil {
		add(DomainWarn, "the model has no card: spacing, field of view, intensity and confidence cannot be checked")
		return v
	}
	d := card.Domain
	checkSpacing(card, in, add)
	if f := d.FOVTolerance; d.HasFOV() && in.FOVMM != [3]float64{} {
		var out []string
		for a := range 3 {
			lo, hi := d.FOVMinMM[a]/f, d.FOVMaxMM[a]*f
			if s := in.FOVMM[a]; !(s >= lo && s <= hi) {
				out = append(out, fmt.Sprintf("%c %.4g mm not in [%.4g, %.4g]", "xyz"[a], s, lo, hi))
			}
		}
		if len(out) > 0 {
			add(DomainOutOfDomain, "field of view unlike training: %s", strings.Join(out, ", "))
		}
	}
	if in.Constant {
		return v // the intensity and the confidence say nothing more
	}
	if len(in.Quantiles) == len(d.QuantileMin) {
		var out []string
		tol := d.QuantileTolerance
		for i, q := range in.Quantiles {
			if lo, hi := d.QuantileMin[i]-tol, d.QuantileMax[i]+tol; q < lo || q > hi || math.IsNaN(q) {
				out = append(out, fmt.Sprintf("p%g %.2f not in [%.2f, %.2f]", 100*QuantileLevels[i], q, lo, hi))
			}
		}
		if len(out) > 0 {
			add(DomainWarn, "intensity quantiles outside training (normalised): %s", strings.Join(out, ", "))
		}
	}
	if d.HasHistogram() && len(in.Histogram) == len(d.HistogramMax) {
		if x := HistogramExcess(in.Histogram, d.HistogramMax); !(x <= d.HistogramMaxExcess) {
			add(DomainOutOfDomain, "intensity unlike training: %.1f %% of the voxels at normalised intensities more common than in any training volume (> %.1f %%)",
				100*x, 100*d.HistogramMaxExcess)
		}
	}
	if c, k := in.Confidence, d.Confidence; c != nil && k != nil {
		checkConfidence(*c, k, add)
	}
	return v
}

// checkSpacing: spacing outside the training range is a warning, and out of domain beyond
// SpacingFactor of it (the model then sees its structures at another scale).
func checkSpacing(card *Card, in DomainInput, add func(DomainLevel, string, ...any)) {
	d := card.Domain
	var warn, far []string
	for a := range 3 {
		lo, hi := d.SpacingMinMM[a], d.SpacingMaxMM[a]
		if in.Resampled {
			// Resampling keeps the field of view, so it reaches the card's spacing up to the
			// rounding of the voxel count: half a voxel in n.
			slack := 0.5 / float64(max(1, in.ModelDims[a]))
			lo, hi = math.Min(lo, card.SpacingMM[a])*(1-slack), math.Max(hi, card.SpacingMM[a])*(1+slack)
		}
		s := in.SpacingMM[a]
		if s >= lo*(1-1e-6) && s <= hi*(1+1e-6) {
			continue
		}
		msg := fmt.Sprintf("%c %.3g mm not in [%.3g, %.3g]", "xyz"[a], s, lo, hi)
		if s >= lo/SpacingFactor && s <= hi*SpacingFactor {
			warn = append(warn, msg)
		} else {
			far = append(far, msg)
		}
	}
	if len(far) > 0 {
		add(DomainOutOfDomain, "spacing far outside training (beyond a factor %g): %s", SpacingFactor, strings.Join(far, ", "))
	}
	if len(warn) > 0 {
		add(DomainWarn, "spacing outside training: %s", strings.Join(warn, ", "))
	}
}

// SpacingFactor: a spacing (as the model sees it) more than this factor outside the card's
// training range is out of domain; within it, outside the range, a warning.
const SpacingFactor = 1.5

// checkConfidence compares the model's confidence with the range the card records for its
// training volumes.
func checkConfidence(c Confidence, k *ConfidenceDomain, add func(DomainLevel, string, ...any)) {
	if c.Voxels == 0 {
		return // an engine that does not measure it
	}
	var out []string
	for l := range k.LabelFractionMin {
		if f, lo, hi := c.LabelFraction(l), k.LabelFractionMin[l], k.LabelFractionMax[l]; !(f >= lo && f <= hi) {
			out = append(out, fmt.Sprintf("label %d %.3g %% not in [%.3g, %.3g] %%", l, 100*f, 100*lo, 100*hi))
		}
	}
	if len(out) > 0 {
		add(DomainOutOfDomain, "labels in proportions unlike training: %s", strings.Join(out, ", "))
	}
	if c.MarginVoxels == 0 {
		return
	}
	switch m := c.MeanMargin(); {
	case m < k.MeanMarginMin:
		add(DomainOutOfDomain, "model less sure than in training: mean foreground margin %.2f logits < %.2f", m, k.MeanMarginMin)
	case m > k.MeanMarginMax:
		add(DomainOutOfDomain, "model surer than in training: mean foreground margin %.2f logits > %.2f", m, k.MeanMarginMax)
	}
	if f := c.LowFraction(); f > k.LowMarginMax {
		add(DomainOutOfDomain, "model unsure: %.2f %% of the foreground within 1 logit of another class > %.2f %%", 100*f, 100*k.LowMarginMax)
	}
}

// Evidence is the domain check's measurements of a volume in one line, for the log and
// summary.csv's domain_evidence column: "fov 240x240x192 mm; excess 0.00 %; margin 9.62; low 0.81 %;
// labels 72.1/26.9/0.57/0.38 %" (the parts that were measured).
func (in DomainInput) Evidence(card *Card) string {
	var parts []string
	if in.FOVMM != [3]float64{} {
		parts = append(parts, fmt.Sprintf("fov %.4gx%.4gx%.4g mm", in.FOVMM[0], in.FOVMM[1], in.FOVMM[2]))
	}
	if card != nil && card.Domain.HasHistogram() && len(in.Histogram) == len(card.Domain.HistogramMax) && !in.Constant {
		parts = append(parts, fmt.Sprintf("excess %.2f %%", 100*HistogramExcess(in.Histogram, card.Domain.HistogramMax)))
	}
	if c := in.Confidence; c != nil && c.Voxels > 0 {
		if c.MarginVoxels > 0 {
			parts = append(parts, fmt.Sprintf("margin %.2f", c.MeanMargin()), fmt.Sprintf("low %.2f %%", 100*c.LowFraction()))
		}
		fr := make([]string, len(c.Labels))
		for l := range c.Labels {
			fr[l] = fmt.Sprintf("%.3g", 100*c.LabelFraction(l))
		}
		parts = append(parts, "labels "+strings.Join(fr, "/")+" %")
	}
	return strings.Join(parts, "; ")
}

// The intensity histogram of the domain check: HistogramBins bins of HistogramWidth normalised
// units (standard deviations) from HistogramLow; values below fall in the first bin, values
// above in the last.
const (
	HistogramLow   = -4.0
	HistogramWidth = 0.25
	HistogramBins  = 48 // up to +8
)

// histogramBin is the bin of normalised value x.
func histogramBin(x float64) int {
	b := int(math.Floor((x - HistogramLow) / HistogramWidth))
	return min(max(b, 0), HistogramBins-1)
}

// HistogramExcess is the share of a histogram over HistogramBins above an envelope (Domain's
// HistogramMax): the sum over the bins of what h holds beyond env, 0 for a histogram under it
// everywhere, up to 1.
func HistogramExcess(h, env []float64) float64 {
	x := 0.0
	for i := range min(len(h), len(env)) {
		x += max(0, h[i]-env[i])
	}
	return x
}

// quantileSample is about how many voxels VolumeIntensity looks at: enough for the 1st and
// 99th percentiles to be stable to a few hundredths of a standard deviation.
const quantileSample = 1 << 20

// VolumeQuantiles is VolumeIntensity's quantiles.
func VolumeQuantiles(vol *Volume) []float64 {
	q, _ := VolumeIntensity(vol)
	return q
}

// VolumeIntensity is the normalised intensity of vol (vol.Norm applied) over a regular sample of
// about a million voxels: its values at QuantileLevels, interpolated linearly between order
// statistics (numpy's default), and its histogram over HistogramBins (fractions of the sample).
// Non-finite values are left out; none left gives NaN quantiles and a nil histogram.
func VolumeIntensity(vol *Volume) (quantiles, histogram []float64) {
	n := vol.NX * vol.NY * vol.NZ
	step := max(1, n/quantileSample)
	if step > 1 && step%2 == 0 {
		step++ // odd, so the sample does not lock onto even rows or planes
	}
	if vol.I16 != nil {
		// A histogram of the stored values: exact, and no sort.
		hist := histograms.Get().(*[1 << 16]int32)
		defer histograms.Put(hist)
		count := sampleHistogram(hist, vol.I16[:n], step)
		return quantilesFromHistogram(hist, count, vol.Norm), binsFromHistogram(hist, count, vol.Norm)
	}
	sample := make([]float64, 0, n/step+1)
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
	if len(sample) == 0 {
		return q, nil
	}
	h := make([]float64, HistogramBins)
	for _, x := range sample {
		h[histogramBin(x)]++
	}
	for i := range h {
		h[i] /= float64(len(sample))
	}
	return q, h
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

// histograms holds the 256 KiB count arrays of sampleHistogram between volumes: a service or
// a batch reuses them instead of allocating them for every volume (the allocations made a
// run's peak memory grow with its batch).
var histograms = sync.Pool{New: func() any { return new([1 << 16]int32) }}

// sampleHistogram sets hist to the counts of the stored values v[0], v[step], v[2*step]... by
// value (offset by 0x8000), and returns how many there were. Each sample is a cache miss in a
// volume just read (10-14 ms for a million on one core at 512x512x1000), so the samples are
// split over up to GOMAXPROCS goroutines, whose misses overlap, each with its own counts.
func sampleHistogram(hist *[1 << 16]int32, v []int16, step int) int {
	samples := (len(v) + step - 1) / step
	workers := max(1, min(runtime.GOMAXPROCS(0), samples>>16))
	hists := make([]*[1 << 16]int32, workers)
	hists[0] = hist
	for w := 1; w < workers; w++ {
		hists[w] = histograms.Get().(*[1 << 16]int32)
		defer histograms.Put(hists[w])
	}
	var wg sync.WaitGroup
	for w := range workers {
		k0, k1 := samples*w/workers, samples*(w+1)/workers
		wg.Go(func() {
			h := hists[w]
			clear(h[:])
			for k := k0; k < k1; k++ {
				h[uint16(v[k*step])^0x8000]++
			}
		})
	}
	wg.Wait()
	for w := 1; w < workers; w++ {
		for i, c := range hists[w] {
			hist[i] += c
		}
	}
	return samples
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

// binsFromHistogram folds a histogram of int16 stored values into HistogramBins of normalised
// intensity.
func binsFromHistogram(hist *[1 << 16]int32, n int, norm Norm) []float64 {
	h := make([]float64, HistogramBins)
	for b, c := range hist {
		if c != 0 {
			h[histogramBin(float64(norm.Apply(float32(int16(uint16(b)^0x8000)))))] += float64(c)
		}
	}
	for i := range h {
		h[i] /= float64(n)
	}
	return h
}
