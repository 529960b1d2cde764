//go:build cuda

package bench

import (
	"fmt"
	"slices"
	"testing"

	"gorgonia.org/cu"

	"voxpipe/engine/cuda/kernels"
)

// BenchmarkMMAPeak measures the mma.sync m16n8k16 ceiling (lab/bench/mma_peak.cu, a
// fatbin named by VOXPIPE_MMA_FATBIN, built by scripts/gpu-build.sh) for several warps per SM:
// the roofline the fused kernel is judged against. Each configuration's best of 3 timed
// launches (CUDA events) is logged as a TABLE line and reported as a metric; skipped without
// the variable. On the GPU machine (scripts/gpu-check.sh runs it when the fatbin is built):
//
//	VOXPIPE_MMA_FATBIN=$PWD/bin/mma-peak.fatbin bin/bench.test -test.run '^$' -test.bench MMAPeak -test.benchtime 1x
func BenchmarkMMAPeak(b *testing.B) {
	path, image := experimentFatbin(b, "VOXPIPE_MMA_FATBIN")
	onGPU(b, func(_ *kernels.Module) {
		mod := loadFatbin(b, path, image)
		defer mod.Unload()
		sms, err := cu.Device(0).Attribute(cu.MultiprocessorCount)
		if err != nil {
			b.Fatal(err)
		}
		lt := newLaunchTimer(b)
		defer lt.close()
		const iters, nacc = 4096, 8
		for range b.N {
			for _, name := range []string{"mma_peak_f32", "mma_peak_f16"} {
				fn, err := mod.Function(name)
				if err != nil {
					b.Fatal(err)
				}
				for _, warps := range []int{4, 8, 12, 16, 32} {
					blocks := sms * 2
					threads := warps * 16 // two blocks per SM
					out := alloc(b, int64(4*blocks*threads))
					ms, err := lt.times(4, nil, func(st cu.Stream) error {
						return kernels.Launch(name, fn, [3]int{blocks, 1, 1}, [3]int{threads, 1, 1}, st, new(kernels.Args).Ptr(out).I32(iters))
					})
					if err != nil {
						b.Fatal(err)
					}
					best := slices.Min(ms)
					cu.MemFree(out)
					flop := float64(blocks*threads/32) * iters * nacc * 4096
					b.Logf("TABLE|%s, %d warps per SM|%.1f TFLOP/s (%.3f ms)", name, warps, flop/best/1e9, best)
					b.ReportMetric(flop/best/1e9, fmt.Sprintf("%s-w%d-TFLOP/s", name, warps))
				}
			}
		}
	})
}
