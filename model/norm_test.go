package model

import (
	"math"
	"math/big"
	"runtime"
	"testing"
)

// naiveMeanStd is the two-pass float64 mean and population std of v*slope + inter.
func naiveMeanStd(values []float64, slope, inter float64) (float64, float64) {
	var sum float64
	for _, v := range values {
		sum += v*slope + inter
	}
	mu := sum / float64(len(values))
	var ss float64
	for _, v := range values {
		d := v*slope + inter - mu
		ss += d * d
	}
	return mu, math.Sqrt(ss / float64(len(values)))
}

func relClose(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func TestStatsMatchNaive(t *testing.T) {
	t.Parallel()
	rng := SplitMix64{State: 11}
	cases := []struct {
		name         string
		n            int
		gen          func() float64
		slope, inter float64
		i16          bool
	}{
		{"int16 wide", 10007, func() float64 { return math.Round(60000*rng.Float64() - 30000) }, 1, 0, true},
		{"int16 large offset", 5003, func() float64 { return 32000 + math.Round(4*rng.Float64()) }, 1, 0, true},
		{"int16 negative slope", 4001, func() float64 { return math.Round(2000 * rng.Float64()) }, -0.5, 40, true},
		{"float32 unit", 9001, func() float64 { return float64(float32(rng.Float64() - 0.5)) }, 1, 0, false},
		{"float32 offset 1e6", 3001, func() float64 { return float64(float32(1e6 + 100*rng.Float64())) }, 2, -5, false},
		{"one value", 1, func() float64 { return 7 }, 1, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vals := make([]float64, tc.n)
			for i := range vals {
				vals[i] = tc.gen()
			}
			wantMu, wantSigma := naiveMeanStd(vals, tc.slope, tc.inter)
			if wantSigma < 1e-6*math.Max(1, math.Abs(wantMu)) {
				wantSigma = 1
			}
			// Added in uneven chunks, as a pipeline reading slabs would.
			var st Stats
			for lo := 0; lo < tc.n; {
				hi := min(tc.n, lo+1+lo%977)
				if tc.i16 {
					chunk := make([]int16, hi-lo)
					for i := range chunk {
						chunk[i] = int16(vals[lo+i])
					}
					st.AddInt16(chunk)
				} else {
					chunk := make([]float32, hi-lo)
					for i := range chunk {
						chunk[i] = float32(vals[lo+i])
					}
					st.AddFloat32(chunk)
				}
				lo = hi
			}
			if st.Count() != int64(tc.n) {
				t.Fatalf("count %d, want %d", st.Count(), tc.n)
			}
			mu, sigma := st.MeanStd(tc.slope, tc.inter)
			if !relClose(mu, wantMu, 1e-12) || !relClose(sigma, wantSigma, 1e-9) {
				t.Errorf("MeanStd = %v, %v; naive two-pass %v, %v", mu, sigma, wantMu, wantSigma)
			}
		})
	}
}

func TestStatsSigmaRule(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		values    []float32
		wantSigma float64 // 0: the real sigma is kept
	}{
		{"empty", nil, 1},
		{"constant", []float32{42.5, 42.5, 42.5}, 1},
		{"tiny spread around 0", []float32{0, 1e-7, -1e-7, 0}, 1},
		{"spread below 1e-6*|mu|", []float32{1000, 1000.0001, 999.9999, 1000}, 1},
		{"spread above 1e-6*|mu|", []float32{1000, 1000.01, 999.99, 1000}, 0},
		{"spread of 1e-5 around 0", []float32{1e-5, -1e-5}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var st Stats
			st.AddFloat32(tc.values)
			mu, sigma := st.MeanStd(1, 0)
			if tc.wantSigma != 0 && sigma != tc.wantSigma {
				t.Errorf("sigma %v, want %v (mu %v)", sigma, tc.wantSigma, mu)
			}
			if tc.wantSigma == 0 && (sigma == 1 || sigma <= 0) {
				t.Errorf("sigma %v: the real spread should be kept (mu %v)", sigma, mu)
			}
		})
	}
	if mu, sigma := new(Stats).MeanStd(3, 4); mu != 0 || sigma != 1 {
		t.Errorf("no values: %v, %v, want 0, 1", mu, sigma)
	}
}

func TestNormFor(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                    string
		mu, sigma, slope, inter float64
		wantScale, wantShift    float64
	}{
		{"plain", 100, 20, 1, 0, 1.0 / 20, -100.0 / 20},
		{"slope and inter", 10, 4, 0.5, -20, 0.5 / 4, (-20 - 10) / 4.0},
		{"negative slope", 390, 180, -0.5, 40, -0.5 / 180, (40 - 390) / 180.0},
		{"slope 0 means unscaled", 5, 2, 0, 7, 1.0 / 2, -5.0 / 2},
		{"NaN slope means unscaled", 5, 2, math.NaN(), 7, 1.0 / 2, -5.0 / 2},
		{"sigma 0", 42.5, 0, 1, 0, 1, -42.5},
		{"sigma below the rule", 1000, 5e-4, 1, 0, 1, -1000},
		{"sigma just above the rule", 1000, 2e-3, 1, 0, 1 / 2e-3, -1000 / 2e-3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := NormFor(tc.mu, tc.sigma, tc.slope, tc.inter)
			if n.Scale != float32(tc.wantScale) || n.Shift != float32(tc.wantShift) {
				t.Errorf("NormFor = %+v, want {%v %v}", n, float32(tc.wantScale), float32(tc.wantShift))
			}
			// x must be (v*slope + inter - mu)/sigma, to float32 accuracy.
			slope, inter := effectiveScaling(tc.slope, tc.inter)
			sigma := sigmaFloor(tc.mu, tc.sigma)
			for _, v := range []float32{-300, 0, 17, 1000.25} {
				want := (float64(v)*slope + inter - tc.mu) / sigma
				got := float64(n.Apply(v))
				if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(float64(v)*float64(n.Scale))+math.Abs(float64(n.Shift))) {
					t.Errorf("v=%v: x %v, want %v", v, got, want)
				}
			}
		})
	}
}

// TestNormApplyRoundsTwice checks that Apply rounds the product before adding, never fusing
// the two into an FMA, on values where the two differ.
func TestNormApplyRoundsTwice(t *testing.T) {
	t.Parallel()
	rng := SplitMix64{State: 3}
	found := 0
	for range 100000 {
		v := float32(rng.Float64()*2000 - 1000)
		n := Norm{Scale: float32(rng.Float64()), Shift: float32(rng.Float64()*10 - 5)}
		twice := float32(v*n.Scale) + n.Shift // the conversion forbids fusion here too
		fused := float32(math.FMA(float64(v), float64(n.Scale), float64(n.Shift)))
		if got := n.Apply(v); got != twice {
			t.Fatalf("Apply(%v) with %+v = %v, want %v (product rounded, then sum rounded)", v, n, got, twice)
		}
		if fused != twice {
			found++
		}
	}
	if found == 0 {
		t.Fatal("no value where FMA and two roundings differ: the test proves nothing")
	}
}

func TestStatsNormMatchesNormFor(t *testing.T) {
	t.Parallel()
	var st Stats
	st.AddInt16([]int16{-5, 10, 300, 7, 7})
	mu, sigma := st.MeanStd(-0.5, 40)
	if got, want := st.Norm(-0.5, 40), NormFor(mu, sigma, -0.5, 40); got != want {
		t.Errorf("Stats.Norm %+v, NormFor(MeanStd) %+v", got, want)
	}
}

// Int16 statistics are exact: any split of the values, any parallelism, gives the same bits,
// and extreme values neither overflow nor lose precision.
func TestStatsInt16ExactAndSplitIndependent(t *testing.T) {
	t.Parallel()
	vals := make([]int16, 3<<20+17)
	x := uint64(12345)
	for i := range vals {
		x = x*6364136223846793005 + 1442695040888963407
		vals[i] = int16(x >> 48)
	}
	vals[0], vals[1] = -32768, 32767
	var whole Stats
	whole.AddInt16(vals)
	mu, sigma := whole.MeanStd(1, 0)
	for _, cut := range []int{1, 1000, 1 << 20, len(vals) - 5} {
		var parts Stats
		parts.AddInt16(vals[:cut])
		parts.AddInt16(vals[cut:])
		if m, s := parts.MeanStd(1, 0); m != mu || s != sigma {
			t.Errorf("split at %d: %v %v, whole %v %v", cut, m, s, mu, sigma)
		}
	}
	prev := runtime.GOMAXPROCS(1)
	var serial Stats
	serial.AddInt16(vals)
	runtime.GOMAXPROCS(prev)
	if m, s := serial.MeanStd(1, 0); m != mu || s != sigma {
		t.Errorf("one thread: %v %v, parallel %v %v", m, s, mu, sigma)
	}
	// against exact rationals
	var sum, sq big.Int
	for _, v := range vals {
		w := big.NewInt(int64(v))
		sum.Add(&sum, w)
		sq.Add(&sq, new(big.Int).Mul(w, w))
	}
	n := big.NewInt(int64(len(vals)))
	wantMu, _ := new(big.Rat).SetFrac(&sum, n).Float64()
	num := new(big.Int).Sub(new(big.Int).Mul(n, &sq), new(big.Int).Mul(&sum, &sum))
	wantVar, _ := new(big.Rat).SetFrac(num, new(big.Int).Mul(n, n)).Float64()
	if mu != wantMu || sigma != math.Sqrt(wantVar) {
		t.Errorf("got %v %v, exact %v %v", mu, sigma, wantMu, math.Sqrt(wantVar))
	}
}

// Statistics computed apart and merged equal the sequential ones bit for bit: int16 in any
// split and order; float32 when each slab is summed from StatsFrom(first value) by
// AddFloat32Piece, in pieces of any size, and the slabs merged in order, against AddFloat32 one
// call per slab (the sequential read stage), also with a large offset and a NaN.
// lcg is a linear congruential generator: test data, the same on every run.
type lcg uint64

func (x *lcg) next() uint64 {
	*x = *x*6364136223846793005 + 1442695040888963407
	return uint64(*x >> 33)
}

// float32MergeCase is a float32 volume of planes planes (1000 voxels each) read in slabs.
type float32MergeCase struct {
	name         string
	planes, slab int
	offset       float32
	nan          bool
}

var float32MergeCases = []float32MergeCase{
	{"small values", 23, 4, 0, false},
	{"large offset", 23, 5, 3e6, false},
	{"one slab", 7, 7, -40, false},
	{"slab beyond the volume", 5, 9, 1, false},
	{"plane slabs", 9, 1, 0.5, false},
	{"NaN", 12, 4, 0, true},
}

func TestStatsMergeMatchesSequential(t *testing.T) {
	t.Parallel()
	rng := lcg(99)
	checkInt16Merge(t, &rng)
	for _, tc := range float32MergeCases {
		checkFloat32Merge(t, &rng, tc)
	}
	checkOtherOriginMerge(t, &rng)
}

// checkInt16Merge: int16 stats merged from parts, in any order, are the whole's.
func checkInt16Merge(t *testing.T, rng *lcg) {
	t.Helper()
	i16 := make([]int16, 1<<18+3)
	for i := range i16 {
		i16[i] = int16(rng.next())
	}
	var whole Stats
	whole.AddInt16(i16)
	for _, parts := range []int{2, 3, 7, 64} {
		var merged Stats
		per := (len(i16) + parts - 1) / parts
		for p := parts - 1; p >= 0; p-- { // in reverse: order does not matter for int16
			var part Stats
			part.AddInt16(i16[p*per : min(len(i16), (p+1)*per)])
			merged.Merge(part)
		}
		if merged != whole {
			t.Errorf("int16 in %d parts: %+v, whole %+v", parts, merged, whole)
		}
	}
}

// checkFloat32Merge: float32 stats summed per slab in pieces, as the readers do, and merged
// in slab order are bit for bit the sequential sums over the slabs.
func checkFloat32Merge(t *testing.T, rng *lcg, tc float32MergeCase) {
	t.Helper()
	const plane = 1000
	f32 := make([]float32, tc.planes*plane)
	for i := range f32 {
		f32[i] = tc.offset + float32(math.Float32frombits(0x3f800000|uint32(rng.next())&0x7fffff)-1.5)*977 // full mantissas
	}
	if tc.nan {
		f32[len(f32)/2] = float32(math.NaN())
	}
	var seq Stats
	for z := 0; z < tc.planes; z += tc.slab {
		seq.AddFloat32(f32[z*plane : min(z+tc.slab, tc.planes)*plane])
	}
	for _, piece := range []int{1, 2, 3, tc.slab} { // planes per AddFloat32Piece call
		slabs := make([]Stats, 0, tc.planes/tc.slab+1)
		for z := 0; z < tc.planes; z += tc.slab { // each slab as a reader goroutine sums it
			part := StatsFrom(f32[0])
			end := min(z+tc.slab, tc.planes)
			for p := z; p < end; p += piece {
				part.AddFloat32Piece(f32[p*plane : min(p+piece, end)*plane])
			}
			slabs = append(slabs, part)
		}
		var merged Stats
		for _, part := range slabs {
			merged.Merge(part)
		}
		same := merged.n == seq.n && merged.ref == seq.ref &&
			math.Float64bits(merged.sum) == math.Float64bits(seq.sum) && math.Float64bits(merged.sumSq) == math.Float64bits(seq.sumSq)
		if tc.nan {
			same = merged.n == seq.n && math.IsNaN(merged.sum) && math.IsNaN(seq.sum)
		}
		if !same {
			t.Errorf("%s, pieces of %d planes: merged %+v, sequential %+v", tc.name, piece, merged, seq)
		}
		m1, s1 := merged.MeanStd(2, 1)
		m2, s2 := seq.MeanStd(2, 1)
		if !tc.nan && (m1 != m2 || s1 != s2) {
			t.Errorf("%s: MeanStd %v %v, sequential %v %v", tc.name, m1, s1, m2, s2)
		}
	}
}

// checkOtherOriginMerge: stats of other origins merge shifted, so right to rounding.
func checkOtherOriginMerge(t *testing.T, rng *lcg) {
	t.Helper()
	vals := make([]float32, 5000)
	for i := range vals {
		vals[i] = 100 + float32(rng.next()%1000)/7
	}
	var a, b, all Stats
	a.AddFloat32(vals[:1234])
	b.AddFloat32(vals[1234:]) // origin vals[1234]
	all.AddFloat32(vals)
	a.Merge(b)
	m1, s1 := a.MeanStd(1, 0)
	m2, s2 := all.MeanStd(1, 0)
	if !relClose(m1, m2, 1e-12) || !relClose(s1, s2, 1e-9) || a.Count() != all.Count() {
		t.Errorf("merged with another origin: %v %v (%d), whole %v %v (%d)", m1, s1, a.Count(), m2, s2, all.Count())
	}
}

func BenchmarkStatsInt16(b *testing.B) {
	vals := make([]int16, 64*512*512) // one slab of 64 planes of 512x512
	for i := range vals {
		vals[i] = int16(i * 7)
	}
	b.SetBytes(int64(2 * len(vals)))
	for b.Loop() {
		var s Stats
		s.AddInt16(vals)
	}
}
