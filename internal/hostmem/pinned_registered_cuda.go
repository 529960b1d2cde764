//go:build cuda

package hostmem

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// AllocRegistered returns bytes of page-locked host memory made the fast way: MapTouched, then
// Pin (cuMemHostRegister): much faster than one cuMemHostAlloc, which faults and zeroes on one
// thread (docs/perf.md). A CUDA context must be current on the calling OS thread. Free it with
// FreeRegistered.
func AllocRegistered(bytes int) (unsafe.Pointer, error) {
	p, err := MapTouched(bytes)
	if err != nil {
		return nil, err
	}
	if err := Pin(p, bytes); err != nil {
		_ = UnmapTouched(p, bytes)
		return nil, err
	}
	return p, nil
}

// MapTouched returns bytes of anonymous memory from Map, its pages faulted in by all cores at
// once (cuMemHostRegister on untouched memory faults them in on one thread), ready to Pin. It
// needs no CUDA context, so it can run while a context is being made. Release it with
// UnmapTouched (after Unpin, if pinned).
func MapTouched(bytes int) (unsafe.Pointer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("hostmem: pinned allocation of %d bytes", bytes)
	}
	b, err := Map(bytes) // huge pages advised: fewer pages to fault in and to lock
	if err != nil {
		return nil, err
	}
	touchPages(b)
	return unsafe.Pointer(&b[0]), nil
}

// FreeRegistered releases memory from AllocRegistered: Unpin (a CUDA context must be current on
// the calling OS thread), then UnmapTouched (any thread).
func FreeRegistered(p unsafe.Pointer, bytes int) error {
	err := Unpin(p)
	if e := UnmapTouched(p, bytes); e != nil && err == nil {
		err = e
	}
	return err
}

// UnmapTouched releases the memory of a MapTouched or AllocRegistered allocation after Unpin; it
// needs no CUDA context, so large buffers can be unmapped off the context's thread, in parallel.
func UnmapTouched(p unsafe.Pointer, bytes int) error {
	return Unmap(unsafe.Slice((*byte)(p), bytes))
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
