//go:build cuda

package cuda

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gorgonia.org/cu"

	"voxpipe/engine/cuda/kernels"
	"voxpipe/engine/engine"
	"voxpipe/internal/hostmem"
	"voxpipe/model"
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
// Its files, by concern:
//
//	cuda_engine.go   the engine, its constructor, its Engine and HostAllocator entry points
//	cuda_device.go   the GPUs the driver sees
//	cuda_thread.go   the goroutine, locked to its OS thread, that owns the CUDA context (the
//	                 device's primary context): every driver call goes through it (call);
//	                 setup and release of what lives in the context
//	cuda_pinned.go   page-locked host buffers (AllocHost)
//	cuda_slabs.go    how a volume is cut into slabs
//	cuda_segment.go  one volume on the thread: every slab enqueued, then each harvested in
//	                 order (timings, planes done); sticky CUDA errors
//	cuda_streams.go  one slab on the streams: upload, kernels, download
//	cuda_buffers.go  device buffers and their guard regions
//
// The kernel set (fused or float32) is chosen when the engine opens; where sets differ:
// enqueueKernels, slabSizes and ensureBuffers.

// cudaEngine implements Engine, HostAllocator and GPUStatsReporter on one GPU.
type cudaEngine struct {
	device    int
	name      string
	model     *model.Model
	precision string // PrecisionFP16 or PrecisionFP32
	fused     bool   // precision == PrecisionFP16
	sms       int32  // multiprocessors, for the fused kernel's z-chunks
	// testSlabPlan, when its sizes sum to the volume's planes, replaces slabSizes' plan (tests that
	// compare slab schedules set it).
	testSlabPlan []int

	reqs chan func() // to the context's thread; nil func stops it

	// The thread makes the context and runs setup after NewWith has returned, while
	// the pipeline reads the first volume (the context alone takes long: docs/perf.md): ready
	// is closed when it is done, openErr says why it failed.
	ready   chan struct{}
	openErr error

	mu       sync.Mutex
	closed   bool // Close was called
	stopped  bool // the thread was told to stop
	liveHost int  // pinned buffers not yet freed (the context must outlive them)

	// Host buffers from AllocHost whose page-locking is still to do (it needs the context); the
	// queue has its own mutex: functions run on the thread never take mu (call holds mu while
	// handing a function over). ctxMade is closed once the thread has made the context (e.ctx,
	// zero if it could not).
	pins    hostmem.PinQueue
	ctxMade chan struct{}

	// Owned by the thread (opened: until ready is closed, then read-only).
	opened   []engine.OpenStep
	ctx      cu.CUContext
	mod      *kernels.Module
	weights  *kernels.DeviceWeights
	h2d      cu.Stream
	compute  [2]cu.Stream // the fp16 engine's slab k runs on compute[k%2]; the fp32 kernels on compute[0]
	d2h      cu.Stream
	ref      cu.Event
	ring     []slabEvents // one event set per slab of the volume with the most slabs so far (ensureEvents)
	bufs     deviceBuffers
	broken   error // a sticky CUDA error: the context is unusable
	last     engine.GPUStats
	lastLock sync.Mutex

	// Test hooks (set before use, read on the thread).
	poison bool // fill the device buffers with garbage before every slab
}

// New opens an engine for m on GPU device (0-based) with the default options
// (PrecisionFP16): NewWith(m, device, CUDAOptions{}).
func New(m *model.Model, device int) (engine.Engine, error) {
	return NewWith(m, device, engine.CUDAOptions{})
}

// NewWith opens an engine for m on GPU device (0-based): it checks the options and
// the GPU (compute capability >= 8.0, driver) and returns; the engine's thread then makes the
// context, loads the kernels and uploads the weights in the background. Every method waits for
// that where it needs to, and fails with its error if it failed; Ready (BackgroundOpener) waits
// for it alone. Models of up to kernels.Channels channels and kernels.MaxClasses classes are
// supported.
func NewWith(m *model.Model, device int, opt engine.CUDAOptions) (engine.Engine, error) {
	precision, err := opt.Resolved()
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
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	if device < 0 || device >= n {
		return nil, fmt.Errorf("cuda: no CUDA device %d (%d present)", device, n)
	}
	if err := kernels.CheckDevice(cu.Device(device)); err != nil {
		return nil, err
	}
	e := &cudaEngine{device: device, name: fmt.Sprintf("cuda:%d", device), model: m, reqs: make(chan func()),
		ready: make(chan struct{}), ctxMade: make(chan struct{}), precision: precision, fused: precision == engine.PrecisionFP16}
	go e.loop()
	return e, nil
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
		return fmt.Errorf("cuda: close %s: %w", e.name, err)
	}
	return nil
}

// LastStats implements GPUStatsReporter: the figures of the last successful Segment call.
func (e *cudaEngine) LastStats() engine.GPUStats {
	e.lastLock.Lock()
	defer e.lastLock.Unlock()
	return e.last
}

// Segment implements Engine.
func (e *cudaEngine) Segment(ctx context.Context, vol *model.Volume, out []uint8, opt engine.Options) error {
	start := time.Now()
	if err := engine.CheckVolume(vol, out); err != nil {
		return err
	}
	if opt.Slab < 1 {
		return fmt.Errorf("%w: slab of %d slices", engine.ErrBadVolume, opt.Slab)
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return engine.ErrEngineClosed
	}
	return e.call(func() error { return e.segment(ctx, vol, out, opt, start) })
}
