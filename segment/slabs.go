package segment

// Slab plans for engines whose per-slab costs are fixed: the fp16 CUDA engine pays for every
// slab an upload that nothing hides when it is the first, a download that nothing hides when it
// is the last, and in its kernel a start and 4 planes of warm-up per block (about 4.7 planes'
// worth of time on the H200, docs/perf.md, seventh session), so fewer, larger slabs cost less
// kernel time, while the first and last slabs must stay thin for the copies around them to
// stay short.

// Ramp limits: how fast a plan may grow from its first slab and shrink to its last one without
// the copies falling behind the kernels (H200: a plane uploads in ~9.6 us and downloads in ~4.8,
// and the kernel takes ~25 us for it; slower GPUs have slower copies and kernels alike).
const (
	// rampUp: a slab after the first is at most rampUp times the planes before it plus first,
	// so that its upload, which starts when the previous one ends, ends before the kernels
	// before it do (upload/kernel 0.38 on the H200 allows 1.6).
	rampUp = 1.5
	// rampDown: a slab is at most rampDown times the one after it (the download of a slab
	// runs under the next slab's kernel: download/kernel 0.19 on the H200 allows 5.2).
	rampDown = 5
)

// SlabRamp cuts nz output planes into slabs that start and end at first planes: a head growing
// from first as fast as rampUp allows, a tail shrinking to first as rampDown allows, and between
// them near-equal slabs of at most largest planes. Of the plans that obey these limits it
// returns one with the fewest slabs (then the largest thinnest slab, then the smallest largest
// one). The result lists slab sizes, each >= 1, summing to nz. With largest <= first, or a volume
// too short for a ramp, the slabs are first planes each (the last may be thinner), as
// Options.Slab alone gives.
func SlabRamp(nz, first, largest int) []int {
	if nz < 1 {
		return nil
	}
	first = min(max(first, 1), nz)
	if largest <= first || nz < 2*first {
		return uniformSlabs(nz, first)
	}
	head := rampSizes(largest, func(sizes []int, sum int) int { return int(rampUp*float64(sum)) + first }, first)
	tail := rampSizes(largest, func(sizes []int, sum int) int { return rampDown * sizes[len(sizes)-1] }, first)
	var best []int
	better := func(p []int) bool {
		if best == nil || len(p) != len(best) {
			return best == nil || len(p) < len(best)
		}
		if a, b := minOf(p), minOf(best); a != b {
			return a > b
		}
		return maxOf(p) < maxOf(best)
	}
	hsum := 0
	for a := 1; a <= len(head); a++ {
		hsum += head[a-1]
		tsum := 0
		for b := 1; b <= len(tail); b++ {
			tsum += tail[b-1]
			rest := nz - hsum - tsum
			if rest < 0 {
				break
			}
			// The middle follows the head (upload limit) and precedes the tail (download limit).
			capMid := min(largest, int(rampUp*float64(hsum))+first, rampDown*tail[b-1])
			var mid []int
			if rest > 0 {
				n := (rest + capMid - 1) / capMid
				for i := range n {
					mid = append(mid, rest/n+btoi(i < rest%n))
				}
			}
			p := append(append(append([]int(nil), head[:a]...), mid...), reversed(tail[:b])...)
			if withinRamp(p, first) && better(p) {
				best = p
			}
		}
	}
	if best == nil {
		return uniformSlabs(nz, first)
	}
	return best
}

// withinRamp reports whether every slab of p keeps both copy limits.
func withinRamp(p []int, first int) bool {
	before := 0
	for i, s := range p {
		if i > 0 && s > int(rampUp*float64(before))+first || i+1 < len(p) && s > rampDown*p[i+1] {
			return false
		}
		before += s
	}
	return true
}

// rampSizes lists first and the sizes after it that next allows (given the sizes so far and
// their sum), each capped at largest, until one reaches largest.
func rampSizes(largest int, next func(sizes []int, sum int) int, first int) []int {
	sizes, sum := []int{first}, first
	for sizes[len(sizes)-1] < largest {
		s := min(next(sizes, sum), largest)
		sizes, sum = append(sizes, s), sum+s
	}
	return sizes
}

func uniformSlabs(nz, first int) []int {
	sizes := make([]int, 0, (nz+first-1)/first)
	for z := 0; z < nz; z += first {
		sizes = append(sizes, min(first, nz-z))
	}
	return sizes
}

func reversed(s []int) []int {
	r := make([]int, len(s))
	for i, v := range s {
		r[len(s)-1-i] = v
	}
	return r
}

func minOf(s []int) int {
	m := s[0]
	for _, v := range s[1:] {
		m = min(m, v)
	}
	return m
}

func maxOf(s []int) int {
	m := s[0]
	for _, v := range s[1:] {
		m = max(m, v)
	}
	return m
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
