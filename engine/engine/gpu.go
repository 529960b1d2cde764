package engine

import (
	"errors"
	"fmt"
	"time"
)

// ErrNoCUDA is returned by the CUDA entry points of a binary built without the cuda tag.
var ErrNoCUDA = errors.New("engine: built without CUDA support (rebuild with -tags cuda)")

// ErrEngineClosed is returned by an engine used after Close.
var ErrEngineClosed = errors.New("engine: engine closed")

// Precisions of the CUDA engine (CUDAOptions.Precision).
const (
	// PrecisionFP16 is one fused kernel per slab: fp16 operands on the tensor cores with fp32
	// accumulation, intermediates on chip. The default: about 10x faster than fp32, masks equal
	// to fp32's on at least 99.9% of voxels (docs/gpu-engine.md).
	PrecisionFP16 = "fp16"
	// PrecisionFP32 is the float32 kernels (conv1, conv2, convg, gate_head): the reference.
	PrecisionFP32 = "fp32"
)

// ErrBadPrecision is wrapped by errors about an unknown CUDAOptions.Precision.
var ErrBadPrecision = errors.New("engine: unknown precision")

// CUDAOptions configures the CUDA engine (cuda.NewWith). The zero value is the default.
type CUDAOptions struct {
	Precision string // PrecisionFP16 (also when empty) or PrecisionFP32
}

// precision returns o.Precision with the default applied, or an error for an unknown one.
// Resolved is the precision to run: fp16 when none is set; an unknown one wraps ErrBadPrecision.
func (o CUDAOptions) Resolved() (string, error) {
	switch o.Precision {
	case "", PrecisionFP16:
		return PrecisionFP16, nil
	case PrecisionFP32:
		return PrecisionFP32, nil
	}
	return "", fmt.Errorf("%w %q (want %s or %s)", ErrBadPrecision, o.Precision, PrecisionFP16, PrecisionFP32)
}

// Validate reports an unknown precision without opening anything.
func (o CUDAOptions) Validate() error {
	_, err := o.Resolved()
	return err
}

// GPUStats is what the GPU engine measured with CUDA events during its last Segment call: sums
// over the slabs of each stream's work, and the span from the call's first GPU event to its last.
type GPUStats struct {
	Slabs int

	// H2D and D2H: copy time summed over slabs; Kernels: time with at least one kernel running
	// (the fp16 engine's kernels of consecutive slabs overlap).
	H2D, Kernels, D2H time.Duration
	// Kernel groups (their sum is Kernels): the fp32 engine's four kernels, or the fp16 engine's
	// one fused kernel.
	Conv1, Conv2, ConvG, GateHead time.Duration
	Fused                         time.Duration
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
