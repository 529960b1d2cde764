package engine

// Slab plans for engines whose per-slab costs are fixed: the fp16 CUDA engine pays for every
// slab an upload that nothing hides when it is the first, a download that nothing hides when it
// is the last, and in its kernel 4 planes of warm-up per block plus the block start and the
// last, partly filled wave of blocks (docs/perf.md).

// SlabRamp cuts nz output planes into slabs that start and end at first planes and double in
// between up to largest: first, 2*first, 4*first, ... (while the ramp and its mirror fit), then
// the rest in near-equal slabs of at most largest, then the ramp in reverse. The result lists
// slab sizes, each >= 1, summing to nz. With largest <= first, or a volume too short for a
// ramp, the slabs are first planes each (the last may be thinner), as Options.Slab alone gives.
func SlabRamp(nz, first, largest int) []int {
	if nz < 1 {
		return nil
	}
	first = min(max(first, 1), nz)
	var head []int
	used := 0
	if largest > first {
		for size := first; size < largest && 2*(used+size) <= nz; size *= 2 {
			head = append(head, size)
			used += size
		}
	}
	if len(head) == 0 {
		sizes := make([]int, 0, (nz+first-1)/first)
		for z := 0; z < nz; z += first {
			sizes = append(sizes, min(first, nz-z))
		}
		return sizes
	}
	sizes := append([]int(nil), head...)
	if middle := nz - 2*used; middle > 0 {
		n := (middle + largest - 1) / largest
		for i := range n {
			sizes = append(sizes, middle/n+btoi(i < middle%n))
		}
	}
	for i := len(head) - 1; i >= 0; i-- {
		sizes = append(sizes, head[i])
	}
	return sizes
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
