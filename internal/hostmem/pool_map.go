package hostmem

// MapAlloc allocates a Block with Map: anonymous memory outside the Go heap, with huge pages
// advised (far fewer page faults when a buffer is first written). Pools of buffers hold a
// process's largest objects (a 512x512x1000 float32 volume is 1 GiB): inside the heap they
// would set the garbage collector's goal to twice their size and let transient garbage grow
// with them; outside it, the heap stays small and peak memory flat. Without mmap (not unix)
// Map falls back to the Go heap.
func MapAlloc(n int) (Block, error) {
	b, err := Map(n)
	if err != nil {
		return nil, err
	}
	return &mapped{b}, nil
}

type mapped struct{ b []byte }

func (m *mapped) Bytes() []byte { return m.b }

func (m *mapped) Free() error {
	if m.b == nil {
		return nil
	}
	err := Unmap(m.b)
	m.b = nil
	return err
}
