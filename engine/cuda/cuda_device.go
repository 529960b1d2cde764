//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"gorgonia.org/cu"

	"voxpipe/engine/cuda/kernels"
)

// DeviceCount is the number of CUDA devices the driver sees.
func DeviceCount() (int, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return 0, fmt.Errorf("cuda: count CUDA devices: %w", err)
	}
	return n, nil
}

// Info describes the GPUs (name, compute capability, memory, multiprocessors, whether
// voxpipe's kernels run on it) and the driver's CUDA version.
func Info() (string, error) {
	n, err := DeviceCount()
	if err != nil {
		return "", err
	}
	if n == 0 {
		return "", errors.New("cuda: no CUDA device")
	}
	var parts []string
	for i := 0; i < n; i++ {
		dev := cu.Device(i)
		name, err := dev.Name()
		if err != nil {
			return "", fmt.Errorf("cuda: name of CUDA device %d: %w", i, err)
		}
		major, minor, _ := dev.ComputeCapability()
		mem, _ := dev.TotalMem()
		sms, _ := dev.Attribute(cu.MultiprocessorCount)
		desc := fmt.Sprintf("%d: %s (cc %d.%d, %.1f GiB, %d SMs)", i, name, major, minor, float64(mem)/(1<<30), sms)
		if err := kernels.CheckDevice(dev); err != nil {
			desc += " unsupported"
		} else if img, auto, err := kernels.ChooseImage(major, minor, os.Getenv(kernels.EnvKernels)); err != nil {
			desc += fmt.Sprintf(" kernels: %v", err)
		} else {
			how := "by device"
			if !auto {
				how = "by " + kernels.EnvKernels
			}
			desc += fmt.Sprintf(" kernels: %s, %s", img, how)
		}
		parts = append(parts, desc)
	}
	return fmt.Sprintf("%s; driver CUDA %s", strings.Join(parts, "; "), kernels.DriverVersionString(cu.Version())), nil
}
