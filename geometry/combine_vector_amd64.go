//go:build !purego

package geometry

import "golang.org/x/sys/cpu"

// hasAVX2: the generated kernels need AVX2 and the OS's saving of YMM state, which x/sys/cpu
// checks.
var hasAVX2 = cpu.X86.HasAVX2

// combineVector does combineRow's work on the longest prefix of d that is a multiple of 8
// values with the AVX2 kernels, and returns its length (0 without AVX2).
func combineVector[T int16 | float32](d []float32, s []T, w float32, add bool) int {
	n := len(d) &^ 7
	if !hasAVX2 || n == 0 {
		return 0
	}
	if len(s) < n {
		panic("geometry: combineVector: the source is shorter than the destination")
	}
	switch s := any(s).(type) {
	case []int16:
		if add {
			addAVX2I16(&d[0], &s[0], n, w)
		} else {
			setAVX2I16(&d[0], &s[0], n, w)
		}
	case []float32:
		if add {
			addAVX2F32(&d[0], &s[0], n, w)
		} else {
			setAVX2F32(&d[0], &s[0], n, w)
		}
	}
	return n
}
