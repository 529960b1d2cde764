//go:build cuda

package cuda

import (
	"slices"
	"voxpipe/engine/engine"
	"voxpipe/model"
)

// The fp16 engine's slabs grow from Options.Slab, but at most fusedFirstSlab planes, at both
// ends of the volume to at most fusedLargestSlab planes in the middle (SlabRamp), and to at most
// fusedSlotBytes of input per device buffer slot (two slots are allocated). A thin first slab
// is a short upload that nothing hides, a thin last one a short download (docs/perf.md).
const (
	fusedFirstSlab   = 16
	fusedLargestSlab = 256
	fusedSlotBytes   = 512 << 20
)

// slabSizes plans a volume's slabs: Options.Slab planes each for the float32 kernels (their
// e, s and g buffers grow with the slab), SlabRamp for the fused kernel.
func (e *cudaEngine) slabSizes(nz, slab int, planeBytes int64) []int {
	if sum := 0; e.testSlabPlan != nil {
		for _, n := range e.testSlabPlan {
			sum += n
		}
		if sum == nz {
			return slices.Clone(e.testSlabPlan)
		}
	}
	largest := 0
	if e.fused {
		largest = int(min(fusedLargestSlab, fusedSlotBytes/max(planeBytes, 1)))
		slab = min(slab, fusedFirstSlab)
	}
	return engine.SlabRamp(nz, slab, largest)
}

// slabPlan is one slab's geometry.
type slabPlan struct {
	index          int
	z0, z1         int // output planes
	lo, hi         int // input planes uploaded (the halo clipped to the volume)
	inputOffset    int64
	inputBytes     int64
	labelBytes     int64
	outputVoxels   int64
	bufferPlaneOff int64 // input plane lo's index in the device input buffer
}

// planSlab is slab k's geometry: output planes z0..z1 of a volume of nz planes, plane voxels
// each of elem bytes.
func planSlab(k, z0, z1, nz int, plane, elem int64) slabPlan {
	lo, hi := max(z0-model.Halo, 0), min(z1+model.Halo, nz)
	return slabPlan{
		index: k, z0: z0, z1: z1, lo: lo, hi: hi,
		inputOffset:    int64(lo) * plane * elem,
		inputBytes:     int64(hi-lo) * plane * elem,
		labelBytes:     int64(z1-z0) * plane,
		outputVoxels:   int64(z1-z0) * plane,
		bufferPlaneOff: int64(lo - (z0 - model.Halo)),
	}
}
