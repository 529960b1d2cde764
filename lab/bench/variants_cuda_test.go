//go:build cuda

package bench

import (
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"gorgonia.org/cu"

	"voxpipe/engine/cuda/kernels"
)

// TestConvVariants times the conv2/convg variants of lab/bench/conv_variants.cu (a
// fatbin named by VOXPIPE_EXPERIMENT_FATBIN, built by scripts/gpu-build.sh) on one 512x512 slab
// of 64 planes, checks each against the committed kernels bit for bit, and measures the FMA
// ceiling. Skipped without the variable.
func TestConvVariants(t *testing.T) {
	path, image := experimentFatbin(t, "VOXPIPE_EXPERIMENT_FATBIN")
	onGPU(t, func(m *kernels.Module) {
		exp := loadFatbin(t, path, image)
		defer exp.Unload()
		rng := rand.New(rand.NewPCG(7, 8))
		dw, err := m.SetWeights(randWeights(rng, 16, 4))
		if err != nil {
			t.Fatal(err)
		}
		defer dw.Free()

		const nx, ny, nzOut = 512, 512, 64
		ePlanes := kernels.EPlanes(nzOut) + 8
		plane := nx * ny
		e := randomE(t, rng, kernels.Channels*int(ePlanes)*plane)
		defer cu.MemFree(e)
		n := kernels.Channels * nzOut * plane
		out := alloc(t, int64(4*n))
		defer cu.MemFree(out)
		lt := newLaunchTimer(t)
		defer lt.close()

		ref := map[string][]float32{}
		got := make([]float32, n)
		timeIt := func(fn cu.Function, ty int, tz int32, w, b cu.DevicePtr) (float64, error) {
			a := new(kernels.Args).Ptr(e).Ptr(w).Ptr(b).Ptr(out).I32(nx).I32(ny).I32(ePlanes).I32(nzOut).I32(nzOut)
			grid := [3]int{ceilDiv(nx, kernels.TileX), ceilDiv(ny, int32(ty)), ceilDiv(nzOut, tz)}
			runs := 6 // a warm-up, then the timed runs
			if os.Getenv("VOXPIPE_VARIANT_RUNS") == "1" {
				runs = 1 // under ncu: one launch of each kernel
			}
			ms, err := lt.times(runs, nil, func(st cu.Stream) error {
				return kernels.Launch("variant", fn, grid, [3]int{kernels.TileX, ty, 1}, st, a)
			})
			if err != nil {
				return 0, err
			}
			return medianMS(ms), nil
		}
		scale := 1000.0 / nzOut
		for _, v := range []struct {
			name   string
			ty, tz int
		}{{"z4y8", 8, 4}, {"z4y8a", 8, 4}, {"z4y4a5", 4, 4}, {"z8y4a", 4, 8}, {"z2y8a", 8, 2}} {
			for _, conv := range []string{"conv2", "convg"} {
				fn, err := exp.Function(conv + "_" + v.name)
				if err != nil {
					t.Errorf("%s_%s: %v", conv, v.name, err)
					continue
				}
				w, b := dw.W2, dw.B2
				if conv == "convg" {
					w, b = dw.WG, dw.BG
				}
				ms, err := timeIt(fn, v.ty, int32(v.tz), w, b)
				if err != nil {
					t.Errorf("%s_%s: %v", conv, v.name, err)
					continue
				}
				get(t, got, out)
				same := "bit-identical to z4y8"
				if r, ok := ref[conv]; !ok {
					ref[conv] = slices.Clone(got)
				} else if !slices.Equal(r, got) {
					same = "DIFFERS from z4y8"
					t.Errorf("%s_%s differs from z4y8", conv, v.name)
				}
				fmas := float64(nzOut*plane) * 27 * 16 * 16
				t.Logf("TABLE|variant %s_%s|%.2f ms per 64-plane slab = %.0f ms per 1000 planes, %.1f TFLOP/s, %s",
					conv, v.name, ms, ms*scale, 2*fmas/ms/1e9, same)
			}
		}

		ffmaPeak(t, exp, lt)
	})
}

// randomE uploads n random e values (relu of a normal variate) to a new device buffer.
func randomE(t *testing.T, rng *rand.Rand, n int) cu.DevicePtr {
	t.Helper()
	ev := make([]float32, n)
	for i := range ev {
		ev[i] = float32(math.Max(rng.NormFloat64(), 0))
	}
	e := alloc(t, int64(4*len(ev)))
	put(t, e, ev)
	return e
}

// ffmaPeak times the experiment module's ffma_peak kernel: the FMA ceiling the variants are
// judged against.
func ffmaPeak(t *testing.T, exp cu.Module, lt *launchTimer) {
	t.Helper()
	fn, err := exp.Function("ffma_peak")
	if err != nil {
		t.Fatal(err)
	}
	const blocks, threads, rounds = 132 * 16, 256, 4000
	buf := alloc(t, blocks*threads*4)
	defer cu.MemFree(buf)
	ms, err := lt.times(4, nil, func(st cu.Stream) error {
		return kernels.Launch("ffma_peak", fn, [3]int{blocks, 1, 1}, [3]int{threads, 1, 1}, st, new(kernels.Args).Ptr(buf).I32(rounds))
	})
	if err != nil {
		t.Fatal(err)
	}
	med := medianMS(ms)
	flops := 2.0 * 8 * 16 * rounds * blocks * threads
	t.Logf("TABLE|ffma peak|%.1f TFLOP/s (%.2f ms)", flops/med/1e9, med)
}
