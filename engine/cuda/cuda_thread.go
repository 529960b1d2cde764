//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"gorgonia.org/cu"

	"voxpipe/engine/cuda/kernels"
	"voxpipe/engine/engine"
)

// loop is the thread that owns the context: it makes the device's primary context current, runs
// setup, and then runs requests until a nil one arrives (after a failed open only that one
// comes: call refuses the others). It never unlocks the OS thread, so the thread ends with the
// goroutine.
func (e *cudaEngine) loop() {
	runtime.LockOSThread()
	t0 := time.Now()
	dev := cu.Device(e.device)
	_ = dev.SetPrimaryCtxFlags(cu.SchedBlockingSync) // fails harmlessly when the context is already active
	ctx, err := dev.RetainPrimaryCtx()
	retained := err == nil
	if err == nil {
		err = cu.SetCurrentContext(ctx)
	}
	if err != nil {
		err = fmt.Errorf("CUDA context on device %d: %w", e.device, err)
		close(e.ctxMade)
	} else {
		e.ctx = ctx
		e.opened = append(e.opened, engine.OpenStep{Name: "context", Duration: time.Since(t0)})
		close(e.ctxMade) // registerAside may page-lock host buffers from now on
		if err = e.setup(); err != nil {
			e.release() // what setup made; its own errors add nothing to err
		}
	}
	if err != nil {
		e.openErr = fmt.Errorf("cuda: open %s: %w", e.name, err)
	}
	close(e.ready)
	for f := range e.reqs {
		if f == nil {
			break
		}
		f()
	}
	if retained {
		dev.ReleasePrimaryCtx()
	}
}

// Ready implements BackgroundOpener: it waits until the engine's thread has made the context,
// loaded the kernels and uploaded the weights, and returns why it could not.
func (e *cudaEngine) Ready() error {
	<-e.ready
	return e.openErr
}

// Kernels implements KernelDescriber: the kernel set the engine's precision runs and the image
// its module was loaded from (kernels.Module.Describe).
func (e *cudaEngine) Kernels() (string, error) {
	if err := e.Ready(); err != nil {
		return "", err
	}
	set := "float32 kernels (conv1, conv2, convg, gate_head)"
	if e.fused {
		set = "fused fp16 kernel (" + e.mod.FusedGeometry().Instructions() + ")"
	}
	return set + " from the " + e.mod.Describe(), nil
}

// OpenSteps implements KernelDescriber: how long the background open took to make the
// context, load the kernels, and upload the weights and make the streams and events.
func (e *cudaEngine) OpenSteps() ([]engine.OpenStep, error) {
	if err := e.Ready(); err != nil {
		return nil, err
	}
	return e.opened, nil
}

// call runs f on the context's thread and waits for it (first for the engine to have opened:
// after a failed open it returns that error). The mutex is held while handing f over so that no
// request can follow the stop request.
func (e *cudaEngine) call(f func() error) error {
	if err := e.Ready(); err != nil {
		return err
	}
	errc := make(chan error, 1)
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return engine.ErrEngineClosed
	}
	e.reqs <- func() { errc <- f() }
	e.mu.Unlock()
	return <-errc
}

// stopIfIdle stops the thread once the engine is closed and every pinned buffer is freed.
// Called with e.mu held.
func (e *cudaEngine) stopIfIdle() {
	if e.closed && e.liveHost == 0 && !e.stopped {
		e.stopped = true
		e.reqs <- nil
	}
}

// testSetupFault, when set (by tests, before opening an engine), makes setup fail with its
// error after the context is made.
var testSetupFault error

// setup runs on the thread: kernels, weights, streams, events.
func (e *cudaEngine) setup() error {
	if testSetupFault != nil {
		return testSetupFault
	}
	sms, err := cu.Device(e.device).Attribute(cu.MultiprocessorCount)
	if err != nil {
		return fmt.Errorf("multiprocessor count: %w", err)
	}
	e.sms = int32(sms)
	t := time.Now()
	if e.mod, err = kernels.LoadModuleFor(cu.Device(e.device)); err != nil {
		return err
	}
	e.opened = append(e.opened, engine.OpenStep{Name: "kernels", Duration: time.Since(t)})
	t = time.Now()
	defer func() {
		e.opened = append(e.opened, engine.OpenStep{Name: "weights and streams", Duration: time.Since(t)})
	}()
	m := e.model
	if e.weights, err = e.mod.SetWeights(&kernels.Weights{
		Channels: m.Channels, Classes: m.Classes,
		C1W: m.C1W, C1B: m.C1B, C2W: m.C2W, C2B: m.C2B, CGW: m.CGW, CGB: m.CGB,
		WXW: m.WXW, WXB: m.WXB, WGW: m.WGW, WGB: m.WGB,
		PsiW: m.PsiW, PsiB: m.PsiB, HeadW: m.HeadW, HeadB: m.HeadB,
	}); err != nil {
		return err
	}
	for _, s := range e.streams() {
		if *s, err = cu.MakeStream(cu.NonBlocking); err != nil {
			return fmt.Errorf("create stream: %w", err)
		}
	}
	if e.ref, err = cu.MakeEvent(cu.BlockingSyncEvent); err != nil {
		return fmt.Errorf("create event: %w", err)
	}
	return e.ensureEvents(initialEventSets)
}

// initialEventSets: the event sets setup makes, enough for 1000 planes at the default --slab 32
// at either precision (fp32: 32 slabs; the fp16 ramp's doubling slabs: fewer).
const initialEventSets = 40

// ensureEvents grows the event ring to at least n slabs' sets (on the thread). Sets are never
// shrunk: release destroys them.
func (e *cudaEngine) ensureEvents(n int) error {
	for len(e.ring) < n {
		var set slabEvents
		for _, ev := range set.list() {
			var err error
			if *ev, err = cu.MakeEvent(cu.BlockingSyncEvent); err != nil {
				for _, made := range set.list() {
					if *made != (cu.Event{}) {
						cu.DestroyEvent(made)
					}
				}
				return fmt.Errorf("create event: %w", err)
			}
		}
		e.ring = append(e.ring, set)
	}
	return nil
}

// release runs on the thread: frees everything setup and Segment allocated.
func (e *cudaEngine) release() error {
	var errs []error
	note := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	if e.ctx != (cu.CUContext{}) {
		note("synchronize", cu.Synchronize())
	}
	note("free buffers", e.freeBuffers())
	if e.weights != nil {
		note("free weights", e.weights.Free())
		e.weights = nil
	}
	var zero cu.Event
	for i := range e.ring {
		for _, ev := range e.ring[i].list() {
			if *ev != zero {
				note("destroy event", cu.DestroyEvent(ev))
			}
		}
	}
	e.ring = nil
	if e.ref != zero {
		note("destroy event", cu.DestroyEvent(&e.ref))
	}
	for _, s := range e.streams() {
		if *s != (cu.Stream{}) {
			note("destroy stream", s.Destroy())
		}
	}
	if e.mod != nil {
		note("unload module", e.mod.Unload())
		e.mod = nil
	}
	return errors.Join(errs...)
}

// streams lists every stream the engine owns: created in setup, destroyed in release, all
// waited for before segment returns.
func (e *cudaEngine) streams() []*cu.Stream {
	return []*cu.Stream{&e.h2d, &e.compute[0], &e.compute[1], &e.d2h}
}
