//go:build cuda

package kernels

import (
	"fmt"

	"gorgonia.org/cu"
)

// The checked launchers of gate_head.cu.

// maxGateBlocks caps gate_head's grid-stride loop: 8 blocks of 256 threads per multiprocessor on
// a 132-SM H100/H200 and more on smaller GPUs; each thread then loops over several voxels.
const maxGateBlocks = 4096

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
	a := new(Args).Ptr(s).Ptr(g).Ptr(labels).Ptr(conf).I32(nx).I32(ny).I32(z0).I32(nzOut).I32(sPlanes).I32(classes)
	return Launch(name, m.gateHead, [3]int{blocks, 1, 1}, [3]int{gateThreads, 1, 1}, st, a)
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
	a := new(Args).Ptr(labels).Ptr(logits).I32(words).Ptr(conf).I64(plane).I32(z0).I32(nzOut).I32(classes)
	return Launch(name, m.countConfidence, [3]int{blocks, 1, 1}, [3]int{gateThreads, 1, 1}, st, a)
}
