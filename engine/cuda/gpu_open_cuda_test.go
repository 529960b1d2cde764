//go:build cuda

package cuda

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"unsafe"

	"gorgonia.org/cu"

	"voxpipe/engine/cpu"
	"voxpipe/engine/cuda/kernels"
	"voxpipe/engine/engine"
	"voxpipe/fixtures"
	"voxpipe/internal/enginetest"
	"voxpipe/model"
	"voxpipe/phantom"
)

// TestCUDABackgroundOpen: the engine returns before its context exists; buffers allocated and
// filled meanwhile are page-locked before Segment copies from them; a buffer freed before its
// page-locking leaves the queue; a failed open reaches Ready, Segment and AllocHost'd buffers
// cleanly, and Close returns.
func TestCUDABackgroundOpen(t *testing.T) {
	m := model.RandomModel(16, 4, 61)
	vol := enginetest.RandomVolume(37, 29, 23, 62, true)
	want := enginetest.SegmentWhole(t, cpu.New(m, 0), vol, 4)
	eng, err := NewWith(m, 0, engine.CUDAOptions{Precision: engine.PrecisionFP32})
	if err != nil {
		t.Fatal(err)
	}
	e := eng.(*cudaEngine)
	n := vol.NX * vol.NY * vol.NZ
	ib, err := e.AllocHost(2 * n) // most likely before the context exists
	if err != nil {
		t.Fatal(err)
	}
	ob, err := e.AllocHost(n)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := e.AllocHost(1 << 20) // freed at once: it may still be queued
	if err != nil {
		t.Fatal(err)
	}
	if err := gone.Free(); err != nil {
		t.Errorf("Free of a fresh buffer: %v", err)
	}
	in := unsafe.Slice((*int16)(unsafe.Pointer(unsafe.SliceData(ib.Bytes()))), n)
	copy(in, vol.I16)
	pv := &model.Volume{NX: vol.NX, NY: vol.NY, NZ: vol.NZ, Norm: vol.Norm, I16: in}
	out := ob.Bytes()
	gpuSegment(t, e, pv, out, 5)
	if err := e.Ready(); err != nil {
		t.Fatalf("Ready after Segment: %v", err)
	}
	if !e.LastStats().Pinned {
		t.Error("buffers allocated while the engine opened were not page-locked by Segment")
	}
	compareWithCPU(t, m, vol, out, want, nil)
	// Many buffers allocated and freed from several goroutines while the engine works.
	wg := startHostChurn(t, e)
	gpuSegment(t, e, pv, out, 7)
	wg.Wait()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, b := range []engine.HostBuffer{ib, ob} {
		if err := b.Free(); err != nil {
			t.Errorf("Free after Close: %v", err)
		}
	}

	checkFailedOpen(t, m, pv, out)
}

// startHostChurn allocates and frees host buffers of e from 8 goroutines, 20 each; wait for them
// on the returned group.
func startHostChurn(t *testing.T, e *cudaEngine) *sync.WaitGroup {
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				b, err := e.AllocHost(64 << 10)
				if err != nil {
					t.Error(err)
					return
				}
				b.Bytes()[0] = 1
				if err := b.Free(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	return &wg
}

// checkFailedOpen opens an engine whose setup fails (testSetupFault): Ready, Segment (of pv into
// out) and a buffer allocated meanwhile see the fault cleanly, and Close returns.
func checkFailedOpen(t *testing.T, m *model.Model, pv *model.Volume, out []uint8) {
	t.Helper()
	fault := errors.New("injected setup fault")
	testSetupFault = fault // read by the engine's thread: reset only once it has opened
	eng, err := NewWith(m, 0, engine.CUDAOptions{})
	if err != nil {
		testSetupFault = nil
		t.Fatal(err)
	}
	e := eng.(*cudaEngine)
	b, err := e.AllocHost(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	err = e.Ready()
	testSetupFault = nil
	if !errors.Is(err, fault) {
		t.Fatalf("Ready: %v, want the injected fault", err)
	}
	if err := e.Segment(context.Background(), pv, out, engine.Options{Slab: 4}); !errors.Is(err, fault) {
		t.Errorf("Segment after a failed open: %v, want the injected fault", err)
	}
	if err := b.Free(); err != nil {
		t.Errorf("Free after a failed open: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("Close after a failed open: %v", err)
	}
}

// labSM90aCubin is the lab's sm_90a cubin (lab/wgmma), found from the package folder (go test)
// or the repository root (scripts/gpu-check.sh runs the test binary there).
func labSM90aCubin(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"lab/wgmma/voxpipe_sm90a.cubin", "../../lab/wgmma/voxpipe_sm90a.cubin"} {
		if _, err := os.Stat(p); err == nil {
			abs, err := filepath.Abs(p)
			if err != nil {
				t.Fatal(err)
			}
			return abs
		}
	}
	t.Fatal("lab/wgmma/voxpipe_sm90a.cubin not found from the package folder or the repository root")
	return ""
}

// TestCUDAKernelImages checks which kernel image the engine loads on this device (ChooseImage's
// pick by device) and, on compute capability 9.0 where the lab's sm_90a cubin (loaded from its
// file through EnvKernels) also loads, that the fused kernel of each gives the same labels on
// phantoms (>= 99.99 %: two compilers may contract floating-point operations differently).
func TestCUDAKernelImages(t *testing.T) {
	if os.Getenv(kernels.EnvKernels) != "" {
		t.Skipf("%s is set: the choice by device is not what runs", kernels.EnvKernels)
	}
	mdl, err := model.ParseModel(fixtures.DefaultModel)
	if err != nil {
		t.Fatal(err)
	}
	major, minor, err := cu.Device(0).ComputeCapability()
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := kernels.ChooseImage(major, minor, "")
	if err != nil {
		t.Fatal(err)
	}
	open := func(env string) *cudaEngine {
		t.Setenv(kernels.EnvKernels, env)
		e := newTestCUDAEngine(t, mdl, engine.PrecisionFP16)
		desc, err := e.Kernels() // waits for the open, which sets e.mod
		if err != nil {
			t.Fatal(err)
		}
		table(t, "kernels, "+kernels.EnvKernels+"="+env, "%s", desc)
		return e
	}
	auto := open("")
	if auto.mod.Image.Name != want.Name {
		t.Fatalf("compute capability %d.%d: loaded the %s, want the %s", major, minor, auto.mod.Image, want)
	}
	if major != 9 || minor != 0 {
		return
	}
	cubinPath := labSM90aCubin(t)
	cubin, fat := open(cubinPath), open("fatbin")
	if cubin.mod.Image.Name != cubinPath || fat.mod.Image.Name != "fatbin" {
		t.Fatalf("forced images: %s and %s", cubin.mod.Image, fat.mod.Image)
	}
	for _, p := range []phantom.Params{{NX: 181, NY: 217, NZ: 90, Seed: 2}, {NX: 256, NY: 256, NZ: 160, Seed: 3}} {
		ph, vol := enginetest.PhantomVolume(t, p)
		a, b := make([]uint8, len(ph.Image)), make([]uint8, len(ph.Image))
		gpuSegment(t, cubin, vol, a, 32)
		gpuSegment(t, fat, vol, b, 32)
		diff, agree, _, _ := maskAgreement(a, b, mdl.Classes)
		table(t, fmt.Sprintf("sm_90a cubin vs fatbin, phantom %dx%dx%d", p.NX, p.NY, p.NZ), "%d of %d differ (%.5f%% agree)", diff, len(a), 100*agree)
		if agree < 0.9999 {
			t.Errorf("phantom %dx%dx%d: the images' labels agree on %.5f %% of voxels, want >= 99.99 %%", p.NX, p.NY, p.NZ, 100*agree)
		}
	}
}
