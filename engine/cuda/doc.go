// Package cuda is the GPU engine: the network on voxpipe's own CUDA kernels (engine/cuda/kernels),
// one context per GPU owned by one OS-locked goroutine, volumes streamed in z-slabs through page-locked host memory with copies and kernels overlapped. It is
// built with the cuda tag only (gorgonia.org/cu exits the process at start-up on a machine
// without a GPU); without it, New fails with engine.ErrNoCUDA and Compiled is false.
package cuda
