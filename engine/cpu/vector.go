package cpu

import "os"

// kernels names the convolution kernels an engine runs for conv2 and the gate conv.
//
// The AVX2 kernels are the default, not the FMA ones: fused multiply-adds were no faster here
// (AMD EPYC with AVX-512, 2 cores: BenchmarkConvKernels, one C=16 block over 96 voxels,
// 70-81 GFLOP/s a core for AVX2 against 60-73 for FMA, six runs each; the engine benchmark
// 29.5-32 against 30.8-31.2), since this core has separate multiply and add pipes, and the
// fused sums are not the reference's: up to 2.85 u times the sum of the terms' magnitudes away
// (thousands of ulps where a sum nearly cancels; TestFMAKernelsBound), so masks could differ
// from the golden ones by near-ties. VOXPIPE_CPU_KERNELS=fma keeps them for measuring.
type kernels uint8

const (
	kernelsGo   kernels = iota // voxelChunks8/16, the pure-Go reference
	kernelsAVX2                // convAVX2x8/16: amd64 AVX2, bit-identical to the reference
	kernelsFMA                 // convFMAx8/16: amd64 AVX2+FMA, products fused (not bit-identical)
)

func (k kernels) String() string {
	return [...]string{"go", "avx2", "fma"}[k]
}

// defaultKernels is what New gives an engine: the environment's VOXPIPE_CPU_KERNELS (go, avx2
// or fma; read once) where this CPU can run it, else the fastest bit-identical kernels it can.
var defaultKernels = chooseKernels(os.Getenv("VOXPIPE_CPU_KERNELS"))

func chooseKernels(want string) kernels {
	switch {
	case want == "go":
		return kernelsGo
	case want == "fma" && hasFMA:
		return kernelsFMA
	case hasAVX2:
		return kernelsAVX2
	}
	return kernelsGo
}
