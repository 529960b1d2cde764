package cpu

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkConvKernels measures convChunks alone, one 8-channel block of conv2 (C=16) over a
// row of 96 voxels, with each kernel set this CPU has, in GFLOP/s (a multiply-add counts 2).
//
//	go test -run '^$' -bench ConvKernels ./engine/cpu/
func BenchmarkConvKernels(b *testing.B) {
	const nx, cp, chunk = 96, 16, 16
	rng := rand.New(rand.NewPCG(37, 3))
	c := newKernelCase(rng, kernelShape{cp, cp, chunk}, nx, 27, 1, ordinary)
	// conv2's offsets: 9 rows (dz, dy) of 3 voxels, each row its own stretch of memory.
	rowLen := (nx + 4) * cp
	for i := range c.offs {
		c.offs[i] = i/3*rowLen + i%3*cp
	}
	in := make([]float32, 9*rowLen+nx*cp)
	for i := range in {
		in[i] = ordinary(rng)
	}
	dst := make([]float32, nx*cp)
	flops := 2 * float64(nx*len(c.offs)*chunk*block)
	for _, k := range []kernels{kernelsGo, kernelsAVX2, kernelsFMA, kernelsAVX512} {
		if (k == kernelsAVX2 && !hasAVX2) || (k == kernelsFMA && !hasFMA) || (k == kernelsAVX512 && !hasAVX512) {
			continue
		}
		b.Run(k.String(), func(b *testing.B) {
			e := &Engine{cp: cp, chunk: chunk, kern: k}
			if k == kernelsAVX512 { // both blocks in one call: the same work as two 8-channel calls
				ww := packWide(append(append([][block]float32{}, c.w...), c.w...), len(c.w))
				bias := make([]float32, wide)
				for b.Loop() {
					e.convWide(dst, 0, nx, in, c.offs, ww, len(c.w), bias, chunk, cp)
				}
				b.ReportMetric(2*flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				return
			}
			for b.Loop() {
				e.convChunks(dst, nx, in, c.offs, c.w, &c.bias)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
