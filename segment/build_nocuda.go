//go:build !cuda

package segment

// CUDACompiled reports whether this binary was built with the CUDA engine (-tags cuda).
const CUDACompiled = false
