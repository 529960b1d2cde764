//go:build cuda

package hostmem

// Page-locked ("pinned") host memory through the CUDA driver, which gorgonia.org/cu does not
// wrap: cuMemHostAlloc and cuMemFreeHost, cuMemHostRegister and cuMemHostUnregister, and whether
// a range is page-locked. The CUDA engine is its user; the calls need a CUDA context current on
// the calling OS thread (cuInit has run: engine/cuda/kernels' start-up check does it).

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>

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

// pinnedLive records the page-locked ranges of this process, so IsPinned needs no driver call
// (asking the driver about pageable memory is an API error that compute-sanitizer reports).
var pinnedLive struct {
	sync.Mutex
	size map[uintptr]int
}

// CUDAError is a CUDA driver error from this package's calls.
type CUDAError struct {
	Call string
	Code int
	Name string
}

func (e *CUDAError) Error() string {
	return fmt.Sprintf("hostmem: %s: %s (%d)", e.Call, e.Name, e.Code)
}

func checkCUDA(call string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	var cname *C.char
	n := "unknown"
	if C.cuGetErrorName(r, &cname) == C.CUDA_SUCCESS && cname != nil {
		n = C.GoString(cname)
	}
	return &CUDAError{Call: call, Code: int(r), Name: n}
}

func addPinned(p unsafe.Pointer, bytes int) {
	pinnedLive.Lock()
	if pinnedLive.size == nil {
		pinnedLive.size = map[uintptr]int{}
	}
	pinnedLive.size[uintptr(p)] = bytes
	pinnedLive.Unlock()
}

func dropPinned(p unsafe.Pointer) {
	pinnedLive.Lock()
	delete(pinnedLive.size, uintptr(p))
	pinnedLive.Unlock()
}

// AllocPinned returns bytes of page-locked host memory, portable (page-locked for every CUDA
// context, so any GPU's engine copies from it at full speed). A CUDA context must be current on
// the calling OS thread. The memory is not Go memory: the garbage collector neither scans nor
// frees it.
func AllocPinned(bytes int) (unsafe.Pointer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("hostmem: pinned allocation of %d bytes", bytes)
	}
	var p unsafe.Pointer
	if err := checkCUDA("cuMemHostAlloc", C.voxpipe_host_alloc(&p, C.size_t(bytes))); err != nil {
		return nil, fmt.Errorf("%w (%d bytes)", err, bytes)
	}
	addPinned(p, bytes)
	return p, nil
}

// FreePinned releases memory from AllocPinned; a CUDA context must be current on the calling OS
// thread.
func FreePinned(p unsafe.Pointer) error {
	dropPinned(p)
	return checkCUDA("cuMemFreeHost", C.cuMemFreeHost(p))
}

// Pin page-locks n bytes of existing host memory at p (cuMemHostRegister, portable), so copies
// from it run at full speed without a new allocation. A CUDA context must be current on the
// calling OS thread. Undo with Unpin before the memory is unmapped.
func Pin(p unsafe.Pointer, bytes int) error {
	if p == nil || bytes <= 0 {
		return fmt.Errorf("hostmem: pin %d bytes at %p", bytes, p)
	}
	if err := checkCUDA("cuMemHostRegister", C.voxpipe_host_register(p, C.size_t(bytes))); err != nil {
		return fmt.Errorf("%w (%d bytes)", err, bytes)
	}
	addPinned(p, bytes)
	return nil
}

// Unpin undoes Pin; a CUDA context must be current on the calling OS thread.
func Unpin(p unsafe.Pointer) error {
	dropPinned(p)
	return checkCUDA("cuMemHostUnregister", C.cuMemHostUnregister(p))
}

// IsPinned reports whether the n bytes at p lie inside one live allocation from AllocPinned or
// range from Pin.
func IsPinned(p unsafe.Pointer, n int) bool {
	a := uintptr(p)
	pinnedLive.Lock()
	defer pinnedLive.Unlock()
	for base, size := range pinnedLive.size {
		if a >= base && a+uintptr(n) <= base+uintptr(size) {
			return true
		}
	}
	return false
}
