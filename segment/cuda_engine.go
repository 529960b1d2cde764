//go:build cuda

package segment

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"voxpipe/kernels"
	"voxpipe/kernels/pinned"
	"voxpipe/pipeline/timing"
)

// The CUDA engine streams a volume through the GPU in z-slabs: for slab k, the upload of its
// input (with Halo planes each side), the kernels and the download of its labels run on
// separate streams ordered by events, so the upload of slab k+1 and the download of slab k-1
// overlap the kernels of slab k. The kernels are, at PrecisionFP32, conv1 with the
// normalisation, conv2, the dilated conv and gate+head+argmax, with e, s and g in device memory,
// on one compute stream; at PrecisionFP16 one fused tensor-core kernel that keeps them on chip,
// on two compute streams in turn (slab k+1's kernel starts on the SMs slab k's last blocks
// leave idle). The device input and label buffers are doubled; e, s and g are single. Every
// buffer is allocated once and grown only for a larger volume or slab.
//
// One goroutine locked to its OS thread owns the CUDA context (the device's primary context):
// every driver call goes through it (engine.call).

const (
	guardBytes   = 4096 // guard regions around every device buffer the kernels write
	guardPattern = 0xA5
	eventRing    = 4 // slab event sets in use at once (a slab's events are read two slabs later)
)

// cudaEngine implements Engine, HostAllocator and GPUStatsReporter on one GPU.
type cudaEngine struct {
	device    int
	name      string
	model     *Model
	precision string // PrecisionFP16 or PrecisionFP32
	fused     bool   // precision == PrecisionFP16
	sms       int32  // multiprocessors, for the fused kernel's z-chunks
	// testSlabPlan, when its sizes sum to the volume's planes, replaces slabSizes' plan (tests that
	// compare slab schedules set it).
	testSlabPlan []int

	reqs chan func() // to the context's thread; nil func stops it

	// The thread makes the context and runs setup after NewCUDAEngineWith has returned (the
	// context alone takes 100-130 ms on the H200 machine, time the pipeline spends reading the
	// first volume): ready is closed when it is done, openErr says why it failed.
	ready   chan struct{}
	openErr error

	mu       sync.Mutex
	closed   bool // Close was called
	stopped  bool // the thread was told to stop
	liveHost int  // pinned buffers not yet freed (the context must outlive them)

	// Host buffers from AllocHost whose page-locking is still to do (on the thread, which needs
	// the context). Its own mutex: functions run on the thread never take mu (call holds mu
	// while handing a function over).
	pendMu  sync.Mutex
	pending []*pinnedBuffer

	// Owned by the thread.
	ctx      cu.CUContext
	mod      *kernels.Module
	weights  *kernels.DeviceWeights
	h2d      cu.Stream
	compute  [2]cu.Stream // the fp16 engine's slab k runs on compute[k%2]; the fp32 kernels on compute[0]
	d2h      cu.Stream
	ref      cu.Event
	ring     [eventRing]slabEvents
	bufs     deviceBuffers
	broken   error // a sticky CUDA error: the context is unusable
	last     GPUStats
	lastLock sync.Mutex

	// Test hooks (set before use, read on the thread).
	poison bool // fill the device buffers with garbage before every slab
}

// slabEvents are the CUDA events of one slab, in stream order.
type slabEvents struct {
	h2d0, h2d1             cu.Event // upload
	k0, c1, c2, cg, k1     cu.Event // kernels: start, after conv1, conv2, convg, gate_head (fp16: c1, c2, cg = k1)
	d2h0, d2h1             cu.Event // download
	inputBytes, labelBytes int64
	voxels                 int64
}

func (s *slabEvents) list() []*cu.Event {
	return []*cu.Event{&s.h2d0, &s.h2d1, &s.k0, &s.c1, &s.c2, &s.cg, &s.k1, &s.d2h0, &s.d2h1}
}

// devBuf is a device allocation with guardBytes of guardPattern on each side of its size usable
// bytes, so a kernel writing out of bounds shows in checkGuards.
type devBuf struct {
	base cu.DevicePtr
	size int64
}

func (b devBuf) ptr() cu.DevicePtr { return b.base + guardBytes }

type deviceBuffers struct {
	in      [2]devBuf // input slabs with halo, int16 or float32
	e, s, g devBuf
	lab     [2]devBuf // label slabs
}

func (d *deviceBuffers) all() []*devBuf {
	return []*devBuf{&d.in[0], &d.in[1], &d.e, &d.s, &d.g, &d.lab[0], &d.lab[1]}
}

// CUDADeviceCount is the number of CUDA devices the driver sees.
func CUDADeviceCount() (int, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return 0, fmt.Errorf("segment: count CUDA devices: %w", err)
	}
	return n, nil
}

// CUDAInfo describes the GPUs (name, compute capability, memory, multiprocessors, whether
// voxpipe's kernels run on it) and the driver's CUDA version.
func CUDAInfo() (string, error) {
	n, err := CUDADeviceCount()
	if err != nil {
		return "", err
	}
	if n == 0 {
		return "", errors.New("segment: no CUDA device")
	}
	var parts []string
	for i := 0; i < n; i++ {
		dev := cu.Device(i)
		name, err := dev.Name()
		if err != nil {
			return "", fmt.Errorf("segment: name of CUDA device %d: %w", i, err)
		}
		major, minor, _ := dev.ComputeCapability()
		mem, _ := dev.TotalMem()
		sms, _ := dev.Attribute(cu.MultiprocessorCount)
		desc := fmt.Sprintf("%d: %s (cc %d.%d, %.1f GiB, %d SMs)", i, name, major, minor, float64(mem)/(1<<30), sms)
		if err := kernels.CheckDevice(dev); err != nil {
			desc += " unsupported"
		}
		parts = append(parts, desc)
	}
	return fmt.Sprintf("%s; driver CUDA %s", strings.Join(parts, "; "), kernels.DriverVersionString(cu.Version())), nil
}

// NewCUDAEngine opens an engine for m on GPU device (0-based) with the default options
// (PrecisionFP16): NewCUDAEngineWith(m, device, CUDAOptions{}).
func NewCUDAEngine(m *Model, device int) (Engine, error) {
	return NewCUDAEngineWith(m, device, CUDAOptions{})
}

// NewCUDAEngineWith opens an engine for m on GPU device (0-based): it checks the options and
// the GPU (compute capability >= 8.0, driver) and returns; the engine's thread then makes the
// context, loads the kernels and uploads the weights in the background. Every method waits for
// that where it needs to, and fails with its error if it failed; Ready (BackgroundOpener) waits
// for it alone. Models of up to kernels.Channels channels and kernels.MaxClasses classes are
// supported.
func NewCUDAEngineWith(m *Model, device int, opt CUDAOptions) (Engine, error) {
	precision, err := opt.precision()
	if err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if m.Channels > kernels.Channels || m.Classes > kernels.MaxClasses {
		return nil, fmt.Errorf("%w: the CUDA kernels handle up to %d channels and %d classes; model has %d and %d",
			kernels.ErrUnsupported, kernels.Channels, kernels.MaxClasses, m.Channels, m.Classes)
	}
	n, err := CUDADeviceCount()
	if err != nil {
		return nil, err
	}
	if device < 0 || device >= n {
		return nil, fmt.Errorf("segment: no CUDA device %d (%d present)", device, n)
	}
	if err := kernels.CheckDevice(cu.Device(device)); err != nil {
		return nil, err
	}
	e := &cudaEngine{device: device, name: fmt.Sprintf("cuda:%d", device), model: m, reqs: make(chan func()),
		ready: make(chan struct{}), precision: precision, fused: precision == PrecisionFP16}
	go e.loop()
	return e, nil
}

// loop is the thread that owns the context: it makes the device's primary context current, runs
// setup, and then runs requests until a nil one arrives (after a failed open only that one
// comes: call refuses the others). It never unlocks the OS thread, so the thread ends with the
// goroutine.
func (e *cudaEngine) loop() {
	runtime.LockOSThread()
	dev := cu.Device(e.device)
	_ = dev.SetPrimaryCtxFlags(cu.SchedBlockingSync) // fails harmlessly when the context is already active
	ctx, err := dev.RetainPrimaryCtx()
	retained := err == nil
	if err == nil {
		err = cu.SetCurrentContext(ctx)
	}
	if err != nil {
		err = fmt.Errorf("CUDA context on device %d: %w", e.device, err)
	} else {
		e.ctx = ctx
		if err = e.setup(); err != nil {
			e.release() // what setup made; its own errors add nothing to err
		}
	}
	if err != nil {
		e.openErr = fmt.Errorf("segment: open %s: %w", e.name, err)
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
		return ErrEngineClosed
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
	if e.mod, err = kernels.LoadModule(); err != nil {
		return err
	}
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
	for i := range e.ring {
		for _, ev := range e.ring[i].list() {
			if *ev, err = cu.MakeEvent(cu.BlockingSyncEvent); err != nil {
				return fmt.Errorf("create event: %w", err)
			}
		}
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

// Name implements Engine.
func (e *cudaEngine) Name() string { return e.name }

// Precision is the engine's CUDAOptions.Precision, the default applied.
func (e *cudaEngine) Precision() string { return e.precision }

// Close frees the engine's device memory and stops its thread once every pinned host buffer it
// allocated is freed (freeing them after Close is fine).
func (e *cudaEngine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.mu.Unlock()
	var err error
	if e.Ready() == nil { // a failed open has released what it made
		err = e.call(e.release)
	}
	e.mu.Lock()
	e.closed = true
	e.stopIfIdle()
	e.mu.Unlock()
	if err != nil {
		return fmt.Errorf("segment: close %s: %w", e.name, err)
	}
	return nil
}

// LastStats implements GPUStatsReporter: the figures of the last successful Segment call.
func (e *cudaEngine) LastStats() GPUStats {
	e.lastLock.Lock()
	defer e.lastLock.Unlock()
	return e.last
}

// pinnedBuffer is host memory from AllocHost: mapped and faulted in at once, page-locked on the
// engine's thread as soon as it can (registerPending).
type pinnedBuffer struct {
	e    *cudaEngine
	p    unsafe.Pointer
	n    int
	once sync.Once
	done bool // freed

	// Set on the engine's thread by registerPending; read there, or after a call.
	registered bool
	regErr     error
}

func (b *pinnedBuffer) Bytes() []byte {
	if b.done {
		return nil
	}
	return unsafe.Slice((*byte)(b.p), b.n)
}

// Free unregisters the buffer (if it was page-locked: a buffer still waiting for that only
// leaves the queue) and unmaps it. It returns the page-locking's error if that failed (the
// engine then copied through pageable memory).
func (b *pinnedBuffer) Free() error {
	var err error
	b.once.Do(func() {
		b.done = true
		e := b.e
		e.pendMu.Lock()
		i := slices.Index(e.pending, b)
		if i >= 0 {
			e.pending = slices.Delete(e.pending, i, i+1)
		}
		e.pendMu.Unlock()
		if i < 0 { // registerPending has taken it: ask the thread, after it
			err = e.call(func() error {
				if b.registered {
					return pinned.Unregister(b.p)
				}
				return b.regErr
			})
		}
		// Unmapping needs no context: off the engine's thread, so buffers free in parallel.
		if uerr := pinned.Unmap(b.p, b.n); uerr != nil && err == nil {
			err = uerr
		}
		e.mu.Lock()
		e.liveHost--
		e.stopIfIdle()
		e.mu.Unlock()
	})
	return err
}

// AllocHost implements HostAllocator: portable page-locked memory (mmap'd, faulted in on all
// cores, then cuMemHostRegister: 7x faster than cuMemHostAlloc for a volume, docs/perf.md), so
// any GPU engine of the process copies from it at full speed. It returns once the memory is
// mapped and faulted in, which needs no context; the page-locking follows on the engine's thread
// (while the caller fills the buffer), and Segment does any still pending before it copies. The
// engine's context lives until every buffer is freed, also after Close.
func (e *cudaEngine) AllocHost(bytes int) (HostBuffer, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrEngineClosed
	}
	e.liveHost++
	e.mu.Unlock()
	p, err := pinned.MapTouched(bytes)
	if err != nil {
		e.mu.Lock()
		e.liveHost--
		e.stopIfIdle()
		e.mu.Unlock()
		return nil, fmt.Errorf("segment: %s: %w", e.name, err)
	}
	b := &pinnedBuffer{e: e, p: p, n: bytes}
	e.pendMu.Lock()
	e.pending = append(e.pending, b)
	e.pendMu.Unlock()
	go e.call(func() error { e.registerPending(); return nil }) // nothing to report: see Free
	return b, nil
}

// registerPending page-locks the buffers AllocHost has queued (on the thread). A failure leaves
// that buffer pageable: copies from it still work, slower; Free reports the error. (With several
// GPUs the pipeline allocates through the first engine; another engine that segments a volume
// before the first has page-locked its buffer copies it as pageable memory, correct but slower.)
func (e *cudaEngine) registerPending() {
	e.pendMu.Lock()
	list := e.pending
	e.pending = nil
	e.pendMu.Unlock()
	for _, b := range list {
		b.regErr = pinned.Register(b.p, b.n)
		b.registered = b.regErr == nil
	}
}

// Segment implements Engine.
func (e *cudaEngine) Segment(ctx context.Context, vol *Volume, out []uint8, opt Options) error {
	start := time.Now()
	if err := checkVolume(vol, out); err != nil {
		return err
	}
	if opt.Slab < 1 {
		return fmt.Errorf("%w: slab of %d slices", ErrBadVolume, opt.Slab)
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return ErrEngineClosed
	}
	return e.call(func() error { return e.segment(ctx, vol, out, opt, start) })
}

// The fp16 engine's slabs grow from Options.Slab at both ends of the volume to at most
// fusedLargestSlab planes in the middle (SlabRamp), and to at most fusedSlotBytes of input per
// device buffer slot (two slots are allocated).
const (
	fusedLargestSlab = 256
	fusedSlotBytes   = 512 << 20
)

// slabSizes plans a volume's slabs: Options.Slab planes each for the float32 kernels (their
// e, s and g buffers grow with the slab), SlabRamp for the fused kernel.
func (e *cudaEngine) slabSizes(nz, slab int, planeBytes int64) []int {
	if sum := 0; e.testSlabPlan != nil {
		for _, n := range e.testSlabPlan {
			sum += n
		}
		if sum == nz {
			return slices.Clone(e.testSlabPlan)
		}
	}
	largest := 0
	if e.fused {
		largest = int(min(fusedLargestSlab, fusedSlotBytes/max(planeBytes, 1)))
	}
	return SlabRamp(nz, slab, largest)
}

// slabPlan is one slab's geometry.
type slabPlan struct {
	index          int
	z0, z1         int // output planes
	lo, hi         int // input planes uploaded (the halo clipped to the volume)
	inputOffset    int64
	inputBytes     int64
	labelBytes     int64
	outputVoxels   int64
	bufferPlaneOff int64 // input plane lo's index in the device input buffer
}

// segment runs on the thread.
func (e *cudaEngine) segment(ctx context.Context, vol *Volume, out []uint8, opt Options, start time.Time) error {
	if e.broken != nil {
		return fmt.Errorf("%s unusable after an earlier CUDA error: %w", e.name, e.broken)
	}
	e.registerPending() // the caller's buffers may still be queued for page-locking
	nx, ny, nz := vol.NX, vol.NY, vol.NZ
	plane := int64(nx) * int64(ny)
	elem := int64(vol.elemSize())
	sizes := e.slabSizes(nz, opt.Slab, plane*elem)
	zs := make([]int, len(sizes)+1) // slab k is output planes zs[k]..zs[k+1]
	for k, n := range sizes {
		zs[k+1] = zs[k] + n
	}
	slab := slices.Max(sizes)
	var host unsafe.Pointer
	if vol.I16 != nil {
		host = unsafe.Pointer(&vol.I16[0])
	} else {
		host = unsafe.Pointer(&vol.F32[0])
	}
	outHost := unsafe.Pointer(&out[0])

	if err := e.ensureBuffers(int64(slab), plane, elem); err != nil {
		return err
	}
	stats := GPUStats{Pinned: pinned.IsPinned(host, nx*ny*nz*int(elem)) && pinned.IsPinned(outHost, len(out))}

	refOffset := time.Since(start)
	if err := e.ref.Record(e.h2d); err != nil {
		return e.fail(fmt.Errorf("record event: %w", err))
	}
	nSlabs := len(sizes)
	harvested := 0
	harvest := func(k int) error {
		ev := &e.ring[k%eventRing]
		if err := ev.d2h1.Synchronize(); err != nil {
			return e.fail(fmt.Errorf("slab %d: %w", k, err))
		}
		if err := e.report(k, ev, refOffset, &stats, opt.OnEvent); err != nil {
			return err
		}
		if opt.OnSlabDone != nil { // slab k's download is complete: its labels are in out
			opt.OnSlabDone(zs[k], zs[k+1])
		}
		return nil
	}
	var runErr error
	for k := 0; k < nSlabs; k++ {
		if k >= 2 {
			if runErr = harvest(k - 2); runErr != nil {
				break
			}
			harvested = k - 1
		}
		if err := ctx.Err(); err != nil {
			runErr = fmt.Errorf("segment slab %d: %w", k, err)
			break
		}
		z0, z1 := zs[k], zs[k+1]
		lo, hi := max(z0-Halo, 0), min(z1+Halo, nz)
		p := slabPlan{
			index: k, z0: z0, z1: z1, lo: lo, hi: hi,
			inputOffset:    int64(lo) * plane * elem,
			inputBytes:     int64(hi-lo) * plane * elem,
			labelBytes:     int64(z1-z0) * plane,
			outputVoxels:   int64(z1-z0) * plane,
			bufferPlaneOff: int64(lo - (z0 - Halo)),
		}
		if runErr = e.enqueue(vol, p, int64(slab), plane, elem, host, outHost); runErr != nil {
			break
		}
	}
	// Nothing may touch the caller's memory after return: wait for all the streams.
	for _, s := range e.streams() {
		if err := s.Synchronize(); err != nil && runErr == nil {
			runErr = e.fail(fmt.Errorf("synchronize: %w", err))
		}
	}
	if runErr != nil {
		return runErr
	}
	for k := harvested; k < nSlabs; k++ {
		if err := harvest(k); err != nil {
			return err
		}
	}
	last := &e.ring[(nSlabs-1)%eventRing]
	total, err := e.ref.Elapsed(last.d2h1)
	if err != nil {
		return e.fail(fmt.Errorf("elapsed time: %w", err))
	}
	stats.Total = msDuration(total)
	stats.Slabs = nSlabs
	e.lastLock.Lock()
	e.last = stats
	e.lastLock.Unlock()
	return nil
}

// fail records err as sticky when the context is no longer usable (a kernel fault), and returns it.
func (e *cudaEngine) fail(err error) error {
	for _, sticky := range []string{"IllegalAddress", "LaunchFailed", "IllegalInstruction", "MisalignedAddress", "HardwareStackError", "InvalidPc", "Assert", "EccUncorrectable"} {
		if strings.Contains(err.Error(), sticky) {
			e.broken = err
		}
	}
	return fmt.Errorf("%s: %w", e.name, err)
}

// enqueue puts slab p's upload, kernels and download on the three streams.
func (e *cudaEngine) enqueue(vol *Volume, p slabPlan, slab, plane, elem int64, host, outHost unsafe.Pointer) error {
	k := p.index
	slot := k % 2
	ev := &e.ring[k%eventRing]
	ev.inputBytes, ev.labelBytes, ev.voxels = p.inputBytes, p.labelBytes, p.outputVoxels
	var prev *slabEvents
	if k >= 2 {
		prev = &e.ring[(k-2)%eventRing] // the slab that used the same buffer slots
	}
	in, lab := e.bufs.in[slot], e.bufs.lab[slot]
	nx, ny, nz := int32(vol.NX), int32(vol.NY), int32(vol.NZ)
	nzOut := int32(p.z1 - p.z0)
	ePlanes := kernels.EPlanes(int32(slab))
	w := e.weights
	step := func(what string, err error) error {
		if err != nil {
			return e.fail(fmt.Errorf("slab %d: %s: %w", k, what, err))
		}
		return nil
	}

	// Upload, once conv1 of slab k-2 has read the slot.
	if prev != nil {
		if err := step("wait", e.h2d.Wait(prev.c1, 0)); err != nil {
			return err
		}
	}
	if e.poison {
		if err := step("poison", cu.MemsetD8Async(in.ptr(), 0xFF, in.size, e.h2d)); err != nil {
			return err
		}
	}
	if err := step("record", ev.h2d0.Record(e.h2d)); err != nil {
		return err
	}
	src := unsafe.Add(host, p.inputOffset)
	if err := step("upload", cu.MemcpyHtoDAsync(in.ptr()+cu.DevicePtr(p.bufferPlaneOff*plane*elem), src, p.inputBytes, e.h2d)); err != nil {
		return err
	}
	if err := step("record", ev.h2d1.Record(e.h2d)); err != nil {
		return err
	}

	// Kernels, once the upload is done and slab k-2's labels are downloaded from the slot. The
	// fused kernel touches nothing but its slot's buffers, so consecutive slabs go on two streams:
	// slab k+1's blocks fill the SMs that slab k's last wave leaves idle (1024 blocks of a
	// 512x512 slab are 7.76 waves on 132 SMs). The fp32 kernels share e, s and g: one stream.
	compute := e.compute[0]
	if e.fused {
		compute = e.compute[slot]
	}
	if err := step("wait", compute.Wait(ev.h2d1, 0)); err != nil {
		return err
	}
	if prev != nil {
		if err := step("wait", compute.Wait(prev.d2h1, 0)); err != nil {
			return err
		}
	}
	if e.poison {
		for _, b := range []devBuf{e.bufs.e, e.bufs.s, e.bufs.g} {
			if b.base == 0 {
				continue // the fp16 engine has none
			}
			if err := step("poison", cu.MemsetD8Async(b.ptr(), 0xFF, b.size, compute)); err != nil { // NaN
				return err
			}
		}
		if err := step("poison", cu.MemsetD8Async(lab.ptr(), 0xEE, lab.size, compute)); err != nil {
			return err
		}
	}
	if err := step("record", ev.k0.Record(compute)); err != nil {
		return err
	}
	if e.fused {
		if err := step("fused", e.mod.Fused(compute, vol.I16 != nil, in.ptr(), lab.ptr(), w.Fused, nx, ny, nz, int32(p.z0), nzOut,
			kernels.FusedZChunk(nx, ny, nzOut, e.mod.FusedGeometry().Rows, e.sms), vol.Norm.Scale, vol.Norm.Shift, w.Classes)); err != nil {
			return err
		}
		// c1 (which the next upload into this input slot waits for), c2 and cg mark the end too.
		for _, x := range []cu.Event{ev.c1, ev.c2, ev.cg, ev.k1} {
			if err := step("record", x.Record(compute)); err != nil {
				return err
			}
		}
		return e.enqueueDownload(ev, p, plane, outHost, lab, step)
	}
	var err error
	if vol.I16 != nil {
		err = e.mod.Conv1I16(compute, in.ptr(), e.bufs.e.ptr(), nx, ny, nz, int32(p.z0-2), nzOut+4, ePlanes, vol.Norm.Scale, vol.Norm.Shift)
	} else {
		err = e.mod.Conv1F32(compute, in.ptr(), e.bufs.e.ptr(), nx, ny, nz, int32(p.z0-2), nzOut+4, ePlanes, vol.Norm.Scale, vol.Norm.Shift)
	}
	if err := step("conv1", err); err != nil {
		return err
	}
	if err := step("record", ev.c1.Record(compute)); err != nil {
		return err
	}
	if err := step("conv2", e.mod.Conv2(compute, e.bufs.e.ptr(), w.W2, w.B2, e.bufs.s.ptr(), nx, ny, ePlanes, nzOut, int32(slab))); err != nil {
		return err
	}
	if err := step("record", ev.c2.Record(compute)); err != nil {
		return err
	}
	if err := step("convg", e.mod.ConvG(compute, e.bufs.e.ptr(), w.WG, w.BG, e.bufs.g.ptr(), nx, ny, ePlanes, nzOut, int32(slab))); err != nil {
		return err
	}
	if err := step("record", ev.cg.Record(compute)); err != nil {
		return err
	}
	if err := step("gate_head", e.mod.GateHead(compute, e.bufs.s.ptr(), e.bufs.g.ptr(), lab.ptr(), nx, ny, nzOut, int32(slab), w.Classes)); err != nil {
		return err
	}
	if err := step("record", ev.k1.Record(compute)); err != nil {
		return err
	}
	return e.enqueueDownload(ev, p, plane, outHost, lab, step)
}

// enqueueDownload puts the download of slab p's labels on the d2h stream, after its kernels.
func (e *cudaEngine) enqueueDownload(ev *slabEvents, p slabPlan, plane int64, outHost unsafe.Pointer, lab devBuf, step func(string, error) error) error {
	if err := step("wait", e.d2h.Wait(ev.k1, 0)); err != nil {
		return err
	}
	if err := step("record", ev.d2h0.Record(e.d2h)); err != nil {
		return err
	}
	dst := unsafe.Add(outHost, int64(p.z0)*plane)
	if err := step("download", cu.MemcpyDtoHAsync(dst, lab.ptr(), p.labelBytes, e.d2h)); err != nil {
		return err
	}
	return step("record", ev.d2h1.Record(e.d2h))
}

// report reads slab k's event times and sends its Events.
func (e *cudaEngine) report(k int, ev *slabEvents, refOffset time.Duration, st *GPUStats, onEvent func(Event)) error {
	at := func(x cu.Event) (time.Duration, error) {
		ms, err := e.ref.Elapsed(x)
		return msDuration(ms), err
	}
	var t [9]time.Duration
	for i, x := range ev.list() {
		d, err := at(*x)
		if err != nil {
			return e.fail(fmt.Errorf("slab %d: elapsed time: %w", k, err))
		}
		t[i] = d
	}
	h2d0, h2d1, k0, c1, c2, cg, k1, d2h0, d2h1 := t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8]
	st.H2D += h2d1 - h2d0
	// Kernel time is time with a kernel running: slab k's may overlap slab k-1's (two compute
	// streams), and slabs are reported in order.
	busy := timing.BusyAdded(&st.kernelsEnd, k0, k1-k0)
	st.Kernels += busy
	st.D2H += d2h1 - d2h0
	if e.fused {
		st.Fused += busy
	} else {
		st.Conv1 += c1 - k0
		st.Conv2 += c2 - c1
		st.ConvG += cg - c2
		st.GateHead += k1 - cg
	}
	st.H2DBytes += ev.inputBytes
	st.D2HBytes += ev.labelBytes
	st.Voxels += ev.voxels
	if onEvent != nil {
		onEvent(Event{Stage: timing.StageH2D, Slab: k, Start: refOffset + h2d0, Duration: h2d1 - h2d0, Bytes: ev.inputBytes, Voxels: ev.voxels})
		onEvent(Event{Stage: timing.StageKernels, Slab: k, Start: refOffset + k0, Duration: k1 - k0, Voxels: ev.voxels})
		onEvent(Event{Stage: timing.StageD2H, Slab: k, Start: refOffset + d2h0, Duration: d2h1 - d2h0, Bytes: ev.labelBytes, Voxels: ev.voxels})
	}
	return nil
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// ensureBuffers grows the device buffers to hold slabs of slab planes of the given plane size
// and input element size; buffers already large enough are kept.
func (e *cudaEngine) ensureBuffers(slab, plane, elem int64) error {
	c := int64(kernels.Channels)
	if e.fused {
		c = 0 // e, s and g stay on chip
	}
	need := map[*devBuf]int64{
		&e.bufs.in[0]:  (slab + 2*Halo) * plane * elem,
		&e.bufs.in[1]:  (slab + 2*Halo) * plane * elem,
		&e.bufs.e:      c * int64(kernels.EPlanes(int32(slab))) * plane * 4,
		&e.bufs.s:      c * slab * plane * 4,
		&e.bufs.g:      c * slab * plane * 4,
		&e.bufs.lab[0]: slab * plane,
		&e.bufs.lab[1]: slab * plane,
	}
	grew := false
	for _, b := range e.bufs.all() {
		n := need[b]
		if b.size >= n {
			continue
		}
		if b.base != 0 {
			if err := cu.MemFree(b.base); err != nil {
				return e.fail(fmt.Errorf("free device buffer: %w", err))
			}
			*b = devBuf{}
		}
		base, err := cu.MemAlloc(n + 2*guardBytes)
		if err != nil {
			free, total, _ := cu.MemInfo()
			return fmt.Errorf("%s: allocate %d MiB of device memory (%d MiB free of %d; try a thinner slab): %w",
				e.name, (n+2*guardBytes)>>20, free>>20, total>>20, err)
		}
		*b = devBuf{base: base, size: n}
		if err := cu.MemsetD8(b.base, guardPattern, guardBytes); err != nil {
			return e.fail(fmt.Errorf("fill guard: %w", err))
		}
		if err := cu.MemsetD8(b.ptr()+cu.DevicePtr(n), guardPattern, guardBytes); err != nil {
			return e.fail(fmt.Errorf("fill guard: %w", err))
		}
		grew = true
	}
	if grew {
		// The guards were set on the legacy default stream, which the engine's non-blocking
		// streams do not wait for.
		if err := cu.Synchronize(); err != nil {
			return e.fail(fmt.Errorf("synchronize: %w", err))
		}
	}
	return nil
}

func (e *cudaEngine) freeBuffers() error {
	var first error
	for _, b := range e.bufs.all() {
		if b.base != 0 {
			if err := cu.MemFree(b.base); err != nil && first == nil {
				first = err
			}
			*b = devBuf{}
		}
	}
	return first
}

// checkGuards reads back every buffer's guard regions; an error names the first one a kernel
// or copy overwrote.
func (e *cudaEngine) checkGuards() error {
	return e.call(func() error {
		names := []string{"input 0", "input 1", "e", "s", "g", "labels 0", "labels 1"}
		guard := make([]byte, guardBytes)
		for i, b := range e.bufs.all() {
			if b.base == 0 {
				continue
			}
			for side, at := range []cu.DevicePtr{b.base, b.ptr() + cu.DevicePtr(b.size)} {
				if err := cu.MemcpyDtoH(unsafe.Pointer(&guard[0]), at, guardBytes); err != nil {
					return fmt.Errorf("read guard of %s: %w", names[i], err)
				}
				for j, v := range guard {
					if v != guardPattern {
						return fmt.Errorf("guard %s of device buffer %s overwritten at byte %d: 0x%02x", []string{"before", "after"}[side], names[i], j, v)
					}
				}
			}
		}
		return nil
	})
}
