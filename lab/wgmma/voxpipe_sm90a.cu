// The single translation unit scripts/build-sm90a.sh compiles into voxpipe_sm90a.cubin (sm_90a):
// every kernel of the fatbin (engine/cuda/kernels/voxpipe.cu), then the wgmma convolutions of
// this folder. It may include only files of this folder and of engine/cuda/kernels/: the stamp
// (voxpipe_sm90a.stamp) hashes exactly those.
#include "../../engine/cuda/kernels/voxpipe.cu"
#include "conv_wgmma.cu"
