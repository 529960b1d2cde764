package segment

// HostAllocator is implemented by engines whose transfers need page-locked host memory. The
// pipeline allocates its volume and mask buffers through it, so readers decode straight into
// memory the GPU copies from.
type HostAllocator interface {
	AllocHost(bytes int) (HostBuffer, error)
}

// HostBuffer is host memory from a HostAllocator. Bytes stays valid until Free.
type HostBuffer interface {
	Bytes() []byte
	Free() error
}

// Pinner is implemented by HostBuffers that are page-locked only on request: Bytes is usable at
// once (ordinary memory), and Pin page-locks it (idempotent; a no-op once done). The pipeline
// pins an input buffer after reading into it, so the read's own parallel writes fault its pages
// in, and registering them is all that is left. Engines accept unpinned memory (copies are then
// slower), so a buffer never pinned is still correct.
type Pinner interface {
	Pin() error
}
