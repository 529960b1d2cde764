package timing

import (
	"sort"
	"voxpipe/stage"
)

// Interval is a span of time [Start, Start+Dur) on one clock, in any unit.
type Interval[T ~int64 | ~float64] struct{ Start, Dur T }

// CopyOverlap is how much of a device's copy time ran while a kernel was running.
type CopyOverlap[T ~int64 | ~float64] struct {
	Copy   T // the copy spans' lengths summed (h2d and d2h may overlap each other: both count)
	Hidden T // the part of Copy that lies inside the union of the kernel spans
}

// Fraction is Hidden/Copy, 0 when there was no copy.
func (o CopyOverlap[T]) Fraction() float64 {
	if o.Copy <= 0 {
		return 0
	}
	return float64(o.Hidden) / float64(o.Copy)
}

// HiddenCopy measures copies against the union of the kernel spans. Kernels of two streams may
// run at the same time (the CUDA fp16 engine's slabs k and k+1); a copy under both is hidden
// once, not twice. Neither slice need be sorted.
func HiddenCopy[T ~int64 | ~float64](kernels, copies []Interval[T]) CopyOverlap[T] {
	union := unionOf(kernels)
	var o CopyOverlap[T]
	for _, c := range copies {
		o.Copy += c.Dur
		a, b := c.Start, c.Start+c.Dur
		// the first union interval that ends after a; the rest are ordered and disjoint
		i := sort.Search(len(union), func(i int) bool { return union[i][1] > a })
		for ; i < len(union) && union[i][0] < b; i++ {
			o.Hidden += max(0, min(b, union[i][1])-max(a, union[i][0]))
		}
	}
	return o
}

// unionOf returns the union of the spans as disjoint [start, end) pairs in order.
func unionOf[T ~int64 | ~float64](spans []Interval[T]) [][2]T {
	s := append([]Interval[T](nil), spans...)
	sort.Slice(s, func(i, j int) bool { return s[i].Start < s[j].Start })
	var out [][2]T
	for _, k := range s {
		if k.Dur <= 0 {
			continue
		}
		a, b := k.Start, k.Start+k.Dur
		if n := len(out); n > 0 && a <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], b)
			continue
		}
		out = append(out, [2]T{a, b})
	}
	return out
}

// RowsCopyOverlap measures the copies of timings.csv rows per device (the engine's name,
// "cuda:0"), against that device's kernels stage rows. Devices without copies are left out.
func RowsCopyOverlap(rows []Row) map[string]CopyOverlap[float64] {
	kernels := map[string][]Interval[float64]{}
	copies := map[string][]Interval[float64]{}
	for _, r := range rows {
		iv := Interval[float64]{r.StartMS, r.DurationMS}
		switch {
		case r.Stage.IsCopy():
			copies[r.Device] = append(copies[r.Device], iv)
		case r.Stage == stage.Kernels:
			kernels[r.Device] = append(kernels[r.Device], iv)
		}
	}
	out := map[string]CopyOverlap[float64]{}
	for dev, c := range copies {
		out[dev] = HiddenCopy(kernels[dev], c)
	}
	return out
}
