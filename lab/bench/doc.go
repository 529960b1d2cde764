// Package bench holds kernel micro-benchmarks and timing experiments that serve measurements
// only, run on the GPU machine (cuda build tag; lab/README.md): the mma.sync ceiling
// (mma_peak.cu), conv2/convg variants (conv_variants.cu) and builds of the fused kernel with
// other compile-time settings, each against engine/cuda/kernels. Nothing here is part of
// voxpipe's binary.
package bench
