//go:build cuda

package kernels

import (
	"os"
	"testing"

	"gorgonia.org/cu"
)

// TestMMAPeak measures the mma.sync m16n8k16 ceiling (kernels/experiments/mma_peak.cu, a fatbin
// named by VOXPIPE_MMA_FATBIN, built by scripts/gpu-build.sh) for several warps per SM: the
// roofline the fused kernel is judged against. Timing only; skipped without the variable.
func TestMMAPeak(t *testing.T) {
	path := os.Getenv("VOXPIPE_MMA_FATBIN")
	if path == "" {
		t.Skip("VOXPIPE_MMA_FATBIN not set")
	}
	image, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	onGPU(t, func(m *Module) {
		mod, err := cu.LoadFatBinary(string(image))
		if err != nil {
			t.Fatal(err)
		}
		defer mod.Unload()
		sms, err := cu.Device(0).Attribute(cu.MultiprocessorCount)
		if err != nil {
			t.Fatal(err)
		}
		st, err := cu.MakeStream(cu.NonBlocking)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Destroy()
		ev0, _ := cu.MakeEvent(cu.DefaultEvent)
		ev1, _ := cu.MakeEvent(cu.DefaultEvent)
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
				best := 1e9
				for r := 0; r < 4; r++ {
					ev0.Record(st)
					a := new(args).ptr(out).i32(iters)
					if err := launch(name, fn, [3]int{blocks, 1, 1}, [3]int{threads, 1, 1}, st, a); err != nil {
						t.Fatal(err)
					}
					ev1.Record(st)
					if err := st.Synchronize(); err != nil {
						t.Fatal(err)
					}
					ms, _ := ev0.Elapsed(ev1)
					if r > 0 && float64(ms) < best {
						best = float64(ms)
					}
				}
				cu.MemFree(out)
				flop := float64(blocks*threads/32) * iters * nacc * 4096
				t.Logf("TABLE|%s, %d warps per SM|%.1f TFLOP/s (%.3f ms)", name, warps, flop/best/1e9, best)
			}
		}
	})
}
