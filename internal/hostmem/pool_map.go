//go:build unix

package pipeline

import (
	"fmt"
	"voxpipe/engine"

	"voxpipe/internal/hostmem"
)

// mmapAllocator gives pool buffers anonymous memory outside the Go heap (hostmem.Map, with
// huge pages advised: far fewer page faults when the read first writes a buffer). The pools hold the
// largest objects of a run (a 512x512x1000 float32 volume is 1 GiB): inside the heap they would
// set the garbage collector's goal to twice their size and let transient garbage grow with
// them; outside it, the heap stays small and peak memory flat across a batch.
type mmapAllocator struct{}

type mmapBuffer struct{ b []byte }

func (mmapAllocator) AllocHost(n int) (engine.HostBuffer, error) {
	b, err := hostmem.Map(n)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	return &mmapBuffer{b}, nil
}

func (m *mmapBuffer) Bytes() []byte { return m.b }

func (m *mmapBuffer) Free() error {
	if m.b == nil {
		return nil
	}
	err := hostmem.Unmap(m.b)
	m.b = nil
	return err
}

var defaultAllocator engine.HostAllocator = mmapAllocator{}
