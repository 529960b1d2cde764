package cpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"voxpipe/engine/engine"
	"voxpipe/internal/enginetest"
	"voxpipe/model"
	"voxpipe/phantom"
)

// avx2Test skips t where there are no AVX2 kernels, else marks it parallel and returns its
// random numbers.
func avx2Test(t *testing.T, seed uint64) *rand.Rand {
	t.Helper()
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this CPU or GOARCH")
	}
	t.Parallel()
	return rand.New(rand.NewPCG(37, seed))
}

// gateHeadShapes are the (channels, classes) of the gate and head tests: gates of 1 to 17,
// channel counts that are not multiples of 8, one class and many.
var gateHeadShapes = [][2]int{{2, 1}, {6, 3}, {8, 4}, {16, 4}, {20, 9}, {34, 2}}

// awkwardModel is a random model whose weights are, with seed%2 == 1, the special values.
func awkwardModel(c, k int, seed uint64) *model.Model {
	m := model.RandomModel(c, k, seed)
	if seed%2 == 1 {
		rng := rand.New(rand.NewPCG(seed, 3))
		for _, w := range [][]float32{m.WXW, m.WXB, m.WGW, m.WGB, m.PsiW, m.PsiB, m.HeadW, m.HeadB} {
			for i := range w {
				w[i] = special(rng)
			}
		}
	}
	return m
}

// sameBits says whether got and want are the same float32, any NaN matching any NaN (their
// payloads never reach a label: comparisons with NaN are false whatever the payload).
func sameBits(got, want float32) bool {
	return math.Float32bits(got) == math.Float32bits(want) || (got != got && want != want)
}

// rowsCase is n voxels of rows channels transposed, stride float32s apart, with canaries
// around the buffer and in the gaps between rows.
func rowsCase(rng *rand.Rand, rows, n, stride int, value func(*rand.Rand) float32) []float32 {
	b := canaries(2*pad + (rows-1)*stride + n)
	for i := range rows {
		for x := range n {
			b[pad+i*stride+x] = value(rng)
		}
	}
	return b
}

// checkCanaries fails when a float32 of b outside the n columns of its rows is no canary.
func checkCanaries(t *testing.T, name string, b []float32, rows, n, stride int) {
	t.Helper()
	for i, v := range b {
		j := i - pad
		if j >= 0 && j < (rows-1)*stride+n && j%stride < n {
			continue
		}
		if math.Float32bits(v) != math.Float32bits(canary) {
			t.Fatalf("%s[%d] = %v: a canary overwritten", name, j, v)
		}
	}
}

// TestGateHeadKernelsMatchGo: gateAVX2 equals gatePre, and headAVX2 the reference's f and
// logits (dotAdd), bit for bit at every voxel, for 1 to 13 registers of 8 voxels (every
// remainder of the 4-register passes), on awkward values and weights, reading and writing
// nothing outside their rows.
func TestGateHeadKernelsMatchGo(t *testing.T) {
	rng := avx2Test(t, 4)
	for si, sh := range gateHeadShapes {
		c, k := sh[0], sh[1]
		for n := 8; n <= 104; n += 8 {
			m, stride := awkwardModel(c, k, uint64(si*100+n)), n+3
			sBuf, gBuf := rowsCase(rng, c, n, stride, special), rowsCase(rng, c, n, stride, special)
			s, g := sBuf[pad:len(sBuf)-pad], gBuf[pad:len(gBuf)-pad]
			pBuf, lBuf := canaries(n+2*pad), canaries(2*pad+(k-1)*stride+n)
			p, l := pBuf[pad:pad+n], lBuf[pad:len(lBuf)-pad]
			gateVector(p, s, g, m, n, stride)
			sv, gv, f := make([]float32, c), make([]float32, c), make([]float32, c)
			a := make([]float32, n)
			for x := range n {
				for i := range c {
					sv[i], gv[i] = s[i*stride+x], g[i*stride+x]
				}
				if want := gatePre(m, sv, gv); !sameBits(p[x], want) {
					t.Fatalf("C%d n %d: gate at voxel %d = %v, Go %v", c, n, x, p[x], want)
				}
				a[x] = sigmoid(p[x])
				if x%5 == 0 {
					a[x] = special(rng)
				}
			}
			checkCanaries(t, "p", pBuf, 1, n, n)
			checkCanaries(t, "s", sBuf, c, n, stride)
			sOld := append([]float32(nil), s...)
			headVector(l, s, g, a, m, n, stride)
			for x := range n {
				for i := range c {
					f[i] = float32(a[x]*sOld[i*stride+x]) + g[i*stride+x]
					if got := s[i*stride+x]; !sameBits(got, f[i]) {
						t.Fatalf("C%d n %d: f[%d] at voxel %d = %v, Go %v", c, n, i, x, got, f[i])
					}
				}
				for j := range k {
					if got, want := l[j*stride+x], dotAdd(m.HeadB[j], m.HeadW[j*c:], f); !sameBits(got, want) {
						t.Fatalf("C%d n %d: logit %d at voxel %d = %v, Go %v", c, n, j, x, got, want)
					}
				}
			}
			checkCanaries(t, "s", sBuf, c, n, stride)
			checkCanaries(t, "g", gBuf, c, n, stride)
			checkCanaries(t, "l", lBuf, k, n, stride)
		}
	}
}

// TestGateHeadRowVectorMatchesGo: gateHeadRowVector's labels and Confidence (label counts,
// margins) equal gateHeadRow's for rows of 1 to 41 voxels, on awkward and ordinary values.
func TestGateHeadRowVectorMatchesGo(t *testing.T) {
	rng := avx2Test(t, 5)
	for si, sh := range gateHeadShapes {
		for nx := 1; nx <= 41; nx++ {
			m := awkwardModel(sh[0], sh[1], uint64(si*100+nx))
			ref, vec := New(m, 1), New(m, 1)
			ref.kern, vec.kern = kernelsGo, kernelsAVX2
			value := special
			if nx%2 == 0 {
				value = ordinary
			}
			rs, vs := ref.scratch[0], vec.scratch[0]
			rs.s, rs.g = make([]float32, nx*ref.cp), make([]float32, nx*ref.cp)
			for i := range rs.s {
				rs.s[i], rs.g[i] = value(rng), value(rng)
			}
			// The vector rows are rounded up to 8 voxels; those after nx hold any values.
			vs.s, vs.g, vs.t = canaries(vec.rowVoxels(nx)*vec.cp), canaries(vec.rowVoxels(nx)*vec.cp), canaries(vec.transposedLen(nx))
			copy(vs.s, rs.s)
			copy(vs.g, rs.g)
			want, got := make([]uint8, nx), make([]uint8, nx)
			for _, sampled := range []bool{true, false} {
				ref.gateHeadRow(want, rs, sampled)
				vec.gateHeadRowVector(got, vs, sampled)
				if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(vs.conf, rs.conf) {
					t.Fatalf("C%d K%d nx %d: labels %v conf %+v, Go %v conf %+v", sh[0], sh[1], nx, got, vs.conf, want, rs.conf)
				}
			}
		}
	}
}

// TestVectorConfidenceMatchesGo: with the vector kernels, masks and the volume's Confidence
// equal the pure-Go engine's on random, smooth and phantom volumes.
func TestVectorConfidenceMatchesGo(t *testing.T) {
	t.Parallel()
	_, ph := enginetest.PhantomVolume(t, phantom.Params{NX: 45, NY: 38, NZ: 12, Seed: 7})
	vols := []*model.Volume{enginetest.RandomVolume(29, 11, 6, 1, true), enginetest.SmoothVolume(33, 9, 7, 2), ph}
	for i, sh := range gateHeadShapes {
		m := model.RandomModel(sh[0], sh[1], uint64(i+1))
		for j, vol := range vols {
			t.Run(fmt.Sprintf("C%d/K%d/vol%d", sh[0], sh[1], j), func(t *testing.T) {
				var conf [2]model.Confidence
				var out [2][]uint8
				for r, kern := range []kernels{kernelsGo, defaultKernels} {
					e := newWithKernels(m, 2, kern)
					out[r] = make([]uint8, vol.NX*vol.NY*vol.NZ)
					if err := e.Segment(context.Background(), vol, out[r], engine.Options{Slab: 4, Confidence: &conf[r]}); err != nil {
						t.Fatal(err)
					}
				}
				if !reflect.DeepEqual(out[1], out[0]) || !reflect.DeepEqual(conf[1], conf[0]) {
					t.Fatalf("%v kernels: masks equal %v, confidence %+v, Go %+v", defaultKernels, reflect.DeepEqual(out[1], out[0]), conf[1], conf[0])
				}
			})
		}
	}
}

// TestTransposeKernel: transposeAVX2 moves every value of 1 to 6 blocks of 8 voxels to its
// place, and writes nothing between or around the rows.
func TestTransposeKernel(t *testing.T) {
	rng := avx2Test(t, 6)
	for _, cp := range []int{8, 16, 24, 48} {
		for n := 8; n <= 48; n += 8 {
			stride := n + 3
			src := make([]float32, n*cp)
			for i := range src {
				src[i] = special(rng)
			}
			dBuf := canaries(2*pad + (cp-1)*stride + n)
			transposeVector(dBuf[pad:len(dBuf)-pad], src, cp, n, stride)
			for x := range n {
				for i := range cp {
					if got, want := dBuf[pad+i*stride+x], src[x*cp+i]; math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("cp %d n %d: channel %d voxel %d = %v, want %v", cp, n, i, x, got, want)
					}
				}
			}
			checkCanaries(t, "dst", dBuf, cp, n, stride)
		}
	}
}
