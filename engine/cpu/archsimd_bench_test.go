//go:build goexperiment.simd && amd64

package cpu

// The comparison the package doc quotes: the conv kernels written with Go 1.26's
// simd/archsimd (GOEXPERIMENT=simd only) against the avo kernels, on BenchmarkConvKernels'
// case. Built and run only with the experiment:
//
//	GOEXPERIMENT=simd go test -run ArchSIMD -bench ArchSIMD ./engine/cpu/

import (
	"math"
	"math/rand/v2"
	"simd/archsimd"
	"testing"
)

// convSIMD8 is convChunks16's work with simd/archsimd Float32x8: 8 voxels a group (8
// accumulators; the compiler allocates the registers), products rounded before each add.
func convSIMD8(dst []float32, nx int, in []float32, offs []int, w [][block]float32, bias *[block]float32, stride, dstStride int) {
	b := archsimd.LoadFloat32x8(bias)
	zero := archsimd.BroadcastFloat32x8(0)
	x := 0
	for ; x+8 <= nx; x += 8 {
		a0, a1, a2, a3, a4, a5, a6, a7 := b, b, b, b, b, b, b, b
		wi := 0
		for _, off := range offs {
			p := in[x*stride+off:]
			p = p[:7*stride+16]
			for i := range 16 {
				wv := archsimd.LoadFloat32x8(&w[wi])
				wi++
				a0 = a0.Add(wv.Mul(archsimd.BroadcastFloat32x8(p[0*stride+i])))
				a1 = a1.Add(wv.Mul(archsimd.BroadcastFloat32x8(p[1*stride+i])))
				a2 = a2.Add(wv.Mul(archsimd.BroadcastFloat32x8(p[2*stride+i])))
				a3 = a3.Add(wv.Mul(archsimd.BroadcastFloat32x8(p[3*stride+i])))
				a4 = a4.Add(wv.Mul(archsimd.BroadcastFloat32x8(p[4*stride+i])))
				a5 = a5.Add(wv.Mul(archsimd.BroadcastFloat32x8(p[5*stride+i])))
				a6 = a6.Add(wv.Mul(archsimd.BroadcastFloat32x8(p[6*stride+i])))
				a7 = a7.Add(wv.Mul(archsimd.BroadcastFloat32x8(p[7*stride+i])))
			}
		}
		a0.Max(zero).StoreSlice(dst[(x+0)*dstStride:])
		a1.Max(zero).StoreSlice(dst[(x+1)*dstStride:])
		a2.Max(zero).StoreSlice(dst[(x+2)*dstStride:])
		a3.Max(zero).StoreSlice(dst[(x+3)*dstStride:])
		a4.Max(zero).StoreSlice(dst[(x+4)*dstStride:])
		a5.Max(zero).StoreSlice(dst[(x+5)*dstStride:])
		a6.Max(zero).StoreSlice(dst[(x+6)*dstStride:])
		a7.Max(zero).StoreSlice(dst[(x+7)*dstStride:])
	}
	for ; x < nx; x++ {
		a := b
		wi := 0
		for _, off := range offs {
			p := in[x*stride+off:]
			for i := range 16 {
				a = a.Add(archsimd.LoadFloat32x8(&w[wi]).Mul(archsimd.BroadcastFloat32x8(p[i])))
				wi++
			}
		}
		a.Max(zero).StoreSlice(dst[x*dstStride:])
	}
}

// convSIMD16 is convChunks16's work with simd/archsimd Float32x16: 8 voxels a group (8
// accumulators; the compiler allocates the registers), products rounded before each add.
func convSIMD16(dst []float32, nx int, in []float32, offs []int, w [][wide]float32, bias *[wide]float32, stride, dstStride int) {
	b := archsimd.LoadFloat32x16(bias)
	zero := archsimd.BroadcastFloat32x16(0)
	x := 0
	for ; x+8 <= nx; x += 8 {
		a0, a1, a2, a3, a4, a5, a6, a7 := b, b, b, b, b, b, b, b
		wi := 0
		for _, off := range offs {
			p := in[x*stride+off:]
			p = p[:7*stride+16]
			for i := range 16 {
				wv := archsimd.LoadFloat32x16(&w[wi])
				wi++
				a0 = a0.Add(wv.Mul(archsimd.BroadcastFloat32x16(p[0*stride+i])))
				a1 = a1.Add(wv.Mul(archsimd.BroadcastFloat32x16(p[1*stride+i])))
				a2 = a2.Add(wv.Mul(archsimd.BroadcastFloat32x16(p[2*stride+i])))
				a3 = a3.Add(wv.Mul(archsimd.BroadcastFloat32x16(p[3*stride+i])))
				a4 = a4.Add(wv.Mul(archsimd.BroadcastFloat32x16(p[4*stride+i])))
				a5 = a5.Add(wv.Mul(archsimd.BroadcastFloat32x16(p[5*stride+i])))
				a6 = a6.Add(wv.Mul(archsimd.BroadcastFloat32x16(p[6*stride+i])))
				a7 = a7.Add(wv.Mul(archsimd.BroadcastFloat32x16(p[7*stride+i])))
			}
		}
		a0.Max(zero).StoreSlice(dst[(x+0)*dstStride:])
		a1.Max(zero).StoreSlice(dst[(x+1)*dstStride:])
		a2.Max(zero).StoreSlice(dst[(x+2)*dstStride:])
		a3.Max(zero).StoreSlice(dst[(x+3)*dstStride:])
		a4.Max(zero).StoreSlice(dst[(x+4)*dstStride:])
		a5.Max(zero).StoreSlice(dst[(x+5)*dstStride:])
		a6.Max(zero).StoreSlice(dst[(x+6)*dstStride:])
		a7.Max(zero).StoreSlice(dst[(x+7)*dstStride:])
	}
	for ; x < nx; x++ {
		a := b
		wi := 0
		for _, off := range offs {
			p := in[x*stride+off:]
			for i := range 16 {
				a = a.Add(archsimd.LoadFloat32x16(&w[wi]).Mul(archsimd.BroadcastFloat32x16(p[i])))
				wi++
			}
		}
		a.Max(zero).StoreSlice(dst[x*dstStride:])
	}
}

// simdCase is BenchmarkConvKernels' case: conv2 (C=16, chunks of 16) over a row of 96 voxels.
func simdCase() (c *kernelCase, in, dst []float32, ww [][wide]float32, bias [wide]float32) {
	const nx, cp = 96, 16
	rng := rand.New(rand.NewPCG(37, 3))
	c = newKernelCase(rng, kernelShape{cp, cp, 16}, nx, 27, 1, ordinary)
	rowLen := (nx + 4) * cp
	for i := range c.offs {
		c.offs[i] = i/3*rowLen + i%3*cp
	}
	in = make([]float32, 9*rowLen+nx*cp)
	for i := range in {
		in[i] = ordinary(rng)
	}
	ww = packWide(append(append([][block]float32{}, c.w...), c.w...), len(c.w))
	copy(bias[:block], c.bias[:])
	copy(bias[block:], c.bias[:])
	return c, in, make([]float32, nx*cp), ww, bias
}

// TestArchSIMDMatchesGo: the archsimd kernels compute what the Go kernels do (so the
// benchmark compares equal work).
func TestArchSIMDMatchesGo(t *testing.T) {
	c, in, dst, ww, bias := simdCase()
	const nx, cp = 96, 16
	want := make([]float32, nx*cp)
	for x := range nx {
		voxelChunks16((*[block]float32)(want[x*cp:]), in[x*cp:], c.offs, c.w, &c.bias)
		voxelChunks16((*[block]float32)(want[x*cp+block:]), in[x*cp:], c.offs, c.w, &c.bias)
	}
	convSIMD16(dst, nx, in, c.offs, ww, &bias, cp, cp)
	for i := range dst {
		if math.Float32bits(dst[i]) != math.Float32bits(want[i]) {
			t.Fatalf("Float32x16: dst[%d] = %v, Go %v", i, dst[i], want[i])
		}
	}
	clear(dst)
	convSIMD8(dst, nx, in, c.offs, c.w, &c.bias, cp, cp)
	for x := range nx {
		for k := range block {
			if i := x*cp + k; math.Float32bits(dst[i]) != math.Float32bits(want[i]) {
				t.Fatalf("Float32x8: dst[%d] = %v, Go %v", i, dst[i], want[i])
			}
		}
	}
}

// BenchmarkArchSIMD: GFLOP/s of the archsimd kernels and of the avo kernels on the same case
// (an 8-channel block for x8 and AVX2, both blocks for x16 and AVX-512).
func BenchmarkArchSIMD(b *testing.B) {
	c, in, dst, ww, bias := simdCase()
	const nx, cp = 96, 16
	flops := 2 * float64(nx*len(c.offs)*16*block)
	report := func(b *testing.B, f float64) { b.ReportMetric(f*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s") }
	b.Run("archsimd-x8", func(b *testing.B) {
		for b.Loop() {
			convSIMD8(dst, nx, in, c.offs, c.w, &c.bias, cp, cp)
		}
		report(b, flops)
	})
	b.Run("avo-avx2", func(b *testing.B) {
		e := &Engine{cp: cp, chunk: 16, kern: kernelsAVX2}
		for b.Loop() {
			e.convChunks(dst, nx, in, c.offs, c.w, &c.bias)
		}
		report(b, flops)
	})
	if !hasAVX512 {
		return
	}
	b.Run("archsimd-x16", func(b *testing.B) {
		for b.Loop() {
			convSIMD16(dst, nx, in, c.offs, ww, &bias, cp, cp)
		}
		report(b, 2*flops)
	})
	b.Run("avo-avx512", func(b *testing.B) {
		e := &Engine{cp: cp, chunk: 16, kern: kernelsAVX512}
		for b.Loop() {
			e.convWide(dst, 0, nx, in, c.offs, ww, len(c.w), bias[:], 16, cp)
		}
		report(b, 2*flops)
	})
}
