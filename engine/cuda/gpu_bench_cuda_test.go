//go:build cuda

package cuda

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"voxpipe/engine/cpu"
	"voxpipe/engine/engine"
	"voxpipe/internal/enginetest"
	"voxpipe/model"
)

// TestCUDABenchmark512 times one 512x512x1000 int16 volume in pinned memory for both
// precisions, per slab size: median of several runs after a warm-up. Set VOXPIPE_GPU_BENCH=0 to
// skip. Also checks that the masks do not depend on the slab size, that the fp16 mask agrees with
// the fp32 one on at least 99.9% of the voxels, and that fp32 matches the CPU engine on a few slabs.
func TestCUDABenchmark512(t *testing.T) {
	if os.Getenv("VOXPIPE_GPU_BENCH") == "0" || testing.Short() {
		t.Skip("benchmark skipped")
	}
	const nx, ny, nz, runs = 512, 512, 1000, 5
	m := model.RandomModel(16, 4, 51)
	t0 := time.Now()
	vol := enginetest.SmoothVolume(nx, ny, nz, 52)
	t.Logf("volume generated in %v", time.Since(t0))
	masks := map[string][]uint8{}
	for _, b := range []struct {
		precision string
		slabs     []int
	}{
		{engine.PrecisionFP16, []int{32, 64, 128, 256}},
		{engine.PrecisionFP32, []int{64}},
	} {
		eng := newTestCUDAEngine(t, m, b.precision)
		pvol, pout, free := pinnedCopy(t, eng, vol)
		var first []uint8
		for _, slab := range b.slabs {
			name := fmt.Sprintf("bench %s slab %d", b.precision, slab)
			benchSlab(t, eng, m, pvol, pout, name, slab, runs)
			if first == nil {
				first = slices.Clone(pout)
			} else if i := firstDiff(first, pout); i >= 0 {
				t.Errorf("%s: mask differs from slab %d's at voxel %d", name, b.slabs[0], i)
			}
		}
		if b.precision == engine.PrecisionFP16 {
			benchPageable(t, eng, vol, first)
		}
		masks[b.precision] = first
		free()
		if err := eng.Close(); err != nil {
			t.Fatal(err)
		}
	}
	diff, agree, dice, perClass := maskAgreement(masks[engine.PrecisionFP16], masks[engine.PrecisionFP32], m.Classes)
	table(t, "bench fp16 vs fp32 (512x512x1000)", "%d of %d differ: %.4f%% agree, mean Dice %.5f, per class %.5f", diff, nx*ny*nz, 100*agree, dice, perClass)
	if agree < 0.999 {
		t.Errorf("fp16 vs fp32 agreement %.5f < 0.999", agree)
	}

	benchAgainstCPU(t, m, vol, masks)
}

// benchSlab times runs Segment calls of eng at one slab size, after a warm-up, and reports the
// medians: kernels (per group at fp32; TFLOP/s at fp16), copy rates, pinned-to-pinned time.
func benchSlab(t *testing.T, eng *cudaEngine, m *model.Model, pvol *model.Volume, pout []uint8, name string, slab, runs int) {
	t.Helper()
	voxels := float64(pvol.NX * pvol.NY * pvol.NZ)
	var kern, h2d, d2h, total, wall, groups []time.Duration
	var st engine.GPUStats
	for r := 0; r < runs+1; r++ {
		start := time.Now()
		if err := eng.Segment(context.Background(), pvol, pout, engine.Options{Slab: slab}); err != nil {
			t.Fatal(err)
		}
		w := time.Since(start)
		st = eng.LastStats()
		if r == 0 {
			continue // warm-up: buffer allocation, first launches
		}
		wall = append(wall, w)
		kern, h2d, d2h, total = append(kern, st.Kernels), append(h2d, st.H2D), append(d2h, st.D2H), append(total, st.Total)
		groups = append(groups, st.Conv1, st.Conv2, st.ConvG, st.GateHead)
	}
	if !st.Pinned {
		t.Error("benchmark buffers not pinned")
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	gbps := func(b int64, d time.Duration) float64 { return float64(b) / d.Seconds() / 1e9 }
	if eng.precision == engine.PrecisionFP32 {
		g := func(i int) float64 { // median of kernel group i over the runs
			var v []time.Duration
			for r := i; r < len(groups); r += 4 {
				v = append(v, groups[r])
			}
			return ms(median(v))
		}
		table(t, name+" kernels ms", "%.1f (conv1 %.1f, conv2 %.1f, convg %.1f, gate_head %.1f)", ms(median(kern)), g(0), g(1), g(2), g(3))
	} else {
		table(t, name+" kernels ms", "%.2f (fused kernel; %.1f TFLOP/s)", ms(median(kern)),
			model.FLOPsPerVoxel(m.Channels, m.Classes)*voxels/median(kern).Seconds()/1e12)
	}
	table(t, name+" h2d / d2h GB/s", "%.1f / %.1f (%.0f MB in, %.0f MB out)",
		gbps(st.H2DBytes, median(h2d)), gbps(st.D2HBytes, median(d2h)), float64(st.H2DBytes)/1e6, float64(st.D2HBytes)/1e6)
	table(t, name+" pinned-to-pinned ms", "%.1f wall, %.1f GPU (%.0f Mvox/s)",
		ms(median(wall)), ms(median(total)), voxels/median(wall).Seconds()/1e6)
}

// benchPageable runs eng once on vol in pageable (Go) memory, for comparison, and checks its
// mask against first.
func benchPageable(t *testing.T, eng *cudaEngine, vol *model.Volume, first []uint8) {
	t.Helper()
	out := make([]uint8, vol.NX*vol.NY*vol.NZ)
	start := time.Now()
	if err := eng.Segment(context.Background(), vol, out, engine.Options{Slab: 64}); err != nil {
		t.Fatal(err)
	}
	w := time.Since(start)
	st := eng.LastStats()
	table(t, "bench fp16 slab 64 pageable memory", "%.1f ms wall, h2d %.1f GB/s, d2h %.1f GB/s (pinned %v)",
		float64(w)/1e6, float64(st.H2DBytes)/st.H2D.Seconds()/1e9, float64(st.D2HBytes)/st.D2H.Seconds()/1e9, st.Pinned)
	if i := firstDiff(first, out); i >= 0 {
		t.Errorf("pageable run: mask differs at voxel %d", i)
	}
}

// benchAgainstCPU compares each precision's mask of vol with the CPU engine's on a few slabs:
// the borders and the middle.
func benchAgainstCPU(t *testing.T, m *model.Model, vol *model.Volume, masks map[string][]uint8) {
	t.Helper()
	cpu := cpu.New(m, 0)
	plane := vol.NX * vol.NY
	for _, z := range [][2]int{{0, 2}, {499, 501}, {998, 1000}} {
		want := make([]uint8, (z[1]-z[0])*plane)
		if err := cpu.SegmentSlab(vol, z[0], z[1], want); err != nil {
			t.Fatal(err)
		}
		for _, precision := range precisions {
			got := masks[precision][z[0]*plane : z[1]*plane]
			diff := 0
			for i := range want {
				if want[i] != got[i] {
					diff++
				}
			}
			agree := 1 - float64(diff)/float64(len(want))
			table(t, fmt.Sprintf("bench %s vs cpu z %d..%d", precision, z[0], z[1]), "%d of %d differ (%.5f%% agree)", diff, len(want), 100*agree)
			if min := map[string]float64{engine.PrecisionFP16: 0.999, engine.PrecisionFP32: 0.9999}[precision]; agree < min {
				t.Errorf("%s z %d..%d: agreement %.6f < %g", precision, z[0], z[1], agree, min)
			}
		}
	}
}
