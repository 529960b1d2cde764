package geometry

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// imageReference is Image written plainly: three passes over whole volumes, each tap's plane
// added to the whole output plane. Image must give the same bits.
func imageReference[T int16 | float32](r *Resample, src []T) []float32 {
	in, out := r.In, r.Out
	plane := in[0] * in[1]
	a := make([]float32, plane*out[2])
	for o := range out[2] {
		combineWhole(a[o*plane:(o+1)*plane], src, plane, r.taps[2][o])
	}
	b := a
	if out[1] != in[1] {
		b = make([]float32, in[0]*out[1]*out[2])
		for z := range out[2] {
			sp := a[z*plane : (z+1)*plane]
			dp := b[z*in[0]*out[1] : (z+1)*in[0]*out[1]]
			for o, t := range r.taps[1] {
				combineWhole(dp[o*in[0]:(o+1)*in[0]], sp, in[0], t)
			}
		}
	}
	if out[0] == in[0] {
		return b
	}
	c := make([]float32, out[0]*out[1]*out[2])
	for row := range out[1] * out[2] {
		s := b[row*in[0] : (row+1)*in[0]]
		for o, t := range r.taps[0] {
			var acc float32
			for k, w := range t.w {
				acc += float32(w * s[t.first+k])
			}
			c[row*out[0]+o] = acc
		}
	}
	return c
}

func combineWhole[T int16 | float32](d []float32, s []T, n int, t taps) {
	for i := range n {
		d[i] = t.w[0] * float32(s[t.first*n+i])
	}
	for k := 1; k < len(t.w); k++ {
		for i := range n {
			d[i] += float32(t.w[k] * float32(s[(t.first+k)*n+i]))
		}
	}
}

// TestImageMatchesReference: random shapes (odd sizes, planes larger than a chunk, some axes
// kept), up- and downsampled, int16 and float32: Image's bits equal the plain reference's.
func TestImageMatchesReference(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 36))
	for trial := range 42 {
		in := [3]int{1 + rng.IntN(150), 1 + rng.IntN(90), 1 + rng.IntN(40)}
		if trial >= 40 { // large enough for the goroutines
			in = [3]int{301, 203, 37}
		}
		var inMM, want [3]float64
		for a := range 3 {
			inMM[a] = 0.3 + 2*rng.Float64()
			want[a] = 0.3 + 3*rng.Float64()
			if rng.IntN(4) == 0 {
				want[a] = inMM[a] // kept
			}
		}
		rs, err := NewResample(in, inMM, want)
		if err != nil {
			t.Fatal(err)
		}
		n := in[0] * in[1] * in[2]
		i16, f32 := make([]int16, n), make([]float32, n)
		for i := range n {
			i16[i] = int16(rng.IntN(65536) - 32768)
			f32[i] = float32(rng.NormFloat64() * 1000)
		}
		equalBits(t, trial, "int16", Image(rs, i16), imageReference(rs, i16))
		equalBits(t, trial, "float32", Image(rs, f32), imageReference(rs, f32))
		// The budget holds what Image makes (output and scratch are at most ImageBytes).
		if got := int64(4 * rs.Out[0] * rs.Out[1] * rs.Out[2]); got > rs.ImageBytes() {
			t.Fatalf("trial %d: ImageBytes %d below the output's %d bytes", trial, rs.ImageBytes(), got)
		}
	}
}

func equalBits(t *testing.T, trial int, kind string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("trial %d %s: %d values, want %d", trial, kind, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("trial %d %s: value %d = %v, reference %v", trial, kind, i, got[i], want[i])
		}
	}
}

// gatherReference is gather written plainly, voxel by voxel.
func gatherReference[T any](dst, src []T, out [3]int, t [3][]int) {
	for z := range out[2] {
		for y := range out[1] {
			for x := range out[0] {
				dst[x+out[0]*(y+out[1]*z)] = src[t[0][x]+t[1][y]+t[2][z]]
			}
		}
	}
}

// TestGatherMatchesReference: tables with runs of repeated entries (labels from coarser grids,
// where gather copies planes and rows) and without (reorientations), small and large enough for
// the goroutines: gather equals the plain reference.
func TestGatherMatchesReference(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 6))
	for trial := range 30 {
		out := [3]int{1 + rng.IntN(70), 1 + rng.IntN(60), 1 + rng.IntN(50)}
		if trial >= 28 {
			out = [3]int{257, 131, 41}
		}
		in := [3]int{1 + rng.IntN(20), 1 + rng.IntN(20), 1 + rng.IntN(20)}
		stride := [3]int{1, in[0], in[0] * in[1]}
		var tab [3][]int
		for a := range 3 {
			tab[a] = make([]int, out[a])
			for o := range out[a] {
				switch {
				case trial%3 == 0: // monotone with repeats, as nearest() makes
					tab[a][o] = min(in[a]-1, o*in[a]/out[a]) * stride[a]
				case trial%3 == 1 && o > 0 && rng.IntN(2) == 0: // a random repeat
					tab[a][o] = tab[a][o-1]
				default:
					tab[a][o] = rng.IntN(in[a]) * stride[a]
				}
			}
		}
		src := make([]uint8, in[0]*in[1]*in[2])
		for i := range src {
			src[i] = uint8(rng.IntN(256))
		}
		got, want := make([]uint8, out[0]*out[1]*out[2]), make([]uint8, out[0]*out[1]*out[2])
		gather(got, src, out, tab)
		gatherReference(want, src, out, tab)
		if !bytes.Equal(got, want) {
			t.Fatalf("trial %d (out %v, in %v): gather differs from the reference", trial, out, in)
		}
	}
}

// TestCombineRowMatchesGo: combineRow (the AVX2 kernels where the CPU has them) gives
// combineGo's bits for every length from 0 to 80, set and add, int16 and float32 sources, and
// writes nothing outside d (canaries on both sides).
func TestCombineRowMatchesGo(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 8))
	const pad = 9
	canary := math.Float32frombits(0x7fc0_dead)
	for n := range 81 {
		for _, add := range []bool{false, true} {
			w := float32(rng.NormFloat64())
			i16, f32 := make([]int16, n), make([]float32, n)
			for i := range n {
				i16[i] = int16(rng.IntN(65536) - 32768)
				f32[i] = float32(rng.NormFloat64() * 1e3)
			}
			start := make([]float32, n)
			for i := range start {
				start[i] = float32(rng.NormFloat64() * 1e4)
			}
			for _, kind := range []string{"int16", "float32"} {
				buf := make([]float32, n+2*pad)
				for i := range buf {
					buf[i] = canary
				}
				got := buf[pad : pad+n]
				want := make([]float32, n)
				copy(got, start)
				copy(want, start)
				if kind == "int16" {
					combineRow(got, i16, w, add)
					combineGo(want, i16, w, add)
				} else {
					combineRow(got, f32, w, add)
					combineGo(want, f32, w, add)
				}
				equalBits(t, n, kind, got, want)
				for i := range pad {
					if math.Float32bits(buf[i]) != math.Float32bits(canary) || math.Float32bits(buf[pad+n+i]) != math.Float32bits(canary) {
						t.Fatalf("n %d %s add %v: a canary beside d changed", n, kind, add)
					}
				}
			}
		}
	}
}
