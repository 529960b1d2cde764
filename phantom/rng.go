package phantom

import "math"

// Randomness comes from SplitMix64 only, implemented here, so that a seed gives the same
// volume with any Go release (math/rand/v2 does not promise stable method outputs).

const golden = 0x9E3779B97F4A7C15

// mix64 is the SplitMix64 finalizer: a bijective avalanche of 64 bits.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// voxelHash is counter-based: the bits for voxel idx depend on nothing but (key, idx), so the
// noise does not depend on which worker renders which plane, or in what order.
func voxelHash(key, idx uint64) uint64 {
	return mix64(key + (idx+1)*golden)
}

// stream is a sequential SplitMix64 generator, used only for the scene layout, which is drawn
// once before any worker starts.
type stream struct{ state uint64 }

// Stream tags keep the parts of a scene independent: adding a lesion does not move the head.
const (
	tagHead uint64 = iota + 1
	tagFluid
	tagLesion
	tagFields
	tagNoise
	tagLevels
)

func newStream(seed, tag uint64) *stream {
	return &stream{state: mix64(seed ^ mix64(tag))}
}

func (s *stream) next() uint64 {
	s.state += golden
	return mix64(s.state)
}

// float returns a uniform value in [0, 1).
func (s *stream) float() float64 { return float64(s.next()>>11) * 0x1p-53 }

func (s *stream) uniform(lo, hi float64) float64 { return lo + (hi-lo)*s.float() }

// logUniform returns a value whose logarithm is uniform in [log lo, log hi).
func (s *stream) logUniform(lo, hi float64) float64 {
	return lo * math.Exp(s.float()*math.Log(hi/lo))
}

// intn returns a uniform integer in [lo, hi].
func (s *stream) intn(lo, hi int) int { return lo + int(s.next()%uint64(hi-lo+1)) }

// unit returns a uniformly distributed direction.
func (s *stream) unit() [3]float64 {
	z := s.uniform(-1, 1)
	phi := s.uniform(0, 2*math.Pi)
	r := math.Sqrt(1 - z*z)
	return [3]float64{r * math.Cos(phi), r * math.Sin(phi), z}
}
