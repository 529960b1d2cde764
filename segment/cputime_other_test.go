//go:build !unix

package segment

func processCPUSeconds() float64 { return 0 }
