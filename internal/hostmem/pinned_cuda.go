//go:build cuda

// Package pinned is voxpipe's cgo shim for what gorgonia.org/cu does not wrap: page-locked host
// memory (cuMemHostAlloc, cuMemFreeHost), asking whether a pointer is page-locked, and a clear
// message when the CUDA driver cannot start.
//
// Importing it runs a C constructor, before any Go package initialises, that calls cuInit and,
// when it fails, prints why (no GPU, no driver, driver too old) and what to do: gorgonia.org/cu's
// own init ends the process in that case with a terse message, and nothing in Go runs early
// enough to stop it.
package pinned

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <stdio.h>

__attribute__((constructor)) static void voxpipe_cuda_preflight(void) {
	CUresult r = cuInit(0);
	if (r == CUDA_SUCCESS) return;
	const char *name = "unknown", *msg = "unknown";
	cuGetErrorName(r, &name);
	cuGetErrorString(r, &msg);
	fprintf(stderr,
		"voxpipe: the CUDA driver cannot start: cuInit: %s (%s).\n"
		"voxpipe: this binary was built with -tags cuda and needs an NVIDIA GPU of compute capability >= 8.0\n"
		"voxpipe: with a driver for CUDA >= 11.8; gorgonia.org/cu ends the process now. Use the default\n"
		"voxpipe: (CPU-only) build of voxpipe on this machine.\n", name, msg);
}

static CUresult voxpipe_host_alloc(void **p, size_t n) {
	return cuMemHostAlloc(p, n, CU_MEMHOSTALLOC_PORTABLE);
}

static CUresult voxpipe_host_register(void *p, size_t n) {
	return cuMemHostRegister(p, n, CU_MEMHOSTREGISTER_PORTABLE);
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// live records the allocations of this process, so IsPinned needs no driver call (asking the
// driver about pageable memory is an API error that compute-sanitizer reports).
var live struct {
	sync.Mutex
	size map[uintptr]int
}

// Error is a CUDA driver error from this package's calls.
type Error struct {
	Call string
	Code int
	Name string
}

func (e *Error) Error() string { return fmt.Sprintf("pinned: %s: %s (%d)", e.Call, e.Name, e.Code) }

func check(call string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	var cname *C.char
	n := "unknown"
	if C.cuGetErrorName(r, &cname) == C.CUDA_SUCCESS && cname != nil {
		n = C.GoString(cname)
	}
	return &Error{Call: call, Code: int(r), Name: n}
}

// Alloc returns bytes of page-locked host memory, portable (page-locked for every CUDA context,
// so any GPU's engine copies from it at full speed). A CUDA context must be current on the calling
// OS thread. The memory is not Go memory: the garbage collector neither scans nor frees it.
func Alloc(bytes int) (unsafe.Pointer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("pinned: allocation of %d bytes", bytes)
	}
	var p unsafe.Pointer
	if err := check("cuMemHostAlloc", C.voxpipe_host_alloc(&p, C.size_t(bytes))); err != nil {
		return nil, fmt.Errorf("%w (%d bytes)", err, bytes)
	}
	live.Lock()
	if live.size == nil {
		live.size = map[uintptr]int{}
	}
	live.size[uintptr(p)] = bytes
	live.Unlock()
	return p, nil
}

// Free releases memory from Alloc; a CUDA context must be current on the calling OS thread.
func Free(p unsafe.Pointer) error {
	live.Lock()
	delete(live.size, uintptr(p))
	live.Unlock()
	return check("cuMemFreeHost", C.cuMemFreeHost(p))
}

// Register page-locks n bytes of existing host memory at p (cuMemHostRegister, portable), so
// copies from it run at full speed without a new allocation. A CUDA context must be current on the
// calling OS thread. Undo with Unregister before the memory is unmapped.
func Register(p unsafe.Pointer, bytes int) error {
	if p == nil || bytes <= 0 {
		return fmt.Errorf("pinned: register %d bytes at %p", bytes, p)
	}
	if err := check("cuMemHostRegister", C.voxpipe_host_register(p, C.size_t(bytes))); err != nil {
		return fmt.Errorf("%w (%d bytes)", err, bytes)
	}
	live.Lock()
	if live.size == nil {
		live.size = map[uintptr]int{}
	}
	live.size[uintptr(p)] = bytes
	live.Unlock()
	return nil
}

// Unregister undoes Register; a CUDA context must be current on the calling OS thread.
func Unregister(p unsafe.Pointer) error {
	live.Lock()
	delete(live.size, uintptr(p))
	live.Unlock()
	return check("cuMemHostUnregister", C.cuMemHostUnregister(p))
}

// IsPinned reports whether the n bytes at p lie inside one live allocation from Alloc or range
// from Register.
func IsPinned(p unsafe.Pointer, n int) bool {
	a := uintptr(p)
	live.Lock()
	defer live.Unlock()
	for base, size := range live.size {
		if a >= base && a+uintptr(n) <= base+uintptr(size) {
			return true
		}
	}
	return false
}
