package open

import (
	"errors"
	"math"
	"testing"
	"voxpipe/engine/cuda"
	"voxpipe/engine/engine"
	"voxpipe/internal/enginetest"
	"voxpipe/model"
)

func TestOpenEnginesPrecision(t *testing.T) {
	t.Parallel()
	m := model.RandomModel(4, 2, 1)
	// A bad precision fails for every engine kind, before anything is opened.
	for _, kind := range []string{KindCPU, KindAuto, KindCUDA} {
		if _, err := Engines(m, kind, "all", 1, engine.CUDAOptions{Precision: "fp8"}); !errors.Is(err, engine.ErrBadPrecision) {
			t.Errorf("kind %s, precision fp8: %v, want ErrBadPrecision", kind, err)
		}
	}
	engines, err := Engines(m, KindCPU, "all", 1, engine.CUDAOptions{Precision: engine.PrecisionFP32})
	if err != nil || len(engines) != 1 || engines[0].Name() != "cpu" {
		t.Fatalf("cpu with fp32: %v, %v", engines, err)
	}
	engines[0].Close()
	if !cuda.Compiled {
		if _, err := Engines(m, KindCUDA, "all", 1, engine.CUDAOptions{}); !errors.Is(err, engine.ErrNoCUDA) {
			t.Errorf("cuda without CUDA: %v, want ErrNoCUDA", err)
		}
		if _, err := cuda.NewWith(m, 0, engine.CUDAOptions{Precision: "x"}); !errors.Is(err, engine.ErrBadPrecision) {
			t.Errorf("NewWith bad precision: %v, want ErrBadPrecision", err)
		}
	}
}

// refLogitsAt must be refLogits at every voxel (it checks the GPU engines' near-ties cheaply).
func TestRefLogitsAt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		m     *model.Model
		int16 bool
	}{{model.RandomModel(16, 4, 3), true}, {model.RandomModel(6, 3, 4), false}} {
		vol := enginetest.RandomVolume(9, 7, 6, 5, c.int16)
		all := enginetest.RefLogits(c.m, vol)
		for i, want := range all {
			got := enginetest.RefLogitsAt(c.m, vol, i/(9*7), i%(9*7)/9, i%9)
			for k := range want {
				if math.Abs(got[k]-want[k]) > 1e-9*(1+math.Abs(want[k])) {
					t.Fatalf("voxel %d class %d: %g, want %g", i, k, got[k], want[k])
				}
			}
		}
	}
}

// Device lists are checked whatever GPUs are present; every usage error wraps its flag's
// sentinel.
func TestEngineFlagErrors(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "all", " all ", "0", "0,1", "3"} {
		if err := CheckDevices(ok); err != nil {
			t.Errorf("CheckDevices(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"abc", "-1", "0,0", "1,x", ","} {
		if err := CheckDevices(bad); !errors.Is(err, ErrDevices) {
			t.Errorf("CheckDevices(%q): %v; want ErrDevices", bad, err)
		}
	}
	if _, err := ParseDevices("3", 1); !errors.Is(err, ErrDevices) {
		t.Errorf("a GPU beyond those present: %v", err)
	}
	m := model.RandomModel(4, 3, 1)
	if _, err := Engines(m, KindCPU, "abc", 1, engine.CUDAOptions{}); !errors.Is(err, ErrDevices) {
		t.Errorf("cpu engine, --devices abc: %v", err)
	}
	if _, err := Engines(m, KindCPU, "all", -1, engine.CUDAOptions{}); !errors.Is(err, ErrWorkers) {
		t.Errorf("--workers -1: %v", err)
	}
	if _, err := Engines(m, "gpu", "all", 1, engine.CUDAOptions{}); !errors.Is(err, ErrEngineKind) {
		t.Errorf("--engine gpu: %v", err)
	}
}
