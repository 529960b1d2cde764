// Package open opens the engines a run asks for (--engine, --devices, --workers, --precision):
// the CPU engine, or one CUDA engine per GPU.
package open

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"voxpipe/engine/cpu"
	"voxpipe/engine/cuda"
	"voxpipe/engine/engine"
	"voxpipe/model"
)

// Engine kinds accepted by Engines.
const (
	KindAuto = "auto"
	KindCPU  = "cpu"
	KindCUDA = "cuda"
)

// Sentinels of Engines' usage errors, one per flag, so that callers can name the flag.
var (
	// ErrEngineKind: an engine kind other than auto, cpu or cuda.
	ErrEngineKind = errors.New("engine: unknown engine")
	// ErrDevices: a device list that does not parse, or names a GPU that is not present.
	ErrDevices = errors.New("engine: bad device list")
	// ErrWorkers: a negative CPU thread count.
	ErrWorkers = errors.New("engine: bad CPU thread count")
)

// AllDevices is the device list that means every GPU present (the --devices default).
const AllDevices = "all"

// Engines opens the engines a run asked for: kind is auto, cpu or cuda; devices is "all"
// or a comma-separated list of GPU ordinals (cuda only); cpuWorkers is the CPU engine's
// thread count (0: all cores); opt configures the CUDA engines (its precision is checked
// whatever the kind, so a typo fails also where the CPU engine runs). auto picks CUDA when the
// binary has it and a GPU is present. Asking for cuda in a build without it is an error
// wrapping ErrNoCUDA.
func Engines(m *model.Model, kind, devices string, cpuWorkers int, opt engine.CUDAOptions) ([]engine.Engine, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if cpuWorkers < 0 {
		return nil, fmt.Errorf("%w: %d (want 0 for all cores, or more)", ErrWorkers, cpuWorkers)
	}
	// The list's syntax is checked whatever runs: a typo must not pass because no GPU is here.
	if err := CheckDevices(devices); err != nil {
		return nil, err
	}
	switch kind {
	case KindCPU:
		return []engine.Engine{cpu.New(m, cpuWorkers)}, nil
	case KindAuto:
		if n, err := cuda.DeviceCount(); err != nil || n == 0 {
			return []engine.Engine{cpu.New(m, cpuWorkers)}, nil
		}
		return openCUDA(m, devices, opt)
	case KindCUDA:
		return openCUDA(m, devices, opt)
	}
	return nil, fmt.Errorf("%w %q (want auto, cpu or cuda)", ErrEngineKind, kind)
}

func openCUDA(m *model.Model, devices string, opt engine.CUDAOptions) ([]engine.Engine, error) {
	n, err := cuda.DeviceCount()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errors.New("engine: no CUDA device found")
	}
	ids, err := ParseDevices(devices, n)
	if err != nil {
		return nil, err
	}
	var engines []engine.Engine
	for _, id := range ids {
		e, err := cuda.NewWith(m, id, opt)
		if err != nil {
			for _, opened := range engines {
				opened.Close()
			}
			return nil, fmt.Errorf("engine: open cuda:%d: %w", id, err)
		}
		engines = append(engines, e)
	}
	return engines, nil
}

// CheckDevices checks the syntax of a device list ("all" or distinct ordinals), whatever GPUs
// are present.
func CheckDevices(spec string) error {
	if s := strings.TrimSpace(spec); s == "" || s == AllDevices {
		return nil
	}
	_, err := ParseDevices(spec, math.MaxInt)
	return err
}

// ParseDevices turns "all" or "0,2" into GPU ordinals, checked against the count present.
func ParseDevices(spec string, count int) ([]int, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == AllDevices {
		ids := make([]int, count)
		for i := range ids {
			ids[i] = i
		}
		return ids, nil
	}
	seen := map[int]bool{}
	var ids []int
	for _, f := range strings.Split(spec, ",") {
		id, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || id < 0 {
			return nil, fmt.Errorf("%w: %q in %q (want \"all\" or ordinals like 0,1)", ErrDevices, f, spec)
		}
		if id >= count {
			return nil, fmt.Errorf("%w: device %d requested but only %d GPU(s) present", ErrDevices, id, count)
		}
		if seen[id] {
			return nil, fmt.Errorf("%w: device %d listed twice in %q", ErrDevices, id, spec)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	return ids, nil
}
