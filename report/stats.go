package report

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Stats summarizes per-volume latencies (milliseconds) of one stage of one batch.
//
// Percentiles interpolate linearly between closest ranks (Hyndman & Fan type 7, numpy's
// default "linear"): with the n values sorted x[0] <= ... <= x[n-1], the p-th percentile is
// x[k] + f*(x[k+1]-x[k]) where h = (n-1)*p/100, k = floor(h), f = h-k.
type Stats struct {
	Count                         int
	Mean, P50, P90, P95, P99, Max float64

	// Throughput. Stage rows: of the stage's busy time, Count / sum of latencies and
	// voxels / sum of latencies, i.e. what the stage alone would sustain run serially. The
	// end-to-end row: over the batch's span (see Throughput).
	VolPerMin, MVoxPerS float64
}

// percentile of sorted values, p in [0, 100]; see Stats for the definition.
func percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	h := float64(n-1) * p / 100
	k := int(math.Floor(h))
	if k >= n-1 {
		return sorted[n-1]
	}
	return sorted[k] + (h-float64(k))*(sorted[k+1]-sorted[k])
}

func median(values []float64) float64 {
	return percentile(sortedCopy(values), 50)
}

func sortedCopy(values []float64) []float64 {
	s := slices.Clone(values)
	slices.Sort(s)
	return s
}

// summarize computes the latency statistics; throughput is left to the caller.
func summarize(values []float64) Stats {
	s := sortedCopy(values)
	var sum float64
	for _, v := range s {
		sum += v
	}
	return Stats{
		Count: len(s),
		Mean:  sum / float64(len(s)),
		P50:   percentile(s, 50),
		P90:   percentile(s, 90),
		P95:   percentile(s, 95),
		P99:   percentile(s, 99),
		Max:   s[len(s)-1],
	}
}

// Speedup of A over B for one stage: Value > 1 means A is faster. Low and High bound the
// bootstrap 95% confidence interval (percentile method); they are NaN with fewer than two
// samples on a side.
//
// Paired (volumes matched by name): Value is the median of the per-volume ratios
// latency_B/latency_A, and the bootstrap resamples those ratios with replacement. Unpaired:
// Value is median(B)/median(A), and the bootstrap resamples each side's volumes with
// replacement independently.
//
// TooFew flags an interval drawn from fewer than MinVolumes volumes on a side (Volumes): it is
// shown, but is no evidence of a difference.
type Speedup struct {
	Value, Low, High float64
	Paired           bool
	N                int // pairs when Paired, else volumes of A
	NB               int // volumes of B when not Paired
	TooFew           bool
	MinVolumes       int // the limit TooFew was judged by
}

// Volumes is the number of volumes on the smaller side: the pairs when paired.
func (sp *Speedup) Volumes() int {
	if sp.Paired {
		return sp.N
	}
	return min(sp.N, sp.NB)
}

// DefaultResamples is the bootstrap's number of resamples when Options leaves it zero.
const DefaultResamples = 2000

// pairedSpeedup bootstraps the median of the ratios b[i]/a[i]; pairs with a[i] == 0 are left
// out (no ratio).
func pairedSpeedup(a, b []float64, resamples int, seed uint64) *Speedup {
	var ratios []float64
	for i := range a {
		if a[i] > 0 {
			ratios = append(ratios, b[i]/a[i])
		}
	}
	if len(ratios) == 0 {
		return nil
	}
	sp := &Speedup{Value: median(ratios), Paired: true, N: len(ratios), Low: math.NaN(), High: math.NaN()}
	if len(ratios) < 2 {
		return sp
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	sample := make([]float64, len(ratios))
	stats := make([]float64, resamples)
	for r := range stats {
		for i := range sample {
			sample[i] = ratios[rng.IntN(len(ratios))]
		}
		slices.Sort(sample)
		stats[r] = percentile(sample, 50)
	}
	sp.Low, sp.High = confidenceInterval(stats)
	return sp
}

// unpairedSpeedup bootstraps median(b)/median(a), resampling each side independently;
// resamples whose median of a is 0 are dropped.
func unpairedSpeedup(a, b []float64, resamples int, seed uint64) *Speedup {
	medA := median(a)
	if medA <= 0 {
		return nil
	}
	sp := &Speedup{Value: median(b) / medA, N: len(a), NB: len(b), Low: math.NaN(), High: math.NaN()}
	if len(a) < 2 || len(b) < 2 {
		return sp
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	sampleA, sampleB := make([]float64, len(a)), make([]float64, len(b))
	stats := make([]float64, 0, resamples)
	for range resamples {
		for i := range sampleA {
			sampleA[i] = a[rng.IntN(len(a))]
		}
		for i := range sampleB {
			sampleB[i] = b[rng.IntN(len(b))]
		}
		slices.Sort(sampleA)
		slices.Sort(sampleB)
		if m := percentile(sampleA, 50); m > 0 {
			stats = append(stats, percentile(sampleB, 50)/m)
		}
	}
	sp.Low, sp.High = confidenceInterval(stats)
	return sp
}

// confidenceInterval is the 2.5th and 97.5th percentiles of the bootstrap statistics.
func confidenceInterval(stats []float64) (low, high float64) {
	if len(stats) == 0 {
		return math.NaN(), math.NaN()
	}
	slices.Sort(stats)
	return percentile(stats, 2.5), percentile(stats, 97.5)
}
