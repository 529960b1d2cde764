package model

import "math"

// Confidence is the model's own confidence over one volume, from its logits: the voxels it gives
// each label and, over the voxels it labels foreground (label > 0) on the planes whose z (in the
// model's view) is a multiple of MarginStride, the margin between the best and the second-best
// logit, each voxel's margin in whole units of 1/MarginScale logit (rounded down, capped at
// MarginCapUnits) so that the sums are exact integers whatever the order the engine adds them
// in. An eighth of the foreground estimates the mean margin as well as all of it, and the GPU's
// fused kernel pays for the margin on those planes only (docs/gpu-engine.md).
type Confidence struct {
	Voxels       int64   // voxels labelled
	Labels       []int64 // voxels per label, by label (the model's classes): every plane
	MarginVoxels int64   // foreground voxels of the sampled planes, whose margins are counted
	MarginSum    int64   // sum of their margin units (MarginUnits)
	LowMargin    int64   // those whose margin is below LowMarginUnits (1 logit)
}

// The margin's fixed-point units; the CUDA kernels use the same (VP_MARGIN_SCALE, VP_MARGIN_CAP,
// VP_LOW_MARGIN in engine/cuda/kernels/common.cuh).
const (
	MarginScale    = 64    // units per logit
	MarginCapUnits = 65535 // a margin counts at most this (about 1024 logits)
	LowMarginUnits = 64    // a foreground voxel whose margin is below 1 logit is a low-margin voxel
	// MarginStride: margins are counted on the planes whose z is a multiple of it.
	MarginStride = 8
)

// MarginPlane reports whether the margins of plane z are counted (Confidence).
func MarginPlane(z int) bool { return z%MarginStride == 0 }

// MarginUnits is a margin (best minus second-best logit) as Confidence counts it: floor(m *
// MarginScale), capped at MarginCapUnits; 0 for a NaN or negative margin.
func MarginUnits(m float32) int64 {
	if !(m > 0) {
		return 0
	}
	if v := m * MarginScale; v < MarginCapUnits {
		return int64(v) // truncation: the kernels' __float2uint_rz
	}
	return MarginCapUnits
}

// Add adds o's counts to c (the confidence of two parts of a volume).
func (c *Confidence) Add(o Confidence) {
	if len(c.Labels) < len(o.Labels) {
		c.Labels = append(c.Labels, make([]int64, len(o.Labels)-len(c.Labels))...)
	}
	for i, n := range o.Labels {
		c.Labels[i] += n
	}
	c.Voxels += o.Voxels
	c.MarginVoxels += o.MarginVoxels
	c.MarginSum += o.MarginSum
	c.LowMargin += o.LowMargin
}

// MeanMargin is the mean foreground margin in logits (over the sampled planes); NaN without
// foreground there.
func (c Confidence) MeanMargin() float64 {
	if c.MarginVoxels == 0 {
		return math.NaN()
	}
	return float64(c.MarginSum) / MarginScale / float64(c.MarginVoxels)
}

// LowFraction is the fraction of the foreground (of the sampled planes) with a margin below 1
// logit; NaN without foreground there.
func (c Confidence) LowFraction() float64 {
	if c.MarginVoxels == 0 {
		return math.NaN()
	}
	return float64(c.LowMargin) / float64(c.MarginVoxels)
}

// LabelFraction is the fraction of the voxels labelled l; NaN without voxels.
func (c Confidence) LabelFraction(l int) float64 {
	if c.Voxels == 0 {
		return math.NaN()
	}
	if l < 0 || l >= len(c.Labels) {
		return 0
	}
	return float64(c.Labels[l]) / float64(c.Voxels)
}

// ForegroundFraction is the fraction of the voxels labelled foreground (label > 0); NaN without
// voxels.
func (c Confidence) ForegroundFraction() float64 {
	if c.Voxels == 0 || len(c.Labels) == 0 {
		return math.NaN()
	}
	return 1 - float64(c.Labels[0])/float64(c.Voxels)
}
