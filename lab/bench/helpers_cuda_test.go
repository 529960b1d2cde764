//go:build cuda

package bench

import (
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"gorgonia.org/cu"

	"voxpipe/engine/cuda/kernels"
)

// onGPU runs f on the test's goroutine, locked to its OS thread, with device 0's primary context
// current there and the product kernels' module loaded.
func onGPU(t testing.TB, f func(m *kernels.Module)) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dev := cu.Device(0)
	if err := kernels.CheckDevice(dev); err != nil {
		t.Fatalf("device 0: %v", err)
	}
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		t.Fatalf("retain context: %v", err)
	}
	defer dev.ReleasePrimaryCtx()
	if err := cu.SetCurrentContext(ctx); err != nil {
		t.Fatalf("set context: %v", err)
	}
	m, err := kernels.LoadModuleFor(dev)
	if err != nil {
		t.Fatalf("load module: %v", err)
	}
	defer m.Unload()
	f(m)
}

// randWeights is a random network of c channels and k classes (He-style bounds).
func randWeights(rng *rand.Rand, c, k int) *kernels.Weights {
	g := c / 2
	r := func(n int, bound float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(bound * (2*rng.Float64() - 1))
		}
		return v
	}
	return &kernels.Weights{
		Channels: c, Classes: k,
		C1W: r(c*27, math.Sqrt(6.0/27)), C1B: r(c, 0.1),
		C2W: r(c*c*27, math.Sqrt(6.0/float64(27*c))), C2B: r(c, 0.1),
		CGW: r(c*c*27, math.Sqrt(6.0/float64(27*c))), CGB: r(c, 0.1),
		WXW: r(g*c, math.Sqrt(6.0/float64(c))), WXB: r(g, 0.1),
		WGW: r(g*c, math.Sqrt(6.0/float64(c))), WGB: r(g, 0.1),
		PsiW: r(g, math.Sqrt(6.0/float64(g))), PsiB: r(1, 0.1),
		HeadW: r(k*c, math.Sqrt(6.0/float64(c))), HeadB: r(k, 0.1),
	}
}

func alloc(t testing.TB, bytes int64) cu.DevicePtr {
	t.Helper()
	p, err := cu.MemAlloc(bytes)
	if err != nil {
		t.Fatalf("MemAlloc(%d): %v", bytes, err)
	}
	return p
}

func put[T any](t *testing.T, p cu.DevicePtr, v []T) {
	t.Helper()
	if err := cu.MemcpyHtoD(p, unsafe.Pointer(&v[0]), int64(len(v))*int64(unsafe.Sizeof(v[0]))); err != nil {
		t.Fatalf("MemcpyHtoD: %v", err)
	}
}

func get[T any](t *testing.T, v []T, p cu.DevicePtr) {
	t.Helper()
	if err := cu.MemcpyDtoH(unsafe.Pointer(&v[0]), p, int64(len(v))*int64(unsafe.Sizeof(v[0]))); err != nil {
		t.Fatalf("MemcpyDtoH: %v", err)
	}
}

func ceilDiv(a, b int32) int { return int((int64(a) + int64(b) - 1) / int64(b)) }

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
