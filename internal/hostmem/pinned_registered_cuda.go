//go:build cuda

package pinned

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"voxpipe/internal/hostmem"
)

// AllocRegistered returns bytes of page-locked host memory made the fast way: MapTouched, then
// page-locked with cuMemHostRegister: much faster than one cuMemHostAlloc, which faults and
// zeroes on one thread (docs/perf.md). A CUDA context must be current
// on the calling OS thread. Free it with FreeRegistered.
func AllocRegistered(bytes int) (unsafe.Pointer, error) {
	p, err := MapTouched(bytes)
	if err != nil {
		return nil, err
	}
	if err := Register(p, bytes); err != nil {
		_ = Unmap(p, bytes)
		return nil, err
	}
	return p, nil
}

// MapTouched returns bytes of anonymous memory from mmap, its pages faulted in by all cores at
// once (cuMemHostRegister on untouched memory faults them in on one thread), ready to Register.
// It needs no CUDA context, so it can run while a context is being made. Release it with Unmap
// (after Unregister, if registered).
func MapTouched(bytes int) (unsafe.Pointer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("pinned: allocation of %d bytes", bytes)
	}
	b, err := hostmem.Map(bytes) // huge pages advised: fewer pages to fault in and to lock
	if err != nil {
		return nil, fmt.Errorf("pinned: %w", err)
	}
	touchPages(b)
	return unsafe.Pointer(&b[0]), nil
}

// FreeRegistered releases memory from AllocRegistered: Unregister (a CUDA context must be current
// on the calling OS thread), then Unmap (any thread).
func FreeRegistered(p unsafe.Pointer, bytes int) error {
	err := Unregister(p)
	if e := Unmap(p, bytes); e != nil && err == nil {
		err = e
	}
	return err
}

// Unmap releases the memory of an AllocRegistered allocation after Unregister; it needs no
// CUDA context, so large buffers can be unmapped off the context's thread, in parallel.
func Unmap(p unsafe.Pointer, bytes int) error {
	if err := hostmem.Unmap(unsafe.Slice((*byte)(p), bytes)); err != nil {
		return fmt.Errorf("pinned: %w", err)
	}
	return nil
}

// touchPages writes one byte per page of b from every core, so the kernel allocates (and zeroes)
// the pages in parallel; cuMemHostRegister on untouched memory faults them in on one thread.
func touchPages(b []byte) {
	const page = 4096
	workers := min(runtime.GOMAXPROCS(0), max(1, len(b)>>24)) // at least 16 MiB each
	chunk := (len(b)/workers + page - 1) &^ (page - 1)
	var wg sync.WaitGroup
	for lo := 0; lo < len(b); lo += chunk {
		wg.Add(1)
		go func(part []byte) {
			defer wg.Done()
			for i := 0; i < len(part); i += page {
				part[i] = 0
			}
		}(b[lo:min(lo+chunk, len(b))])
	}
	wg.Wait()
}
