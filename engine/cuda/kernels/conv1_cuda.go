//go:build cuda

package kernels

import (
	"fmt"
	"math"

	"gorgonia.org/cu"
)

// The checked launchers of conv1.cu.

func (m *Module) conv1(name string, fn cu.Function, st cu.Stream, in, e cu.DevicePtr, nx, ny, nz, zE0, nzE, ePlanes int32, scale, shift float32) error {
	if err := checkPtrs(name, in, e); err != nil {
		return err
	}
	if err := checkPlane(name, nx, ny); err != nil {
		return err
	}
	if err := checkPlanes(name, nzE); err != nil {
		return err
	}
	if nz < 1 || ePlanes < nzE {
		return fmt.Errorf("kernels: %s: nz %d, %d e planes in a buffer of %d", name, nz, nzE, ePlanes)
	}
	if math.IsNaN(float64(scale)) || math.IsNaN(float64(shift)) || math.IsInf(float64(scale), 0) || math.IsInf(float64(shift), 0) {
		return fmt.Errorf("kernels: %s: normalisation %g, %g not finite", name, scale, shift)
	}
	a := new(Args).Ptr(in).Ptr(e).I32(nx).I32(ny).I32(nz).I32(zE0).I32(nzE).I32(ePlanes).F32(scale).F32(shift)
	return Launch(name, fn, [3]int{ceilDiv(nx, TileX), ceilDiv(ny, TileY), ceilDiv(nzE, TileZ)}, [3]int{TileX, TileY, 1}, st, a)
}

// Conv1I16 launches conv1_i16: e planes [0, nzE) (global z zE0+p) from int16 stored values; in
// holds nzE+2 planes starting at global z zE0-1 (those outside [0, nz) are never read); e is
// [Channels][ePlanes][ny][nx] float32.
func (m *Module) Conv1I16(st cu.Stream, in, e cu.DevicePtr, nx, ny, nz, zE0, nzE, ePlanes int32, scale, shift float32) error {
	return m.conv1("conv1_i16", m.conv1I16, st, in, e, nx, ny, nz, zE0, nzE, ePlanes, scale, shift)
}

// Conv1F32 is Conv1I16 for float32 stored values.
func (m *Module) Conv1F32(st cu.Stream, in, e cu.DevicePtr, nx, ny, nz, zE0, nzE, ePlanes int32, scale, shift float32) error {
	return m.conv1("conv1_f32", m.conv1F32, st, in, e, nx, ny, nz, zE0, nzE, ePlanes, scale, shift)
}
