//go:build cuda

package kernels

import (
	"slices"
	"testing"

	"gorgonia.org/cu"
)

// TestMMAPeak measures the mma.sync m16n8k16 ceiling (kernels/experiments/mma_peak.cu, a fatbin
// named by VOXPIPE_MMA_FATBIN, built by scripts/gpu-build.sh) for several warps per SM: the
// roofline the fused kernel is judged against. Timing only; skipped without the variable.
func TestMMAPeak(t *testing.T) {
	path, image := experimentFatbin(t, "VOXPIPE_MMA_FATBIN")
	onGPU(t, func(m *Module) {
		mod := loadFatbin(t, path, image)
		defer mod.Unload()
		sms, err := cu.Device(0).Attribute(cu.MultiprocessorCount)
		if err != nil {
			t.Fatal(err)
		}
		lt := newLaunchTimer(t)
		defer lt.close()
		const iters, nacc = 4096, 8
		for _, name := range []string{"mma_peak_f32", "mma_peak_f16"} {
			fn, err := mod.Function(name)
			if err != nil {
				t.Fatal(err)
			}
			for _, warps := range []int{4, 8, 12, 16, 32} {
				blocks := sms * 2
				threads := warps * 16 // two blocks per SM
				out := alloc(t, int64(4*blocks*threads))
				ms, err := lt.times(4, nil, func(st cu.Stream) error {
					return launch(name, fn, [3]int{blocks, 1, 1}, [3]int{threads, 1, 1}, st, new(args).ptr(out).i32(iters))
				})
				if err != nil {
					t.Fatal(err)
				}
				best := slices.Min(ms)
				cu.MemFree(out)
				flop := float64(blocks*threads/32) * iters * nacc * 4096
				t.Logf("TABLE|%s, %d warps per SM|%.1f TFLOP/s (%.3f ms)", name, warps, flop/best/1e9, best)
			}
		}
	})
}
