package report

import (
	"math"
	"testing"
)

func approx(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %.12g, want %.12g", what, got, want)
	}
}

// Percentiles interpolate linearly between closest ranks (numpy's default): h = (n-1)*p/100,
// value = x[floor h] + (h - floor h) * (x[floor h + 1] - x[floor h]).
func TestPercentile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		sorted []float64
		p      float64
		want   float64
	}{
		{"single value", []float64{7}, 90, 7},
		{"p0 is the minimum", []float64{1, 2, 3}, 0, 1},
		{"p100 is the maximum", []float64{1, 2, 3}, 100, 3},
		{"odd n median is the middle", []float64{1, 2, 10}, 50, 2},
		// h = 3*0.5 = 1.5: 20 + 0.5*(30-20) = 25
		{"even n median averages the middle two", []float64{10, 20, 30, 40}, 50, 25},
		// h = 3*0.9 = 2.7: 30 + 0.7*(40-30) = 37
		{"p90 of four", []float64{10, 20, 30, 40}, 90, 37},
		// h = 4*0.99 = 3.96: 400 + 0.96*(500-400) = 496
		{"p99 of five", []float64{260, 300, 350, 400, 500}, 99, 496},
		// h = 1*0.25 = 0.25: 0 + 0.25*(8-0) = 2
		{"p25 of two", []float64{0, 8}, 25, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			approx(t, "percentile", percentile(tc.sorted, tc.p), tc.want)
		})
	}
	if !math.IsNaN(percentile(nil, 50)) {
		t.Error("percentile of no values should be NaN")
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	// Unsorted on purpose. Sorted: 260 300 350 400 500, n = 5.
	// mean = 1810/5 = 362; p50: h = 2 -> 350; p90: h = 3.6 -> 400 + 0.6*100 = 460;
	// p95: h = 3.8 -> 480; p99: h = 3.96 -> 496; max 500.
	st := summarize([]float64{300, 260, 400, 500, 350})
	if st.Count != 5 {
		t.Errorf("count = %d, want 5", st.Count)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"mean", st.Mean, 362}, {"p50", st.P50, 350}, {"p90", st.P90, 460}, {"p95", st.P95, 480}, {"p99", st.P99, 496}, {"max", st.Max, 500}} {
		approx(t, c.name, c.got, c.want)
	}
}

func TestPairedSpeedup(t *testing.T) {
	t.Parallel()
	// Ratios b/a: 3, 2.1666..., 2.857142..., 2.5; sorted 2.1667 2.5 2.8571 3, median
	// (2.5 + 20/7)/2 = 2.678571...
	a := []float64{100, 120, 140, 200}
	b := []float64{300, 260, 400, 500}
	sp := pairedSpeedup(a, b, 2000, 1)
	if !sp.Paired || sp.N != 4 {
		t.Fatalf("got %+v, want paired over 4 volumes", sp)
	}
	approx(t, "speedup", sp.Value, (2.5+400.0/140)/2)
	// A resample of 4 has the minimum ratio as median when at least 3 draws are the minimum:
	// P = (1 + 4*3)/4^4 = 13/256 ≈ 5.1% > 2.5%, so the 2.5th percentile of 2000 resamples is
	// the smallest ratio; likewise the 97.5th is the largest.
	approx(t, "CI low", sp.Low, 260.0/120)
	approx(t, "CI high", sp.High, 3)

	again := pairedSpeedup(a, b, 2000, 1)
	if *again != *sp {
		t.Errorf("same seed gave %+v then %+v", sp, again)
	}

	// Every ratio 2: the interval collapses.
	sp = pairedSpeedup([]float64{1, 2, 3}, []float64{2, 4, 6}, 500, 7)
	approx(t, "constant speedup", sp.Value, 2)
	approx(t, "constant CI low", sp.Low, 2)
	approx(t, "constant CI high", sp.High, 2)

	// A pair with a zero latency in A has no ratio; one pair left gives no interval.
	sp = pairedSpeedup([]float64{0, 4}, []float64{1, 8}, 100, 1)
	if sp.N != 1 || sp.Value != 2 || !math.IsNaN(sp.Low) {
		t.Errorf("got %+v, want one pair, speedup 2, no interval", sp)
	}
}

func TestUnpairedSpeedup(t *testing.T) {
	t.Parallel()
	// median(B) = 300, median(A) = (120+140)/2 = 130: 300/130 = 2.307692...
	a := []float64{100, 120, 140, 200}
	b := []float64{250, 300, 450}
	sp := unpairedSpeedup(a, b, 2000, 1)
	if sp.Paired || sp.N != 4 || sp.NB != 3 {
		t.Fatalf("got %+v, want unpaired 4 vs 3", sp)
	}
	approx(t, "speedup", sp.Value, 300.0/130)
	// Bounds: the smallest possible resampled ratio is 250/200 = 1.25, the largest 450/100 = 4.5.
	if !(1.25 <= sp.Low && sp.Low <= sp.Value && sp.Value <= sp.High && sp.High <= 4.5) {
		t.Errorf("interval [%g, %g] around %g is outside [1.25, 4.5] or misses the estimate", sp.Low, sp.High, sp.Value)
	}
	again := unpairedSpeedup(a, b, 2000, 1)
	if *again != *sp {
		t.Errorf("same seed gave %+v then %+v", sp, again)
	}
	sp = unpairedSpeedup([]float64{5, 5, 5}, []float64{15, 15}, 300, 3)
	approx(t, "constant CI low", sp.Low, 3)
	approx(t, "constant CI high", sp.High, 3)
	if unpairedSpeedup([]float64{0, 0}, []float64{1, 2}, 10, 1) != nil {
		t.Error("a zero median for A should give no speedup")
	}
}

func TestNiceTicks(t *testing.T) {
	t.Parallel()
	// Range 0..260: raw step 43.3, magnitude 10, nice step 50; labels every 50, minor ticks
	// at the 25s.
	var labels []string
	for _, tk := range (niceTicks{}).Ticks(0, 260) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	want := []string{"0", "50", "100", "150", "200", "250"}
	if len(labels) != len(want) {
		t.Fatalf("labels %v, want %v", labels, want)
	}
	for i := range want {
		if labels[i] != want[i] {
			t.Fatalf("labels %v, want %v", labels, want)
		}
	}
	// 0..1.05: raw step 0.175, nice step 0.2, one decimal.
	if tk := (niceTicks{}).Ticks(0, 1.05); tk[2].Label != "0.2" {
		t.Errorf("third tick of 0..1.05 is %+v, want label 0.2", tk[2])
	}
}
