//go:build !cuda

package segment

// NewCUDAEngine opens a GPU engine on device; this build has none: ErrNoCUDA.
func NewCUDAEngine(m *Model, device int) (Engine, error) { return nil, ErrNoCUDA }

// NewCUDAEngineWith opens a GPU engine with options; this build has none: ErrNoCUDA (after
// checking the options, so a bad precision is reported as such).
func NewCUDAEngineWith(m *Model, device int, opt CUDAOptions) (Engine, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	return nil, ErrNoCUDA
}

// CUDADeviceCount is the number of CUDA devices; this build has no CUDA: ErrNoCUDA.
func CUDADeviceCount() (int, error) { return 0, ErrNoCUDA }

// CUDAInfo describes the GPUs and the driver; this build has no CUDA: ErrNoCUDA.
func CUDAInfo() (string, error) { return "", ErrNoCUDA }
