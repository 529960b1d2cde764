package spans

// BusyAdded returns how much of the span [start, start+dur) lies after *end, the latest end of
// the spans before it (spans taken in order of their starts), and moves *end on: summed over
// the spans, the length of their union. Stage totals use it where a stage's spans overlap (the
// CUDA fp16 engine's kernels of consecutive slabs run on two streams): milliseconds in the
// summaries and reports, time.Duration in the engine's own statistics.
func BusyAdded[T ~int64 | ~float64](end *T, start, dur T) T {
	e := start + dur
	added := max(0, e-max(start, *end))
	*end = max(*end, e)
	return added
}
