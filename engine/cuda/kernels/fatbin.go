// Package kernels holds voxpipe's CUDA kernels: the C sources (*.cu, one kernel family per file,
// each with its formula), the fatbin nvcc makes of them, embedded here, and (behind the cuda build
// tag) the module loader and one launch wrapper per kernel.
//
// Regenerate the fatbin after editing a kernel (needs nvcc 11.8, scripts/install-cuda.sh):
//
//	go generate ./engine/cuda/kernels
//
// scripts/check-fatbin.sh fails when the committed fatbin is stale.
package kernels

import _ "embed"

//go:generate bash ../../../scripts/build-fatbin.sh

// Fatbin is voxpipe.fatbin: SASS for sm_80, 86, 89, 90 and PTX for compute_80. It is
// only bytes here; loading it needs the cuda build (LoadModule).
//
//go:embed voxpipe.fatbin
var Fatbin []byte
