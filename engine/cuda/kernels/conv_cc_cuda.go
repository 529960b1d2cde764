//go:build cuda

package kernels

import (
	"fmt"

	"gorgonia.org/cu"
)

// The checked launchers of conv_cc.cu.

func (m *Module) convCC(name string, fn cu.Function, st cu.Stream, e, w, b, out cu.DevicePtr, nx, ny, ePlanes, nzOut, oPlanes int32) error {
	if err := checkPtrs(name, e, w, b, out); err != nil {
		return err
	}
	if w%16 != 0 {
		return fmt.Errorf("kernels: %s: weights at %v are not 16-byte aligned", name, w)
	}
	if err := checkPlane(name, nx, ny); err != nil {
		return err
	}
	if err := checkPlanes(name, nzOut); err != nil {
		return err
	}
	if ePlanes < EPlanes(nzOut) || oPlanes < nzOut {
		return fmt.Errorf("kernels: %s: %d output planes need %d e planes and %d output planes; buffers have %d and %d",
			name, nzOut, EPlanes(nzOut), nzOut, ePlanes, oPlanes)
	}
	a := new(Args).Ptr(e).Ptr(w).Ptr(b).Ptr(out).I32(nx).I32(ny).I32(ePlanes).I32(nzOut).I32(oPlanes)
	return Launch(name, fn, [3]int{ceilDiv(nx, TileX), ceilDiv(ny, TileY), ceilDiv(nzOut, TileZ)}, [3]int{TileX, TileY, 1}, st, a)
}

// Conv2 launches conv2: s planes [0, nzOut) from e (e plane o+2 is output plane o); w and b are
// DeviceWeights.W2 and B2.
func (m *Module) Conv2(st cu.Stream, e, w, b, s cu.DevicePtr, nx, ny, ePlanes, nzOut, sPlanes int32) error {
	return m.convCC("conv2", m.conv2, st, e, w, b, s, nx, ny, ePlanes, nzOut, sPlanes)
}

// ConvG launches convg, the dilated conv; w and b are DeviceWeights.WG and BG.
func (m *Module) ConvG(st cu.Stream, e, w, b, g cu.DevicePtr, nx, ny, ePlanes, nzOut, gPlanes int32) error {
	return m.convCC("convg", m.convg, st, e, w, b, g, nx, ny, ePlanes, nzOut, gPlanes)
}
