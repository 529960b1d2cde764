package cpu

import (
	"math"
	"testing"
)

// exactKernels are the vector kernel sets that must equal the pure-Go kernels bit for bit and
// that this CPU runs.
func exactKernels() []kernels {
	var ks []kernels
	if hasAVX2 {
		ks = append(ks, kernelsAVX2)
	}
	if hasAVX512 {
		ks = append(ks, kernelsAVX512)
	}
	return ks
}

// TestAVX512KernelsMatchGo: the AVX-512 kernels, two blocks of 8 output channels at once from
// weights packed side by side (packWide), equal the pure-Go kernels on each block bit for bit,
// for every remainder of x modulo the 12- and 4-voxel groups, on awkward values, touching
// nothing outside each voxel's 16 outputs (canaries between voxels when cp > 16).
func TestAVX512KernelsMatchGo(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512 kernels on this CPU or GOARCH")
	}
	rng := avx2Test(t, 7)
	for _, s := range kernelShapes {
		if s.cp%wide != 0 {
			continue
		}
		for nx := 1; nx <= 30; nx++ {
			for _, chunks := range []int{1, 3, s.chunks()} {
				lo := newKernelCase(rng, s, nx, chunks, 5*s.cp, special)
				hi := newKernelCase(rng, s, nx, chunks, 5*s.cp, special)
				// The second block reads the first's inputs at the first's offsets.
				hi.offs, hi.inBuf = lo.offs, lo.inBuf
				kernel := map[int]func(*[block]float32, []float32, []int, [][block]float32, *[block]float32){
					3: voxelConv1, 8: voxelChunks8, 16: voxelChunks16}[s.chunk]
				dstLen := (nx-1)*s.cp + wide
				want := canaries(dstLen)
				for x := range nx {
					kernel((*[block]float32)(want[x*s.cp:]), lo.in()[x*s.inStride:], lo.offs, lo.w, &lo.bias)
					kernel((*[block]float32)(want[x*s.cp+block:]), lo.in()[x*s.inStride:], lo.offs, hi.w, &hi.bias)
				}
				ww := packWide(append(append([][block]float32{}, lo.w...), hi.w...), len(lo.w))
				var bias [wide]float32
				copy(bias[:block], lo.bias[:])
				copy(bias[block:], hi.bias[:])
				dstBuf := canaries(dstLen + 2*pad)
				dst := dstBuf[pad : pad+dstLen]
				if n := convWide(s.chunk, dst, nx, lo.in(), lo.offs, ww, &bias, s.inStride, s.cp); n != nx {
					t.Fatalf("convWide did %d voxels of %d", n, nx)
				}
				for i, v := range dstBuf {
					j := i - pad
					inVoxel := j >= 0 && j < dstLen && j%s.cp < wide
					switch {
					case !inVoxel && math.Float32bits(v) != math.Float32bits(canary):
						t.Fatalf("cp %d chunk %d nx %d: dst[%d] = %v: a canary overwritten", s.cp, s.chunk, nx, j, v)
					case inVoxel && math.Float32bits(v) != math.Float32bits(want[j]):
						t.Fatalf("cp %d chunk %d nx %d chunks %d: dst[%d] = %v (%#x), Go kernel %v (%#x)",
							s.cp, s.chunk, nx, chunks, j, v, math.Float32bits(v), want[j], math.Float32bits(want[j]))
					}
				}
				for i, v := range lo.inBuf {
					if j := i - pad; (j < 0 || j >= len(lo.in())) && math.Float32bits(v) != math.Float32bits(canary) {
						t.Fatalf("the canary at in[%d] changed", j)
					}
				}
			}
		}
	}
}

// TestPackWide: pair p's row j is block 2p's row j then block 2p+1's; an odd last block is left
// out.
func TestPackWide(t *testing.T) {
	t.Parallel()
	const rows = 5
	w := make([][block]float32, 3*rows) // three blocks
	for i := range w {
		for k := range block {
			w[i][k] = float32(i*block + k)
		}
	}
	p := packWide(w, rows)
	if len(p) != rows {
		t.Fatalf("%d rows, want %d (one pair)", len(p), rows)
	}
	for j := range rows {
		for k := range block {
			if p[j][k] != w[j][k] || p[j][block+k] != w[rows+j][k] {
				t.Fatalf("row %d: %v", j, p[j])
			}
		}
	}
}
