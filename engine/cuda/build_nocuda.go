//go:build !cuda

package cuda

// Compiled reports whether this binary was built with the CUDA engine (-tags cuda).
const Compiled = false
