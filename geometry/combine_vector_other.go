//go:build purego || !amd64

package geometry

// combineVector: no vector kernels on this architecture or build; combineGo does it all.
func combineVector[T int16 | float32](d []float32, s []T, w float32, add bool) int { return 0 }
