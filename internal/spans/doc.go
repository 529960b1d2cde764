// Package spans adds up time spans that may overlap: the length of their union, taken span by
// span in order of their starts (BusyAdded). The CUDA engine counts its kernels' busy time with
// it, and the pipeline, the metrics and the reports their stages' totals, so it sits below all
// of them and imports nothing.
package spans
