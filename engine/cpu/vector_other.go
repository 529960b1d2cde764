//go:build !amd64 || purego

package cpu

import "voxpipe/model"

// Only amd64 has vector kernels (the purego tag leaves them out there too).
const hasAVX2, hasFMA = false, false

// convVector does nothing here: the engine runs the pure-Go kernels.
func convVector(kernels, int, []float32, int, []float32, []int, [][block]float32, *[block]float32, int, int) int {
	return 0
}

// gateVector, headVector and transposeVector are never called here: hasAVX2 is false.
func gateVector(_, _, _ []float32, _ *model.Model, _, _ int) { panic("cpu: no vector gate") }

func headVector(_, _, _, _ []float32, _ *model.Model, _, _ int) { panic("cpu: no vector head") }

func transposeVector(_, _ []float32, _, _, _ int) { panic("cpu: no vector transpose") }
