package segment

import (
	"context"
	"math"
	"time"
	"voxpipe/stage"
)

// Norm is the affine map from stored voxel values to the network's input:
// x = float32(v)*Scale + Shift, with scl_slope/scl_inter, mu and sigma folded in.
type Norm struct {
	Scale, Shift float32
}

// Volume is one input volume in host memory, stored values (before scl_slope/scl_inter) in
// exactly one of I16 or F32, x fastest. Engines read it; nobody writes it while they run.
// For the CUDA engine these slices are pinned host memory.
type Volume struct {
	NX, NY, NZ int
	I16        []int16
	F32        []float32
	Norm       Norm
}

// Event is one timed piece of work an engine did, reported so the pipeline can write it to
// timings.csv and the trace. Start is relative to the engine's Segment call.
type Event struct {
	Stage    stage.Stage // StageSegment for the CPU engine; StageH2D, StageKernels, StageD2H for the GPU engine
	Slab     int         // slab index, -1 for whole-volume work
	Start    time.Duration
	Duration time.Duration
	Bytes    int64
	Voxels   int64
}

// Options tells an engine how to cut a volume into slabs and where to report.
type Options struct {
	Slab    int         // output z-slices per slab (>= 1); the last slab may be thinner
	OnEvent func(Event) // may be nil; called from the engine's goroutines, must be safe for that

	// OnSlabDone, which may be nil, is called once out[z0*NX*NY : z1*NX*NY] holds final labels
	// that the engine will not touch again. On a successful Segment the calls cover [0, NZ)
	// exactly once, in increasing z order, each range starting where the previous ended; after
	// an error they cover a prefix. It may be called from the engine's goroutines (the CUDA
	// engine's OS-locked thread) and must return promptly: it must never wait for anything
	// that waits for the engine (the pipeline only records the progress and wakes the writer).
	OnSlabDone func(z0, z1 int)

	// Confidence, which may be nil, receives the model's confidence over the volume (see
	// Confidence) when Segment returns without error; engines accumulate it in their head, as
	// they label each voxel, at no extra pass over the volume.
	Confidence *Confidence
}

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
// VP_LOW_MARGIN in kernels/common.cuh).
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

// Engine computes label masks. Out has NX*NY*NZ entries; Segment fills all of it or returns an
// error. Engines are used by one goroutine at a time.
type Engine interface {
	Name() string // "cpu", "cuda:0", ...
	Segment(ctx context.Context, vol *Volume, out []uint8, opt Options) error
	Close() error
}

// BackgroundOpener is implemented by engines that finish opening after their constructor has
// returned (the CUDA engine makes its context, loads its kernels and uploads its weights on its
// own thread, while the caller goes on reading volumes). Ready waits until the engine is open and
// returns why it could not open; the other methods wait by themselves, so Ready only lets a
// caller fail early.
type BackgroundOpener interface {
	Ready() error
}

// KernelDescriber is implemented by engines that can say which compiled kernels they run (the
// CUDA engine: its kernel image and kernel set) and how long their opening took, by step. Both
// wait for the engine to be open.
type KernelDescriber interface {
	Kernels() (string, error)
	OpenSteps() ([]OpenStep, error)
}

// OpenStep is one step of an engine's opening and its duration (the CUDA engine: "context",
// "kernels", "weights and streams").
type OpenStep struct {
	Name     string
	Duration time.Duration
}
