package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"voxpipe/internal/enginetest"
	"voxpipe/model"
)

// canary is a signalling NaN with a marked payload: the float32s around (and between) the
// vector kernels' outputs that they must leave alone, and those around their inputs, which
// would turn a result into relu(NaN) = 0 if read.
var canary = math.Float32frombits(0x7fa5c0de)

// pad is how many canaries lie on each side of a kernel test's buffers.
const pad = 64

// kernelCase is one call of a vector kernel: buffers with canaries around them, and the pure-Go
// kernels' results.
type kernelCase struct {
	kernelShape
	nx            int
	offs          []int
	w             [][block]float32
	bias          [block]float32
	inBuf, dstBuf []float32 // pad canaries, the buffer, pad canaries
	want          []float32 // the pure-Go kernels' output, laid out as dst
}

func (c *kernelCase) in() []float32  { return c.inBuf[pad : len(c.inBuf)-pad] }
func (c *kernelCase) dst() []float32 { return c.dstBuf[pad : len(c.dstBuf)-pad] }

// kernelShape is where a kernel's voxels lie: cp float32s apart in dst, inStride in in, chunk
// values read at each offset.
type kernelShape struct{ cp, inStride, chunk int }

// kernelShapes are those the engine can have: C -> C convolutions and conv1 (chunk 3).
var kernelShapes = []kernelShape{{8, 8, 8}, {16, 16, 16}, {24, 24, 8}, {32, 32, 16}, {48, 48, 16}, {8, 1, 3}, {16, 1, 3}, {24, 1, 3}}

// chunks is how many offsets the engine gives a kernel of this shape: 27 taps of cp values,
// or conv1's 9 rows of 3.
func (s kernelShape) chunks() int {
	if s.chunk == 3 {
		return 9
	}
	return 27 * s.cp / s.chunk
}

// newKernelCase draws chunk offsets (up to span float32s from a voxel), weights and inputs for
// nx voxels, from values(rng), and computes the pure-Go kernels' output.
func newKernelCase(rng *rand.Rand, s kernelShape, nx, chunks, span int, value func(*rand.Rand) float32) *kernelCase {
	cp, chunk := s.cp, s.chunk
	c := &kernelCase{kernelShape: s, nx: nx, offs: make([]int, chunks), w: make([][block]float32, chunks*chunk)}
	for i := range c.offs {
		c.offs[i] = rng.IntN(span)
	}
	for i := range c.w {
		for k := range block {
			c.w[i][k] = value(rng)
		}
	}
	for k := range block {
		c.bias[k] = value(rng)
	}
	inLen := (nx-1)*s.inStride + slices.Max(c.offs) + chunk
	dstLen := (nx-1)*cp + block
	c.inBuf = canaries(inLen + 2*pad)
	for i := range c.in() {
		c.in()[i] = value(rng)
	}
	c.dstBuf = canaries(dstLen + 2*pad)
	c.want = canaries(dstLen)
	kernel := map[int]func(*[block]float32, []float32, []int, [][block]float32, *[block]float32){
		3: voxelConv1, 8: voxelChunks8, 16: voxelChunks16}[chunk]
	for x := range nx {
		kernel((*[block]float32)(c.want[x*cp:]), c.in()[x*s.inStride:], c.offs, c.w, &c.bias)
	}
	return c
}

func canaries(n int) []float32 {
	b := make([]float32, n)
	for i := range b {
		b[i] = canary
	}
	return b
}

// special draws a float32 that is often awkward: zeros of both signs, denormals, negatives,
// tiny and huge magnitudes, infinities and NaNs among ordinary values.
func special(rng *rand.Rand) float32 {
	sign := float32(1)
	if rng.IntN(2) == 0 {
		sign = -1
	}
	switch rng.IntN(16) {
	case 0:
		return 0 * sign
	case 1:
		return sign * math.Float32frombits(1+rng.Uint32N(0x7fffff)) // denormal
	case 2:
		return sign * float32(math.Ldexp(rng.Float64(), -120-rng.IntN(6)))
	case 3:
		return sign * float32(math.Ldexp(rng.Float64(), 60+rng.IntN(4)))
	case 4:
		if rng.IntN(8) == 0 {
			return float32(math.Inf(int(sign)))
		}
		if rng.IntN(8) == 0 {
			return float32(math.NaN())
		}
	}
	return ordinary(rng)
}

// ordinary draws a float32 of the size the network sees.
func ordinary(rng *rand.Rand) float32 { return float32(rng.NormFloat64()) }

// check runs kernels k on c and compares with the Go kernels: bit for bit when exact, else with
// cmp; the canaries around in and dst, and between dst's blocks, must be unchanged.
func (c *kernelCase) check(t *testing.T, k kernels, cmp func(i int, got, want float32)) {
	t.Helper()
	if n := convVector(k, c.chunk, c.dst(), c.nx, c.in(), c.offs, c.w, &c.bias, c.inStride, c.cp); n != c.nx {
		t.Fatalf("convVector did %d voxels of %d", n, c.nx)
	}
	for i, v := range c.dstBuf {
		j := i - pad
		inBlock := j >= 0 && j < len(c.want) && j%c.cp < block
		switch {
		case !inBlock && math.Float32bits(v) != math.Float32bits(canary):
			t.Fatalf("dst[%d] = %v (%#x): a canary overwritten", j, v, math.Float32bits(v))
		case inBlock:
			cmp(j, v, c.want[j])
		}
	}
	for i, v := range c.inBuf {
		if j := i - pad; (j < 0 || j >= len(c.in())) && math.Float32bits(v) != math.Float32bits(canary) {
			t.Fatalf("the canary at in[%d] changed", j)
		}
	}
}

// TestAVX2KernelsMatchGo: the AVX2 kernels equal the pure-Go kernels (voxelChunks8/16,
// voxelConv1) bit for bit, for every remainder of x modulo the 12- and 4-voxel groups, on
// awkward values, touching nothing else.
func TestAVX2KernelsMatchGo(t *testing.T) {
	rng := avx2Test(t, 1)
	for _, s := range kernelShapes {
		cp, chunk := s.cp, s.chunk
		for nx := 1; nx <= 30; nx++ {
			for _, chunks := range []int{1, 3, s.chunks()} {
				c := newKernelCase(rng, s, nx, chunks, 5*cp, special)
				c.check(t, kernelsAVX2, func(i int, got, want float32) {
					if math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("cp %d chunk %d nx %d chunks %d: dst[%d] = %v (%#x), Go kernel %v (%#x)",
							cp, chunk, nx, chunks, i, got, math.Float32bits(got), want, math.Float32bits(want))
					}
				})
			}
		}
	}
}

// TestFMAKernelsBound: the FMA kernels differ from the Go kernels by no more than two
// recursive summations' error bound, 2(n+1)u times the sum of the terms' magnitudes (u = 2^-24,
// n terms); the largest differences, in ulps and in u times that sum, are logged.
func TestFMAKernelsBound(t *testing.T) {
	if !hasFMA {
		t.Skip("no FMA kernels on this CPU or GOARCH")
	}
	t.Parallel()
	rng := rand.New(rand.NewPCG(37, 2))
	var maxUlps uint32
	var maxU float64 // the largest difference in units of u times the terms' magnitudes
	for _, s := range kernelShapes {
		cp, chunk := s.cp, s.chunk
		for nx := 1; nx <= 30; nx++ {
			chunks := s.chunks()
			c := newKernelCase(rng, s, nx, chunks, 5*cp, ordinary)
			c.check(t, kernelsFMA, func(i int, got, want float32) {
				x, k := i/cp, i%cp
				n, mag := chunks*chunk+1, math.Abs(float64(c.bias[k]))
				for ci, off := range c.offs {
					for j := range chunk {
						mag += math.Abs(float64(c.w[ci*chunk+j][k]) * float64(c.in()[x*c.inStride+off+j]))
					}
				}
				bound := 2 * float64(n+1) * 0x1p-24 * mag
				if d := math.Abs(float64(got) - float64(want)); d > bound {
					t.Fatalf("cp %d nx %d dst[%d] = %v, Go kernel %v: difference %.3g over the bound %.3g", cp, nx, i, got, want, d, bound)
				}
				maxUlps = max(maxUlps, ulps(got, want))
				if mag > 0 {
					maxU = max(maxU, math.Abs(float64(got)-float64(want))/(0x1p-24*mag))
				}
			})
		}
	}
	t.Logf("FMA kernels: at most %d ulps from the Go kernels (near-cancelling sums), %.2f u times the sum of the terms' magnitudes", maxUlps, maxU)
}

// ulps is how many float32s lie between a and b (both finite, >= 0 after relu).
func ulps(a, b float32) uint32 {
	x, y := math.Float32bits(a), math.Float32bits(b)
	return max(x, y) - min(x, y)
}

func TestChooseKernels(t *testing.T) {
	t.Parallel()
	best, avx2 := kernelsGo, kernelsGo
	if hasAVX2 {
		best, avx2 = kernelsAVX2, kernelsAVX2
	}
	if hasAVX512 {
		best = kernelsAVX512
	}
	fma := best
	if hasFMA {
		fma = kernelsFMA
	}
	for env, want := range map[string]kernels{"": best, "go": kernelsGo, "avx2": avx2, "avx512": best, "fma": fma, "junk": best} {
		if got := chooseKernels(env); got != want {
			t.Errorf("VOXPIPE_CPU_KERNELS=%q: %v, want %v", env, got, want)
		}
	}
}

// vectorMasksMatch segments vol with m with the pure-Go kernels and with each bit-identical
// vector kernel set this CPU runs, and reports the first voxel whose labels differ.
func vectorMasksMatch(t testing.TB, m *model.Model, vol *model.Volume, slab int) {
	t.Helper()
	ref := New(m, 2)
	ref.kern = kernelsGo
	want := enginetest.SegmentWhole(t, ref, vol, slab)
	for _, k := range exactKernels() {
		e := newWithKernels(m, 2, k)
		got := enginetest.SegmentWhole(t, e, vol, slab)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("C%d %dx%dx%d slab %d, %v kernels: voxel %d label %d, Go kernels %d",
					m.Channels, vol.NX, vol.NY, vol.NZ, slab, e.kern, i, got[i], want[i])
			}
		}
	}
}

// TestVectorEngineMatchesGo: masks with the default kernels equal the pure-Go kernels' on
// random and smooth volumes, for channel counts giving both chunk sizes and odd rows.
func TestVectorEngineMatchesGo(t *testing.T) {
	t.Parallel()
	for i, c := range []int{16, 8, 6, 20} {
		m := model.RandomModel(c, 4, uint64(i+1))
		for j, d := range [][3]int{{1, 1, 1}, {13, 5, 3}, {29, 4, 5}, {40, 7, 4}} {
			t.Run(fmt.Sprintf("C%d/%dx%dx%d", c, d[0], d[1], d[2]), func(t *testing.T) {
				vectorMasksMatch(t, m, enginetest.RandomVolume(d[0], d[1], d[2], uint64(10*i+j), j%2 == 0), 2)
				vectorMasksMatch(t, m, enginetest.SmoothVolume(d[0], d[1], d[2], uint64(10*i+j)), 3)
			})
		}
	}
}

// FuzzVectorEngine compares the vector and pure-Go kernels' masks on odd shapes: rows of 1 to
// 64 voxels, slabs of 1 and more, both chunk sizes.
func FuzzVectorEngine(f *testing.F) {
	f.Add(uint8(12), uint8(2), uint8(3), uint8(0), uint8(0), uint64(1))
	f.Add(uint8(0), uint8(0), uint8(0), uint8(0), uint8(1), uint64(2))
	f.Add(uint8(16), uint8(1), uint8(5), uint8(2), uint8(3), uint64(3))
	f.Fuzz(func(t *testing.T, nx, ny, nz, slab, channels uint8, seed uint64) {
		x, y, z := 1+int(nx)%64, 1+int(ny)%5, 1+int(nz)%5
		c := []int{16, 8, 6, 20, 3}[int(channels)%5]
		vol := enginetest.RandomVolume(x, y, z, seed, seed%2 == 0)
		vectorMasksMatch(t, model.RandomModel(c, 3, seed), vol, 1+int(slab)%z)
	})
}
