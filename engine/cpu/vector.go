package cpu

import "os"

// kernels names the convolution kernels an engine runs for conv1, conv2 and the gate conv; with
// any vector set, the gate and head run gateAVX2 and headAVX2 (bit-identical) too.
//
// The default is the AVX-512 kernels where the CPU has AVX-512F (two blocks of 8 output
// channels a ZMM register: twice AVX2's GFLOP/s on the dev machine's AMD EPYC, the same bits),
// else AVX2. The FMA kernels are not the default: fused multiply-adds were no faster here
// (AMD EPYC with AVX-512, 2 cores, a noisy VM: BenchmarkConvKernels, one C=16 block over 96
// voxels, 65-84 GFLOP/s a core for AVX2 against 60-94 for FMA; BenchmarkCPUEngine with one
// worker 34-51 against 36-45; ranges over 3 to 6 interleaved runs), since this core has
// separate multiply and add pipes, and the fused sums are not the reference's: up to 2.85 u
// times the sum of the terms' magnitudes away (thousands of ulps where a sum nearly cancels;
// TestFMAKernelsBound), so masks may differ from the golden ones at near-ties.
// VOXPIPE_CPU_KERNELS=fma keeps them for measuring.
type kernels uint8

const (
	kernelsGo     kernels = iota // voxelChunks8/16, the pure-Go reference
	kernelsAVX2                  // convAVX2x8/16: amd64 AVX2, bit-identical to the reference
	kernelsFMA                   // convFMAx8/16: amd64 AVX2+FMA, products fused (not bit-identical)
	kernelsAVX512                // convAVX512x8/16: AVX-512F, two blocks of 8 channels at once, bit-identical; AVX2 for the rest
)

func (k kernels) String() string {
	return [...]string{"go", "avx2", "fma", "avx512"}[k]
}

// defaultKernels is what New gives an engine: the environment's VOXPIPE_CPU_KERNELS (go, avx2,
// avx512 or fma; read once) where this CPU can run it, else the fastest bit-identical kernels
// it can.
var defaultKernels = chooseKernels(os.Getenv("VOXPIPE_CPU_KERNELS"))

func chooseKernels(want string) kernels {
	switch {
	case want == "go":
		return kernelsGo
	case want == "fma" && hasFMA:
		return kernelsFMA
	case want == "avx2" && hasAVX2:
		return kernelsAVX2
	case hasAVX512:
		return kernelsAVX512
	case hasAVX2:
		return kernelsAVX2
	}
	return kernelsGo
}
