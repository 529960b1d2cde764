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

// convVector computes what convChunks does at voxels 0..nx-1 with the vector kernels k (not
// kernelsGo) and returns how many voxels it did: nx, or 0 where there are no chunks. It checks
// every index the assembly will touch, which trusts them.
func convVector(k kernels, chunk int, dst []float32, nx int, in []float32, offs []int, w [][block]float32, bias *[block]float32, cp int) int {
	if nx <= 0 || len(offs) == 0 {
		return 0
	}
	last := (nx - 1) * cp
	if cp < block || slices.Min(offs) < 0 || last+slices.Max(offs)+chunk > len(in) || last+block > len(dst) || len(offs)*chunk > len(w) {
		panic("cpu: convVector: an index out of range")
	}
	if chunk != 8 && chunk != 16 {
		panic("cpu: convVector: chunks of 8 or 16 only")
	}
	f := convAVX2x8
	switch {
	case k == kernelsAVX2 && chunk == 16:
		f = convAVX2x16
	case k == kernelsFMA && chunk == 16:
		f = convFMAx16
	case k == kernelsFMA:
		f = convFMAx8
	}
	f(&dst[0], &in[0], offs, &w[0][0], &bias[0], nx, cp)
	return nx
}
