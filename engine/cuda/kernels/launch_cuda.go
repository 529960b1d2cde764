//go:build cuda

package kernels

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// One thin wrapper per kernel, in the file named after its .cu (conv1_cuda.go, conv_cc_cuda.go,
// gate_head_cuda.go, fused_cuda.go): Go arguments typed exactly as the C parameters (int32, float32,
// cu.DevicePtr), checked, then launched on the given stream. Launches are asynchronous; a fault
// inside a kernel shows at the next synchronisation.

// Args holds kernel arguments in 8-byte slots, for the launchers here and the lab's kernels:
// gorgonia.org/cu's Function.Launch copies 8 bytes from every parameter pointer, so an int32 or
// float32 gets a whole zeroed slot of its own rather than a pointer to 4 bytes.
type Args struct {
	slot [16]uint64
	n    int
}

func (a *Args) Ptr(p cu.DevicePtr) *Args { a.slot[a.n] = uint64(p); a.n++; return a }
func (a *Args) I32(v int32) *Args {
	*(*int32)(unsafe.Pointer(&a.slot[a.n])) = v
	a.n++
	return a
}
func (a *Args) I64(v int64) *Args {
	*(*int64)(unsafe.Pointer(&a.slot[a.n])) = v
	a.n++
	return a
}
func (a *Args) F32(v float32) *Args {
	*(*float32)(unsafe.Pointer(&a.slot[a.n])) = v
	a.n++
	return a
}

func (a *Args) Params() []unsafe.Pointer {
	p := make([]unsafe.Pointer, a.n)
	for i := range p {
		p[i] = unsafe.Pointer(&a.slot[i])
	}
	return p
}

// Launch launches fn on st with a's arguments, the error naming the kernel.
func Launch(name string, fn cu.Function, grid [3]int, block [3]int, st cu.Stream, a *Args) error {
	return LaunchShared(name, fn, grid, block, 0, st, a)
}

// LaunchShared launches with dynamic shared memory (the fused kernel's VfSmem).
func LaunchShared(name string, fn cu.Function, grid [3]int, block [3]int, sharedBytes int, st cu.Stream, a *Args) error {
	if err := fn.Launch(grid[0], grid[1], grid[2], block[0], block[1], block[2], sharedBytes, st, a.Params()); err != nil {
		return fmt.Errorf("kernels: launch %s grid %v block %v: %w", name, grid, block, err)
	}
	return nil
}

// checkPlane validates the in-plane size shared by every kernel: grid limits (y and z dims at
// most 65535 blocks) and a plane that indexes in int32 per row.
func checkPlane(name string, nx, ny int32) error {
	if nx < 1 || ny < 1 {
		return fmt.Errorf("kernels: %s: plane %dx%d", name, nx, ny)
	}
	if ceilDiv(ny, TileY) > 65535 {
		return fmt.Errorf("kernels: %s: ny %d too large for the grid", name, ny)
	}
	return nil
}

func checkPtrs(name string, ptrs ...cu.DevicePtr) error {
	for i, p := range ptrs {
		if p == 0 {
			return fmt.Errorf("kernels: %s: pointer argument %d is null", name, i)
		}
	}
	return nil
}

func checkPlanes(name string, planes int32) error {
	if planes < 1 || ceilDiv(planes, TileZ) > 65535 {
		return fmt.Errorf("kernels: %s: %d planes (want 1..%d)", name, planes, 65535*TileZ)
	}
	return nil
}

// EPlanes is how many planes of e to allocate for output slabs of up to slab planes: conv2 and
// convg read whole VP_TZ-plane tiles, 2 halo planes on each side.
func EPlanes(slab int32) int32 { return (slab+TileZ-1)/TileZ*TileZ + 4 }
