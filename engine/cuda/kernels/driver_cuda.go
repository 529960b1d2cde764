//go:build cuda

package kernels

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <stdio.h>

// Runs before any Go package initialises: when cuInit fails, say why (no GPU, no driver, driver
// too old) and what to do, since gorgonia.org/cu's own init then ends the process with a terse
// message and nothing in Go runs early enough to stop it.
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
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// What gorgonia.org/cu does not wrap: the start-up message above, and a function attribute.

// SetMaxDynamicSharedBytes lets fn launch with up to bytes of dynamic shared memory
// (cuFuncSetAttribute with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES): above 48 KiB a
// kernel must ask, and gorgonia.org/cu v0.9.6 does not wrap the call. A CUDA context must be
// current on the calling OS thread.
func SetMaxDynamicSharedBytes(fn cu.Function, bytes int) error {
	// cu.Function is a struct holding only the driver's CUfunction handle.
	h := *(*C.CUfunction)(unsafe.Pointer(&fn))
	if h == nil {
		return fmt.Errorf("kernels: set dynamic shared memory of a nil function")
	}
	if r := C.cuFuncSetAttribute(h, C.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, C.int(bytes)); r != C.CUDA_SUCCESS {
		var cname *C.char
		name := "unknown"
		if C.cuGetErrorName(r, &cname) == C.CUDA_SUCCESS && cname != nil {
			name = C.GoString(cname)
		}
		return fmt.Errorf("kernels: cuFuncSetAttribute: %s (%d)", name, int(r))
	}
	return nil
}
