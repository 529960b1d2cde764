//go:build !purego

package cpu

import (
	"slices"

	"golang.org/x/sys/cpu"
)

// The generated kernels need AVX2 (and FMA for kernelsFMA) and the OS's saving of YMM state,
// which x/sys/cpu checks.
var (
	hasAVX2 = cpu.X86.HasAVX2
	hasFMA  = cpu.X86.HasAVX2 && cpu.X86.HasFMA
)

// vectorKernels are the kernels for chunks of 3 (conv1), 8 and 16 values.
var vectorKernels = map[kernels][3]func(dst, in *float32, offs []int, w, bias *float32, n, stride, dstStride int){
	kernelsAVX2: {convAVX2x3, convAVX2x8, convAVX2x16},
	kernelsFMA:  {convFMAx3, convFMAx8, convFMAx16},
}

// convVector computes, with the vector kernels k (not kernelsGo), what voxelChunks8/16 (chunk
// 8 or 16) or voxelConv1 (chunk 3) compute at nx voxels, inStride float32s apart in in and
// dstStride in dst, and returns how many voxels it did: nx, or 0 where there are no chunks. It
// checks every index the assembly will touch, which trusts them.
func convVector(k kernels, chunk int, dst []float32, nx int, in []float32, offs []int, w [][block]float32, bias *[block]float32, inStride, dstStride int) int {
	if nx <= 0 || len(offs) == 0 {
		return 0
	}
	lastIn, lastDst := (nx-1)*inStride, (nx-1)*dstStride
	if inStride < 0 || (nx > 1 && dstStride < block) || slices.Min(offs) < 0 || lastIn+slices.Max(offs)+chunk > len(in) || lastDst+block > len(dst) || len(offs)*chunk > len(w) {
		panic("cpu: convVector: an index out of range")
	}
	i := slices.Index([]int{3, 8, 16}, chunk)
	if i < 0 {
		panic("cpu: convVector: chunks of 3, 8 or 16 only")
	}
	vectorKernels[k][i](&dst[0], &in[0], offs, &w[0][0], &bias[0], nx, inStride, dstStride)
	return nx
}
