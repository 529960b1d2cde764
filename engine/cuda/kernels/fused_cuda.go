//go:build cuda

package kernels

import (
	"fmt"
	"math"

	"gorgonia.org/cu"
)

// The checked launcher of fused.cu.

// FusedKernel is the fused kernel Fused launches for an input type and a number of classes, and
// its name: fused_i16 or fused_f32, their _k16 builds for more than FusedNarrowClasses.
func (m *Module) FusedKernel(int16Input bool, classes int32) (name string, fn cu.Function) {
	switch {
	case int16Input && classes > FusedNarrowClasses:
		return "fused_i16_k16", m.fusedI16K16
	case int16Input:
		return "fused_i16", m.fusedI16
	case classes > FusedNarrowClasses:
		return "fused_f32_k16", m.fusedF32K16
	}
	return "fused_f32", m.fusedF32
}

// Fused launches fused_i16 (int16 input) or fused_f32 (their _k16 builds for models of more than
// 8 classes): the whole network on the tensor cores for output planes [0, nzOut) of a slab
// whose first output plane is global z0, labels [nzOut][ny][nx], and the logits of the planes
// sampled for the confidence into logits (FusedLogitBytes, for CountConfidence). in holds
// planes global z0-3 .. z0+nzOut+2 (planes outside
// [0, nz) are never read); weights is DeviceWeights.Fused. Each block streams zChunk output
// planes (FusedZChunk with the module's FusedGeometry().Rows).
func (m *Module) Fused(st cu.Stream, int16Input bool, in, labels, logits, weights cu.DevicePtr, nx, ny, nz, z0, nzOut, zChunk int32, scale, shift float32, classes int32) error {
	name, fn := m.FusedKernel(int16Input, classes)
	if err := checkPtrs(name, in, labels, logits, weights); err != nil {
		return err
	}
	if weights%16 != 0 {
		return fmt.Errorf("kernels: %s: weights at %v are not 16-byte aligned", name, weights)
	}
	if nx < 1 || ny < 1 || nz < 1 || nzOut < 1 || zChunk < 1 || z0 < 0 || z0+nzOut > nz {
		return fmt.Errorf("kernels: %s: output planes %d..%d of a %dx%dx%d volume, chunks of %d", name, z0, int64(z0)+int64(nzOut), nx, ny, nz, zChunk)
	}
	g := m.fused
	if ceilDiv(ny, g.Rows) > 65535 || ceilDiv(nzOut, zChunk) > 65535 {
		return fmt.Errorf("kernels: %s: grid too large for ny %d, %d planes in chunks of %d", name, ny, nzOut, zChunk)
	}
	if classes < 1 || classes > MaxClasses {
		return fmt.Errorf("kernels: %s: %d classes (want 1..%d)", name, classes, MaxClasses)
	}
	if math.IsNaN(float64(scale)) || math.IsNaN(float64(shift)) || math.IsInf(float64(scale), 0) || math.IsInf(float64(shift), 0) {
		return fmt.Errorf("kernels: %s: normalisation %g, %g not finite", name, scale, shift)
	}
	a := new(Args).Ptr(in).Ptr(labels).Ptr(logits).Ptr(weights).I32(nx).I32(ny).I32(nz).I32(z0).I32(nzOut).I32(zChunk).F32(scale).F32(shift).I32(classes)
	return LaunchShared(name, fn, [3]int{ceilDiv(nx, FusedTileX), ceilDiv(ny, g.Rows), ceilDiv(nzOut, zChunk)}, [3]int{int(g.Threads), 1, 1}, int(g.SharedBytes), st, a)
}
