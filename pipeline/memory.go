package pipeline

import (
	"voxpipe/engine"
	"voxpipe/internal/hostmem"
)

// inputHeadroom is the headroom of input buffers: a NIfTI header (348 or 540 bytes, then 4)
// and extensions of up to ~64 KiB, so that a gzipped file can be inflated into the buffer
// whole, its header landing in front of the voxels (hostmem.Buffer.WithPrefix).
const inputHeadroom = 64 << 10

// hostAlloc is where eng's host buffers come from: its page-locked memory when it needs it
// (engine.HostAllocator), so that readers decode straight into memory the GPU can copy from;
// otherwise memory outside the Go heap (hostmem.MapAlloc).
func hostAlloc(eng engine.Engine) hostmem.AllocFunc {
	if a, ok := eng.(engine.HostAllocator); ok {
		return func(n int) (hostmem.Block, error) { return a.AllocHost(n) }
	}
	return hostmem.MapAlloc
}

// newBuffers returns n empty buffers allocating from alloc with headroom bytes before them.
func newBuffers(alloc hostmem.AllocFunc, n, headroom int) []*hostmem.Buffer {
	bufs := make([]*hostmem.Buffer, n)
	for i := range bufs {
		bufs[i] = hostmem.NewBuffer(alloc, headroom)
	}
	return bufs
}
