package segment

import "math"

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
	n          int64
	ref        float64 // first value seen: the origin of the sums
	sum, sumSq float64 // of v - ref
}

// AddInt16 adds stored int16 values.
func (s *Stats) AddInt16(values []int16) { addValues(s, values) }

// AddFloat32 adds stored float32 values. A NaN or Inf among them makes the result NaN.
func (s *Stats) AddFloat32(values []float32) { addValues(s, values) }

// addValues is Add for either stored type (methods cannot be generic).
func addValues[T int16 | float32](s *Stats, values []T) {
	if len(values) == 0 {
		return
	}
	if s.n == 0 {
		s.ref = float64(values[0])
	}
	// Sum each call's values apart first, so a late slab is not added to a huge running sum
	// value by value.
	var sum, sumSq float64
	for _, v := range values {
		d := float64(v) - s.ref
		sum += d
		sumSq += d * d
	}
	s.n += int64(len(values))
	s.sum += sum
	s.sumSq += sumSq
}

// Count is the number of values added.
func (s *Stats) Count() int64 { return s.n }

// MeanStd returns the mean and population standard deviation of the SCALED values
// v*slope + inter (slope == 0 meaning unscaled, as in NIfTI), with the sigma rule applied:
// a sigma below 1e-6*max(1,|mu|) is returned as 1. No values: mu 0, sigma 1.
func (s *Stats) MeanStd(slope, inter float64) (mu, sigma float64) {
	if s.n == 0 {
		return 0, 1
	}
	slope, inter = effectiveScaling(slope, inter)
	n := float64(s.n)
	meanD := s.sum / n
	variance := s.sumSq/n - meanD*meanD
	if variance < 0 { // rounding, for (nearly) constant data
		variance = 0
	}
	mu = (s.ref+meanD)*slope + inter
	sigma = math.Sqrt(variance) * math.Abs(slope)
	return mu, sigmaFloor(mu, sigma)
}

// Norm is NormFor(MeanStd(slope, inter), slope, inter): the map for the volume these stats
// describe.
func (s *Stats) Norm(slope, inter float64) Norm {
	mu, sigma := s.MeanStd(slope, inter)
	return NormFor(mu, sigma, slope, inter)
}
