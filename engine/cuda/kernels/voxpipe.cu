// The single translation unit nvcc compiles into voxpipe.fatbin (one module, one constant bank):
// every kernel file, in a fixed order. Regenerate with `go generate ./kernels`.
#include "conv1.cu"
#include "conv_cc.cu"
#include "gate_head.cu"
#include "fused.cu"
