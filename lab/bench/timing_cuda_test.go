//go:build cuda

package kernels

import (
	"os"
	"slices"
	"testing"

	"gorgonia.org/cu"
)

// experimentFatbin reads the fatbin a timing test's environment variable names (built by
// scripts/gpu-build.sh), skipping the test or benchmark when the variable is unset.
func experimentFatbin(t testing.TB, env string) (path string, image []byte) {
	t.Helper()
	path = os.Getenv(env)
	if path == "" {
		t.Skip(env + " not set")
	}
	image, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, image
}

// loadFatbin loads a fatbin into the current context; Unload it when done.
func loadFatbin(t testing.TB, path string, image []byte) cu.Module {
	t.Helper()
	mod, err := cu.LoadFatBinary(string(image))
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	return mod
}

// launchTimer times launches on a stream of its own with a pair of CUDA events. Use it on the
// thread that has the context current (onGPU) and close it there.
type launchTimer struct {
	st       cu.Stream
	ev0, ev1 cu.Event
}

func newLaunchTimer(t testing.TB) *launchTimer {
	t.Helper()
	st, err := cu.MakeStream(cu.NonBlocking)
	if err != nil {
		t.Fatal(err)
	}
	lt := &launchTimer{st: st}
	if lt.ev0, err = cu.MakeEvent(cu.DefaultEvent); err == nil {
		lt.ev1, err = cu.MakeEvent(cu.DefaultEvent)
	}
	if err != nil {
		t.Fatal(err)
	}
	return lt
}

func (lt *launchTimer) close() {
	cu.DestroyEvent(&lt.ev0)
	cu.DestroyEvent(&lt.ev1)
	lt.st.Destroy()
}

// times runs launch n times on the timer's stream (before, when not nil, untimed before each)
// and returns the milliseconds of every run after the first, a warm-up, or of the only one when
// n is 1 (under ncu).
func (lt *launchTimer) times(n int, before func() error, launch func(st cu.Stream) error) ([]float64, error) {
	var ms []float64
	for r := 0; r < n; r++ {
		if before != nil {
			if err := before(); err != nil {
				return nil, err
			}
		}
		if err := lt.ev0.Record(lt.st); err != nil {
			return nil, err
		}
		if err := launch(lt.st); err != nil {
			return nil, err
		}
		if err := lt.ev1.Record(lt.st); err != nil {
			return nil, err
		}
		if err := lt.st.Synchronize(); err != nil {
			return nil, err
		}
		d, err := lt.ev0.Elapsed(lt.ev1)
		if err != nil {
			return nil, err
		}
		if r > 0 || n == 1 {
			ms = append(ms, float64(d))
		}
	}
	return ms, nil
}

// median of timings (sorts them).
func medianMS(ms []float64) float64 {
	slices.Sort(ms)
	return ms[len(ms)/2]
}
