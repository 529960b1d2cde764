//go:build unix

package pipeline

import (
	"fmt"
	"os"
	"syscall"

	"voxpipe/segment"
)

// mmapAllocator gives pool buffers anonymous memory outside the Go heap. The pools hold the
// largest objects of a run (a 512x512x1000 float32 volume is 1 GiB): inside the heap they would
// set the garbage collector's goal to twice their size and let transient garbage grow with
// them; outside it, the heap stays small and peak memory flat across a batch.
type mmapAllocator struct{}

type mmapBuffer struct{ b []byte }

func (mmapAllocator) AllocHost(n int) (segment.HostBuffer, error) {
	b, err := syscall.Mmap(-1, 0, max(n, 1), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("pipeline: mmap %d bytes: %w", n, err)
	}
	if n >= 4<<20 && os.Getenv("VOXPIPE_HUGEPAGES") != "0" {
		// Transparent huge pages where the kernel allows them: 512 times fewer page faults
		// when the read first writes the buffer (docs/perf.md). Advice only;
		// VOXPIPE_HUGEPAGES=0 turns it off where the kernel's compaction stalls.
		_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE)
	}
	return &mmapBuffer{b[:n]}, nil
}

func (m *mmapBuffer) Bytes() []byte { return m.b }

func (m *mmapBuffer) Free() error {
	if m.b == nil {
		return nil
	}
	err := syscall.Munmap(m.b[:cap(m.b)])
	m.b = nil
	return err
}

var defaultAllocator segment.HostAllocator = mmapAllocator{}
