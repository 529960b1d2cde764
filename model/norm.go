package model

import (
	"math"
	"math/big"
	"math/bits"
	"runtime"
	"sync"
)

// Apply maps one stored value to the network input, float32 multiply then float32 add, each
// rounded. The explicit conversion forbids the compiler from fusing them into an FMA (Go's
// spec allows fusion otherwise, and arm64 or GOAMD64=v3 builds would do it), so every engine
// and the PyTorch twin can reproduce x bit for bit.
func (n Norm) Apply(v float32) float32 {
	return float32(v*n.Scale) + n.Shift
}

// effectiveScaling applies NIfTI's rule that scl_slope == 0 (or a non-finite slope) means the
// stored values are not scaled at all.
func effectiveScaling(slope, inter float64) (float64, float64) {
	if slope == 0 || math.IsNaN(slope) || math.IsInf(slope, 0) {
		return 1, 0
	}
	if math.IsNaN(inter) || math.IsInf(inter, 0) {
		inter = 0
	}
	return slope, inter
}

// sigmaFloor applies the network's rule for flat volumes: a sigma below 1e-6*max(1,|mu|)
// becomes 1, so a constant volume normalises to zeros rather than to noise or infinities.
func sigmaFloor(mu, sigma float64) float64 {
	if sigma < 1e-6*math.Max(1, math.Abs(mu)) {
		return 1
	}
	return sigma
}

// NormFor folds a volume's scaling (scl_slope, scl_inter, as in its header) and the mean mu and
// population standard deviation sigma of its SCALED values into the affine map applied to
// stored values: x = (v*slope + inter - mu) / sigma = v*(slope/sigma) + (inter-mu)/sigma.
// The sigma rule (sigmaFloor) is applied here too, so NormFor(Stats.MeanStd(...)) and a
// hand-computed mu, sigma agree. slope == 0 means unscaled, as in NIfTI.
func NormFor(mu, sigma, slope, inter float64) Norm {
	slope, inter = effectiveScaling(slope, inter)
	sigma = sigmaFloor(mu, sigma)
	return Norm{
		Scale: float32(slope / sigma),
		Shift: float32((inter - mu) / sigma),
	}
}

// Stats accumulates the mean and population variance of a volume's stored values, slab by slab
// as the pipeline reads them, in float64. Values are summed relative to the first one seen, so
// the variance of data with a large offset (CT in Hounsfield units plus 1024, say) does not
// cancel catastrophically. The zero value is ready to use.
type Stats struct {
	// float32 values: float64 sums relative to the first value seen
	n          int64
	ref        float64 // first value seen: the origin of the sums
	refSet     bool    // ref was given (StatsFrom) or taken from a value
	sum, sumSq float64 // of v - ref

	// int16 values: exact integer sums (the sum of squares in 128 bits), so the result does not
	// depend on the order or the split of the work, which lets AddInt16 use every core.
	nInt       int64
	sumInt     int64
	sqHi, sqLo uint64
}

// AddInt16 adds stored int16 values, exactly, in parallel for large slices.
func (s *Stats) AddInt16(values []int16) {
	// Parallel above 1 Mi values; at most 2^32 values a part, so that a part's sum of squares
	// (each square at most 2^30) fits uint64.
	const piece, maxPart = 1 << 20, 1 << 32
	parts := max(min(runtime.GOMAXPROCS(0), (len(values)+piece-1)/piece), (len(values)+maxPart-1)/maxPart)
	if parts <= 1 {
		sum, sq := sumInt16(values)
		s.addExact(int64(len(values)), sum, sq)
		return
	}
	sums := make([]int64, parts)
	sqs := make([]uint64, parts)
	var wg sync.WaitGroup
	per := (len(values) + parts - 1) / parts
	for p := 0; p < parts; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[p], sqs[p] = sumInt16(values[p*per : min(len(values), (p+1)*per)])
		}()
	}
	wg.Wait()
	for p := range sums {
		s.addExact(0, sums[p], sqs[p])
	}
	s.nInt += int64(len(values))
}

// sumInt16 sums values and their squares; with at most 2^32 values neither can overflow.
func sumInt16(values []int16) (int64, uint64) {
	var sum int64
	var sq uint64
	for len(values) >= 8 {
		v := values[:8:8]
		a, b, c, d := int64(v[0]), int64(v[1]), int64(v[2]), int64(v[3])
		e, f, g, h := int64(v[4]), int64(v[5]), int64(v[6]), int64(v[7])
		sum += (a + b + c + d) + (e + f + g + h)
		sq += uint64((a*a + b*b + c*c + d*d) + (e*e + f*f + g*g + h*h))
		values = values[8:]
	}
	for _, v := range values {
		w := int64(v)
		sum += w
		sq += uint64(w * w)
	}
	return sum, sq
}

func (s *Stats) addExact(n, sum int64, sq uint64) {
	s.nInt += n
	s.sumInt += sum
	var carry uint64
	s.sqLo, carry = bits.Add64(s.sqLo, sq, 0)
	s.sqHi += carry
}

// AddFloat32 adds stored float32 values. A NaN or Inf among them makes the result NaN.
func (s *Stats) AddFloat32(values []float32) {
	if len(values) == 0 {
		return
	}
	s.setRef(values[0])
	// Sum each call's values apart first, so a late slab is not added to a huge running sum
	// value by value.
	sum, sumSq := accumulate(0, 0, s.ref, values)
	s.n += int64(len(values))
	s.sum += sum
	s.sumSq += sumSq
}

// AddFloat32Piece adds stored float32 values as the continuation of the values added so far
// by AddFloat32Piece, summed into the running sums value by value, without the per-call
// partial sums of AddFloat32: on a fresh Stats (the zero value, or StatsFrom), pieces p1, p2,
// ... give exactly the sums of one AddFloat32(p1 ++ p2 ++ ...) call, bit for bit. That lets a
// reader add a slab's values piece by piece while each piece is in cache.
func (s *Stats) AddFloat32Piece(values []float32) {
	if len(values) == 0 {
		return
	}
	s.setRef(values[0])
	s.sum, s.sumSq = accumulate(s.sum, s.sumSq, s.ref, values)
	s.n += int64(len(values))
}

func (s *Stats) setRef(first float32) {
	if s.n == 0 && !s.refSet {
		s.ref, s.refSet = float64(first), true
	}
}

// accumulate is the one float32 summation loop: sum and sumSq go on over values - ref, in
// order.
func accumulate(sum, sumSq, ref float64, values []float32) (float64, float64) {
	for _, v := range values {
		d := float64(v) - ref
		sum += d
		sumSq += d * d
	}
	return sum, sumSq
}

// StatsFrom returns empty statistics whose float32 sums are taken relative to origin, as are
// those of a Stats whose first float32 value was origin. Slabs of a volume can then be summed
// apart, in parallel, each into a StatsFrom(the volume's first value) by AddFloat32Piece, and
// merged in slab order (Merge) into exactly the Stats that AddFloat32, one call per slab in
// order, gives.
func StatsFrom(origin float32) Stats {
	return Stats{ref: float64(origin), refSet: true}
}

// Merge adds the values o was built from to s, as if they had been added to s after its own.
// int16 sums are exact, so any split of the values merges exactly. float32 sums are added to
// s's running sums as one AddFloat32 call's partial sums are: merging, in slab order, slab
// statistics built by AddFloat32Piece from StatsFrom(origin), origin being the volume's first
// value, gives the sequential statistics bit for bit. float32 statistics with another origin
// are shifted to s's first (an exact identity, rounded in float64).
func (s *Stats) Merge(o Stats) {
	s.addExact(o.nInt, o.sumInt, o.sqLo)
	s.sqHi += o.sqHi
	if o.n == 0 {
		return
	}
	if s.n == 0 && !s.refSet {
		s.ref, s.refSet = o.ref, true
	}
	sum, sumSq := o.sum, o.sumSq
	if o.ref != s.ref {
		// sum of (v - ref) = sum of (v - o.ref) + n*delta, and the squares likewise.
		delta, n := o.ref-s.ref, float64(o.n)
		sumSq += 2*delta*sum + n*delta*delta
		sum += n * delta
	}
	s.n += o.n
	s.sum += sum
	s.sumSq += sumSq
}

// Count is the number of values added.
func (s *Stats) Count() int64 { return s.n + s.nInt }

// moments returns the mean and population variance of the stored values.
func (s *Stats) moments() (mean, variance float64) {
	if s.n == 0 { // int16 only: exact, then one rounding
		n := new(big.Int).SetInt64(s.nInt)
		sum := new(big.Int).SetInt64(s.sumInt)
		sq := new(big.Int).Lsh(new(big.Int).SetUint64(s.sqHi), 64)
		sq.Add(sq, new(big.Int).SetUint64(s.sqLo))
		// variance = (n*sq - sum^2) / n^2
		num := new(big.Int).Mul(n, sq)
		num.Sub(num, new(big.Int).Mul(sum, sum))
		den := new(big.Int).Mul(n, n)
		variance, _ = new(big.Rat).SetFrac(num, den).Float64()
		mean, _ = new(big.Rat).SetFrac(sum, n).Float64()
		return mean, variance
	}
	n := float64(s.n)
	meanD := s.sum / n
	variance = s.sumSq/n - meanD*meanD
	mean = s.ref + meanD
	if s.nInt == 0 {
		return mean, variance
	}
	// Both kinds (no caller does this): pool the two sets' moments.
	ni := float64(s.nInt)
	meanI := float64(s.sumInt) / ni
	sqI := (float64(s.sqHi)*math.Exp2(64) + float64(s.sqLo)) / ni
	varI := sqI - meanI*meanI
	total := n + ni
	pooled := (n*mean + ni*meanI) / total
	variance = (n*(variance+(mean-pooled)*(mean-pooled)) + ni*(varI+(meanI-pooled)*(meanI-pooled))) / total
	return pooled, variance
}

// MeanStd returns the mean and population standard deviation of the SCALED values
// v*slope + inter (slope == 0 meaning unscaled, as in NIfTI), with the sigma rule applied:
// a sigma below 1e-6*max(1,|mu|) is returned as 1. No values: mu 0, sigma 1.
func (s *Stats) MeanStd(slope, inter float64) (mu, sigma float64) {
	if s.Count() == 0 {
		return 0, 1
	}
	slope, inter = effectiveScaling(slope, inter)
	mean, variance := s.moments()
	if variance < 0 { // rounding, for (nearly) constant data
		variance = 0
	}
	mu = mean*slope + inter
	sigma = math.Sqrt(variance) * math.Abs(slope)
	return mu, sigmaFloor(mu, sigma)
}

// Flat reports whether the volume is flat by the network's rule: the standard deviation of its
// scaled values is below 1e-6*max(1, |mean|) (sigmaFloor), so it normalises to zeros. An empty
// volume is flat.
func (s *Stats) Flat(slope, inter float64) bool {
	if s.Count() == 0 {
		return true
	}
	slope, inter = effectiveScaling(slope, inter)
	mean, variance := s.moments()
	mu := mean*slope + inter
	sigma := math.Sqrt(max(variance, 0)) * math.Abs(slope)
	return sigmaFloor(mu, sigma) != sigma || sigma == 0
}

// Norm is NormFor(MeanStd(slope, inter), slope, inter): the map for the volume these stats
// describe.
func (s *Stats) Norm(slope, inter float64) Norm {
	mu, sigma := s.MeanStd(slope, inter)
	return NormFor(mu, sigma, slope, inter)
}
