package cpu

import "os"

// kernels names the convolution kernels an engine runs for conv2 and the gate conv.
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
