// Package engine is what every engine shares: the Engine interface and its options and events,
// the optional interfaces engines may implement, and the checks of their inputs. The engines
// are engine/cpu and engine/cuda; engine/open picks them for a run.
package engine

import (
	"context"
	"time"
	"voxpipe/model"
	"voxpipe/stage"
)

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
	Confidence *model.Confidence
}

// Engine computes label masks. Out has NX*NY*NZ entries; Segment fills all of it or returns an
// error. Engines are used by one goroutine at a time.
type Engine interface {
	Name() string // "cpu", "cuda:0", ...
	Segment(ctx context.Context, vol *model.Volume, out []uint8, opt Options) error
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
