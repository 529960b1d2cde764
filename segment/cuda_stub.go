//go:build !cuda

package segment

// NewCUDAEngine opens a GPU engine on device; this build has none: ErrNoCUDA.
func NewCUDAEngine(m *Model, device int) (Engine, error) { return nil, ErrNoCUDA }

// CUDADeviceCount is the number of CUDA devices; this build has no CUDA: ErrNoCUDA.
func CUDADeviceCount() (int, error) { return 0, ErrNoCUDA }

// CUDAInfo describes the GPUs and the driver; this build has no CUDA: ErrNoCUDA.
func CUDAInfo() (string, error) { return "", ErrNoCUDA }
