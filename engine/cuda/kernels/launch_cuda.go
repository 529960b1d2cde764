//go:build cuda

package kernels

import (
	"fmt"
	"math"
	"unsafe"

	"gorgonia.org/cu"
)

// One thin wrapper per kernel: Go arguments typed exactly as the C parameters (int32, float32,
// cu.DevicePtr), checked, then launched on the given stream. Launches are asynchronous; a fault
// inside a kernel shows at the next synchronisation.

// args holds kernel arguments in 8-byte slots: gorgonia.org/cu's Function.Launch copies 8 bytes
// from every parameter pointer, so an int32 or float32 gets a whole zeroed slot of its own rather
// than a pointer to 4 bytes.
type args struct {
	slot [16]uint64
	n    int
}

func (a *args) ptr(p cu.DevicePtr) *args { a.slot[a.n] = uint64(p); a.n++; return a }
func (a *args) i32(v int32) *args {
	*(*int32)(unsafe.Pointer(&a.slot[a.n])) = v
	a.n++
	return a
}
func (a *args) i64(v int64) *args {
	*(*int64)(unsafe.Pointer(&a.slot[a.n])) = v
	a.n++
	return a
}
func (a *args) f32(v float32) *args {
	*(*float32)(unsafe.Pointer(&a.slot[a.n])) = v
	a.n++
	return a
}

func (a *args) params() []unsafe.Pointer {
	p := make([]unsafe.Pointer, a.n)
	for i := range p {
		p[i] = unsafe.Pointer(&a.slot[i])
	}
	return p
}

func launch(name string, fn cu.Function, grid [3]int, block [3]int, st cu.Stream, a *args) error {
	return launchShared(name, fn, grid, block, 0, st, a)
}

// launchShared launches with dynamic shared memory (the fused kernel's VfSmem).
func launchShared(name string, fn cu.Function, grid [3]int, block [3]int, sharedBytes int, st cu.Stream, a *args) error {
	if err := fn.Launch(grid[0], grid[1], grid[2], block[0], block[1], block[2], sharedBytes, st, a.params()); err != nil {
		return fmt.Errorf("kernels: launch %s grid %v block %v: %w", name, grid, block, err)
	}
	return nil
}

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

// maxGateBlocks caps gate_head's grid-stride loop: 8 blocks of 256 threads per multiprocessor on
// a 132-SM H100/H200 and more on smaller GPUs; each thread then loops over several voxels.
const maxGateBlocks = 4096

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
	a := new(args).ptr(in).ptr(e).i32(nx).i32(ny).i32(nz).i32(zE0).i32(nzE).i32(ePlanes).f32(scale).f32(shift)
	return launch(name, fn, [3]int{ceilDiv(nx, TileX), ceilDiv(ny, TileY), ceilDiv(nzE, TileZ)}, [3]int{TileX, TileY, 1}, st, a)
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
	a := new(args).ptr(e).ptr(w).ptr(b).ptr(out).i32(nx).i32(ny).i32(ePlanes).i32(nzOut).i32(oPlanes)
	return launch(name, fn, [3]int{ceilDiv(nx, TileX), ceilDiv(ny, TileY), ceilDiv(nzOut, TileZ)}, [3]int{TileX, TileY, 1}, st, a)
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

// GateHead launches gate_head: labels [nzOut][ny][nx] uint8 from s and g ([Channels][sPlanes][ny][nx]),
// the foreground's margins on the sampled planes (z0, the first output plane's z in the volume,
// plus its index, a multiple of MarginStride) added to conf (ConfLen counters,
// ConfForeground..ConfLow).
func (m *Module) GateHead(st cu.Stream, s, g, labels, conf cu.DevicePtr, nx, ny, z0, nzOut, sPlanes, classes int32) error {
	const name = "gate_head"
	if err := checkPtrs(name, s, g, labels, conf); err != nil {
		return err
	}
	if nx < 1 || ny < 1 || nzOut < 1 || sPlanes < nzOut || z0 < 0 {
		return fmt.Errorf("kernels: %s: %dx%dx%d voxels from plane %d in buffers of %d planes", name, nx, ny, nzOut, z0, sPlanes)
	}
	if classes < 1 || classes > MaxClasses {
		return fmt.Errorf("kernels: %s: %d classes (want 1..%d)", name, classes, MaxClasses)
	}
	n := int64(nx) * int64(ny) * int64(nzOut)
	blocks := int(min((n+gateThreads-1)/gateThreads, maxGateBlocks))
	a := new(args).ptr(s).ptr(g).ptr(labels).ptr(conf).i32(nx).i32(ny).i32(z0).i32(nzOut).i32(sPlanes).i32(classes)
	return launch(name, m.gateHead, [3]int{blocks, 1, 1}, [3]int{gateThreads, 1, 1}, st, a)
}

// maxCountBlocks caps count_confidence's grid: each thread then loops over several words of
// labels.
const maxCountBlocks = 1024

// CountConfidence launches count_confidence on a slab of nzOut planes of plane labels whose
// first plane is z0 in the volume: the voxels of each label added to conf (ConfLabels + label)
// and, when logits is not 0 (the fused kernel's: FusedLogitBytes), the foreground's margins on
// the sampled planes (ConfForeground..ConfLow). labels must be 4-byte aligned; the kernel reads
// whole words, up to 3 bytes past the slab (the engine's label buffers have guard bytes after
// them).
func (m *Module) CountConfidence(st cu.Stream, labels, logits, conf cu.DevicePtr, plane int64, z0, nzOut, classes int32) error {
	const name = "count_confidence"
	if err := checkPtrs(name, labels, conf); err != nil {
		return err
	}
	n := plane * int64(nzOut)
	if labels%4 != 0 || logits%4 != 0 || plane < 1 || nzOut < 1 || z0 < 0 || classes < 1 || classes > MaxClasses {
		return fmt.Errorf("kernels: %s: %d planes of %d labels at %v from plane %d, logits at %v, %d classes", name, nzOut, plane, labels, z0, logits, classes)
	}
	words := int32(0)
	if logits != 0 {
		words = FusedLogitWords(classes)
	}
	blocks := int(min((n+4*gateThreads-1)/(4*gateThreads), maxCountBlocks))
	a := new(args).ptr(labels).ptr(logits).i32(words).ptr(conf).i64(plane).i32(z0).i32(nzOut).i32(classes)
	return launch(name, m.countConfidence, [3]int{blocks, 1, 1}, [3]int{gateThreads, 1, 1}, st, a)
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
	a := new(args).ptr(in).ptr(labels).ptr(logits).ptr(weights).i32(nx).i32(ny).i32(nz).i32(z0).i32(nzOut).i32(zChunk).f32(scale).f32(shift).i32(classes)
	return launchShared(name, fn, [3]int{ceilDiv(nx, FusedTileX), ceilDiv(ny, g.Rows), ceilDiv(nzOut, zChunk)}, [3]int{int(g.Threads), 1, 1}, int(g.SharedBytes), st, a)
}
