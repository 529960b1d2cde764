//go:build !amd64 || purego

package cpu

import "voxpipe/model"

// Only amd64 has vector kernels (the purego tag leaves them out there too).
const hasAVX2, hasFMA, hasAVX512 = false, false, false

// convVector does nothing here: the engine runs the pure-Go kernels.
func convVector(kernels, int, []float32, int, []float32, []int, [][block]float32, *[block]float32, int, int) int {
	return 0
}

// convWide is never called here: hasAVX512 is false.
func convWide(int, []float32, int, []float32, []int, [][wide]float32, *[wide]float32, int, int) int {
	panic("cpu: no wide kernels")
}

// gateVector, headVector and transposeVector are never called here: hasAVX2 is false.
func gateVector(_, _, _ []float32, _ *model.Model, _, _ int) { panic("cpu: no vector gate") }

func headVector(_, _, _, _ []float32, _ *model.Model, _, _ int) { panic("cpu: no vector head") }

func transposeVector(_, _ []float32, _, _, _ int) { panic("cpu: no vector transpose") }
