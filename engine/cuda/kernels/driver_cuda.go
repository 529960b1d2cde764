//go:build cuda

package pinned

/*
#include <cuda.h>
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// SetMaxDynamicSharedBytes lets fn launch with up to bytes of dynamic shared memory
// (cuFuncSetAttribute with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES): above 48 KiB a
// kernel must ask, and gorgonia.org/cu v0.9.6 does not wrap the call. A CUDA context must be
// current on the calling OS thread.
func SetMaxDynamicSharedBytes(fn cu.Function, bytes int) error {
	// cu.Function is a struct holding only the driver's CUfunction handle.
	h := *(*C.CUfunction)(unsafe.Pointer(&fn))
	if h == nil {
		return fmt.Errorf("pinned: set dynamic shared memory of a nil function")
	}
	return check("cuFuncSetAttribute", C.cuFuncSetAttribute(h, C.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, C.int(bytes)))
}
