package segment

import (
	"errors"
	"time"
)

// ErrNoCUDA is returned by the CUDA entry points of a binary built without the cuda tag.
var ErrNoCUDA = errors.New("segment: built without CUDA support (rebuild with -tags cuda)")

// ErrEngineClosed is returned by an engine used after Close.
var ErrEngineClosed = errors.New("segment: engine closed")

// GPUStats is what the GPU engine measured with CUDA events during its last Segment call: sums
// over the slabs of each stream's work, and the span from the call's first GPU event to its last.
type GPUStats struct {
	Slabs int

	H2D, Kernels, D2H time.Duration // per stream, summed over slabs
	// Kernel groups (their sum is Kernels).
	Conv1, Conv2, ConvG, GateHead time.Duration
	// Total is from the reference event recorded at the start of Segment to the end of the last
	// download: the GPU's pinned-in to pinned-out time for the volume.
	Total time.Duration

	H2DBytes, D2HBytes int64
	Voxels             int64
	// Pinned is true when both the volume and the mask were page-locked host memory; pageable
	// memory copies about 17x slower (docs/gpu-engine.md).
	Pinned bool
}

// GPUStatsReporter is implemented by the CUDA engine: the figures benchmarks report.
type GPUStatsReporter interface {
	LastStats() GPUStats
}
