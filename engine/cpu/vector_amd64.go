//go:build !purego

package cpu

import (
	"slices"
	"voxpipe/model"

	"golang.org/x/sys/cpu"
)

// The generated kernels need AVX2 (and FMA for kernelsFMA) and the OS's saving of YMM state,
// which x/sys/cpu checks.
var (
	hasAVX2   = cpu.X86.HasAVX2
	hasFMA    = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	hasAVX512 = cpu.X86.HasAVX2 && cpu.X86.HasAVX512F
)

// vectorKernels are the kernels for chunks of 3 (conv1), 8 and 16 values, one block of 8
// output channels; kernelsAVX512 runs AVX2's on a block left without a pair (convWide does the
// pairs).
var vectorKernels = map[kernels][3]func(dst, in *float32, offs []int, w, bias *float32, n, stride, dstStride int){
	kernelsAVX2:   {convAVX2x3, convAVX2x8, convAVX2x16},
	kernelsFMA:    {convFMAx3, convFMAx8, convFMAx16},
	kernelsAVX512: {convAVX2x3, convAVX2x8, convAVX2x16},
}

// convVector computes, with the vector kernels k (not kernelsGo), what voxelChunks8/16 (chunk
// 8 or 16) or voxelConv1 (chunk 3) compute at nx voxels, inStride float32s apart in in and
// dstStride in dst, and returns how many voxels it did: nx, or 0 where there are no chunks. It
// checks every index the assembly will touch, which trusts them.
func convVector(k kernels, chunk int, dst []float32, nx int, in []float32, offs []int, w [][block]float32, bias *[block]float32, inStride, dstStride int) int {
	i, ok := convChecks("convVector", block, chunk, dst, nx, in, offs, len(w), inStride, dstStride)
	if !ok {
		return 0
	}
	vectorKernels[k][i](&dst[0], &in[0], offs, &w[0][0], &bias[0], nx, inStride, dstStride)
	return nx
}

// wideKernels are the AVX-512 kernels for chunks of 3 (conv1), 8 and 16 values: 16 output
// channels (two blocks) at once.
var wideKernels = [3]func(dst, in *float32, offs []int, w, bias *float32, n, stride, dstStride int){convAVX512x3, convAVX512x8, convAVX512x16}

// convWide is convVector for two blocks of output channels at once (kernelsAVX512): w holds
// both blocks' weight rows side by side (packWide), bias and each voxel's outputs are 16
// channels. It returns nx, or 0 where there are no chunks, and checks every index the
// assembly will touch.
func convWide(chunk int, dst []float32, nx int, in []float32, offs []int, w [][wide]float32, bias *[wide]float32, inStride, dstStride int) int {
	i, ok := convChecks("convWide", wide, chunk, dst, nx, in, offs, len(w), inStride, dstStride)
	if !ok {
		return 0
	}
	wideKernels[i](&dst[0], &in[0], offs, &w[0][0], &bias[0], nx, inStride, dstStride)
	return nx
}

// convChecks checks every index a convolution kernel writing outputs float32s a voxel will
// touch (panicking, in name, where one is out of range) and returns the kernel's index for
// chunk (3, 8 or 16); ok is false where there is nothing to do (no voxels or no chunks).
func convChecks(name string, outputs, chunk int, dst []float32, nx int, in []float32, offs []int, weightRows, inStride, dstStride int) (i int, ok bool) {
	if nx <= 0 || len(offs) == 0 {
		return 0, false
	}
	lastIn, lastDst := (nx-1)*inStride, (nx-1)*dstStride
	if inStride < 0 || (nx > 1 && dstStride < outputs) || slices.Min(offs) < 0 || lastIn+slices.Max(offs)+chunk > len(in) || lastDst+outputs > len(dst) || len(offs)*chunk > weightRows {
		panic("cpu: " + name + ": an index out of range")
	}
	if i = slices.Index([]int{3, 8, 16}, chunk); i < 0 {
		panic("cpu: " + name + ": chunks of 3, 8 or 16 only")
	}
	return i, true
}

// gateVector is gateAVX2 on n voxels (a multiple of 8) of rows transposed to [channel][x],
// stride float32s apart: p[x] is the gate's value before the sigmoid. It checks every index
// the assembly will touch.
func gateVector(p, s, g []float32, m *model.Model, n, stride int) {
	c, gate := m.Channels, m.Gate()
	rows := (c-1)*stride + n
	if n <= 0 || n%8 != 0 || stride < n || len(p) < n || len(s) < rows || len(g) < rows ||
		len(m.WXW) < gate*c || len(m.WGW) < gate*c || len(m.WXB) < gate || len(m.WGB) < gate || len(m.PsiW) < gate || len(m.PsiB) < 1 {
		panic("cpu: gateVector: an index out of range")
	}
	gateAVX2(&p[0], &s[0], &g[0], &m.WXW[0], &m.WXB[0], &m.WGW[0], &m.WGB[0], &m.PsiW[0], &m.PsiB[0], c, gate, n, stride)
}

// headVector is headAVX2 on n voxels (a multiple of 8) of rows transposed to [channel][x]
// (and l to [class][x]), stride float32s apart: s becomes f = a*s + g, l the logits. It checks
// every index the assembly will touch.
func headVector(l, s, g, a []float32, m *model.Model, n, stride int) {
	c, k := m.Channels, m.Classes
	rows := (c-1)*stride + n
	if n <= 0 || n%8 != 0 || stride < n || len(a) < n || len(s) < rows || len(g) < rows || len(l) < (k-1)*stride+n ||
		len(m.HeadW) < k*c || len(m.HeadB) < k {
		panic("cpu: headVector: an index out of range")
	}
	headAVX2(&l[0], &s[0], &g[0], &a[0], &m.HeadW[0], &m.HeadB[0], c, k, n, stride)
}

// transposeVector is transposeAVX2 on n voxels (a multiple of 8) of cp channels (a multiple of
// 8): dst[i*stride+x] = src[x*cp+i]. It checks every index the assembly will touch.
func transposeVector(dst, src []float32, cp, n, stride int) {
	if n <= 0 || n%8 != 0 || cp <= 0 || cp%8 != 0 || stride < n || len(src) < n*cp || len(dst) < (cp-1)*stride+n {
		panic("cpu: transposeVector: an index out of range")
	}
	transposeAVX2(&dst[0], &src[0], cp, n/8, stride)
}
