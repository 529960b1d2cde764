// The single translation unit scripts/build-sm90a.sh compiles into voxpipe_sm90a.cubin (sm_90a:
// wgmma), every kernel file of this folder in a fixed order. It may include only files of this
// folder: the stamp (voxpipe_sm90a.stamp) hashes exactly those.
#include "conv_wgmma.cu"
