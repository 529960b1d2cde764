package engine

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
