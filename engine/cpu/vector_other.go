//go:build !amd64 || purego

package cpu

// Only amd64 has vector kernels (the purego tag leaves them out there too).
const hasAVX2, hasFMA = false, false

// convVector does nothing here: the engine runs the pure-Go kernels.
func convVector(kernels, int, []float32, int, []float32, []int, [][block]float32, *[block]float32, int, int) int {
	return 0
}
