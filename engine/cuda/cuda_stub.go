//go:build !cuda

package cuda

import (
	"voxpipe/engine/engine"
	"voxpipe/model"
)

// New opens a GPU engine on device; this build has none: ErrNoCUDA.
func New(m *model.Model, device int) (engine.Engine, error) { return nil, engine.ErrNoCUDA }

// NewWith opens a GPU engine with options; this build has none: ErrNoCUDA (after
// checking the options, so a bad precision is reported as such).
func NewWith(m *model.Model, device int, opt engine.CUDAOptions) (engine.Engine, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	return nil, engine.ErrNoCUDA
}

// DeviceCount is the number of CUDA devices; this build has no CUDA: ErrNoCUDA.
func DeviceCount() (int, error) { return 0, engine.ErrNoCUDA }

// Info describes the GPUs and the driver; this build has no CUDA: ErrNoCUDA.
func Info() (string, error) { return "", engine.ErrNoCUDA }
