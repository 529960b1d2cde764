//go:build cuda

package cuda

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"voxpipe/engine/cpu"
	"voxpipe/engine/engine"
	"voxpipe/fixtures"
	"voxpipe/internal/enginetest"
	"voxpipe/model"
	"voxpipe/phantom"
)

func TestCUDAMatchesCPU(t *testing.T) {
	cases := []modelCases{
		{model.RandomModel(16, 4, 11), []volCase{
			{37, 53, 29, true, []int{1, 7, 29, 64}},
			{37, 53, 29, false, []int{3, 8, 29}},
			{64, 64, 17, true, []int{5, 16}},
		}},
		// Fewer channels and classes: the kernels zero-pad to 16 channels.
		{model.RandomModel(6, 3, 12), []volCase{{33, 9, 6, false, []int{1, 4}}}},
		{model.RandomModel(16, 16, 13), []volCase{{5, 70, 3, true, []int{2}}}},
	}
	for ci, c := range cases {
		eng := newTestCUDAEngine(t, c.model, engine.PrecisionFP32)
		eng.poison = true
		cpu := cpu.New(c.model, 0)
		for vi, v := range c.vols {
			vol := enginetest.RandomVolume(v.nx, v.ny, v.nz, uint64(100*ci+vi), v.int16)
			want := enginetest.SegmentWhole(t, cpu, vol, 5)
			got := make([]uint8, len(want))
			for _, slab := range v.slabs {
				name := fmt.Sprintf("C%dK%d_%dx%dx%d_int16=%v_slab%d", c.model.Channels, c.model.Classes, v.nx, v.ny, v.nz, v.int16, slab)
				t.Run(name, func(t *testing.T) {
					gpuSegment(t, eng, vol, got, slab)
					diff, ties := compareWithCPU(t, c.model, vol, got, want, nil)
					table(t, "match "+name, "%d differ (%d near-ties) of %d", diff, ties, len(got))
				})
			}
		}
	}
}

// TestCUDAFP16MatchesFP32 runs both precisions on random-weight random volumes of awkward sizes
// and slab cuts: the fp16 masks must not depend on the slab, and must agree with fp32's on at
// least 99.9% of the voxels (volumes of 10000 voxels or more; smaller ones: every difference a
// near-tie).
func TestCUDAFP16MatchesFP32(t *testing.T) {
	cases := []modelCases{
		{model.RandomModel(16, 4, 11), []volCase{
			{37, 53, 29, true, []int{1, 7, 29, 64}},
			{37, 53, 29, false, []int{3, 8, 29}},
			{64, 64, 17, true, []int{5, 16}},
			{97, 41, 1, true, []int{1, 4}}, // one plane
			{1, 300, 70, false, []int{9}},  // one voxel wide
			{250, 1, 40, true, []int{13}},  // one row
			{200, 150, 40, true, []int{40, 11}},
		}},
		{model.RandomModel(6, 3, 12), []volCase{{33, 9, 6, false, []int{1, 4}}, {80, 90, 30, true, []int{30}}}},
		{model.RandomModel(16, 16, 13), []volCase{{5, 70, 3, true, []int{2}}, {60, 50, 20, false, []int{7}}}},
		{model.RandomModel(16, 9, 14), []volCase{{70, 33, 25, true, []int{6}}}},
	}
	var diffs, voxels int
	for ci, c := range cases {
		e16 := newTestCUDAEngine(t, c.model, engine.PrecisionFP16)
		e32 := newTestCUDAEngine(t, c.model, engine.PrecisionFP32)
		e16.poison, e32.poison = true, true
		for vi, v := range c.vols {
			volName := fmt.Sprintf("C%dK%d_%dx%dx%d_int16=%v", c.model.Channels, c.model.Classes, v.nx, v.ny, v.nz, v.int16)
			t.Run(volName, func(t *testing.T) {
				vol := enginetest.RandomVolume(v.nx, v.ny, v.nz, uint64(300+100*ci+vi), v.int16)
				want := make([]uint8, v.nx*v.ny*v.nz)
				gpuSegment(t, e32, vol, want, v.nz)
				var first []uint8
				for _, slab := range v.slabs {
					got := make([]uint8, len(want))
					gpuSegment(t, e16, vol, got, slab)
					if first != nil {
						if i := firstDiff(first, got); i >= 0 {
							t.Errorf("slab %d: mask differs from slab %d's at voxel %d", slab, v.slabs[0], i)
						}
						continue
					}
					minAgree := 0.999
					if len(got) < 10000 {
						minAgree = 0
					}
					diff, agree, dice := compareFP16(t, c.model, vol, got, want, minAgree)
					diffs, voxels = diffs+diff, voxels+len(got)
					table(t, "fp16 vs fp32 "+volName, "%d of %d differ (%.4f%% agree, mean Dice %.5f)", diff, len(got), 100*agree, dice)
					first = got
				}
			})
		}
	}
	if voxels > 0 {
		table(t, "fp16 vs fp32 random volumes, all", "%d of %d differ (%.4f%% agree)", diffs, voxels, 100*(1-float64(diffs)/float64(voxels)))
	}
}

// TestCUDAFP16Phantoms compares the precisions on generated phantoms with the default (trained)
// model and with a random one: agreement at least 99.9%, and the Dice of each against the truth.
func TestCUDAFP16Phantoms(t *testing.T) {
	trained, err := model.ParseModel(fixtures.DefaultModel)
	if err != nil {
		t.Fatal(err)
	}
	for _, mc := range []struct {
		name  string
		model *model.Model
	}{{"default", trained}, {"random", model.RandomModel(16, 4, 61)}} {
		e16 := newTestCUDAEngine(t, mc.model, engine.PrecisionFP16)
		e32 := newTestCUDAEngine(t, mc.model, engine.PrecisionFP32)
		for _, p := range []phantom.Params{{NX: 96, NY: 96, NZ: 64, Seed: 1}, {NX: 181, NY: 217, NZ: 90, Seed: 2}, {NX: 256, NY: 256, NZ: 160, Seed: 3}} {
			ph, vol := enginetest.PhantomVolume(t, p)
			got, want := make([]uint8, len(ph.Image)), make([]uint8, len(ph.Image))
			gpuSegment(t, e16, vol, got, 32)
			gpuSegment(t, e32, vol, want, 32)
			name := fmt.Sprintf("phantom %dx%dx%d seed %d, %s model", p.NX, p.NY, p.NZ, p.Seed, mc.name)
			diff, agree, dice := compareFP16(t, mc.model, nil, got, want, 0.999)
			table(t, "fp16 vs fp32 "+name, "%d of %d differ (%.4f%% agree, mean Dice %.5f)", diff, len(got), 100*agree, dice)
			if mc.name == "default" {
				_, _, d16, _ := maskAgreement(got, ph.Truth, mc.model.Classes)
				_, _, d32, _ := maskAgreement(want, ph.Truth, mc.model.Classes)
				table(t, "vs truth "+name, "mean Dice fp16 %.4f, fp32 %.4f", d16, d32)
			}
		}
	}
}

// TestCUDASlabPlans times the fp16 engine on the 512x512x1000 volume under other slab schedules
// (VOXPIPE_SLAB_PLANS="64,128,...;64,192,...": each list sums to 1000) against the engine's own
// plan at --slab 64: kernel time (union of the kernels' intervals) and pinned-to-pinned wall,
// medians of 5 runs after a warm-up, plans interleaved run by run. Masks must not change.
// Skipped without the variable.
func TestCUDASlabPlans(t *testing.T) {
	spec := os.Getenv("VOXPIPE_SLAB_PLANS")
	if spec == "" {
		t.Skip("VOXPIPE_SLAB_PLANS not set")
	}
	const nx, ny, nz, runs = 512, 512, 1000, 5
	plans := [][]int{nil} // nil: the engine's own plan
	for _, p := range strings.Split(spec, ";") {
		var sizes []int
		sum := 0
		for _, f := range strings.Split(p, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("bad plan %q", p)
			}
			sizes, sum = append(sizes, n), sum+n
		}
		if sum != nz {
			t.Fatalf("plan %q sums to %d, want %d", p, sum, nz)
		}
		plans = append(plans, sizes)
	}
	eng := newTestCUDAEngine(t, model.RandomModel(16, 4, 51), engine.PrecisionFP16)
	defer eng.Close()
	pvol, pout, free := pinnedCopy(t, eng, enginetest.SmoothVolume(nx, ny, nz, 52))
	defer free()
	kern := make([][]time.Duration, len(plans))
	wall := make([][]time.Duration, len(plans))
	var first []uint8
	for r := 0; r < runs+1; r++ {
		for i, plan := range plans {
			eng.testSlabPlan = plan
			start := time.Now()
			if err := eng.Segment(context.Background(), pvol, pout, engine.Options{Slab: 64}); err != nil {
				t.Fatal(err)
			}
			w := time.Since(start)
			if first == nil {
				first = slices.Clone(pout)
			} else if j := firstDiff(first, pout); j >= 0 {
				t.Fatalf("plan %v: mask differs at voxel %d", plan, j)
			}
			if r > 0 {
				kern[i], wall[i] = append(kern[i], eng.LastStats().Kernels), append(wall[i], w)
			}
		}
	}
	eng.testSlabPlan = nil
	for i, plan := range plans {
		name := fmt.Sprint(plan)
		if plan == nil {
			name = fmt.Sprint(eng.slabSizes(nz, 64, nx*ny*2)) + " (engine)"
		}
		table(t, "slab plan "+name, "kernels %.2f ms [%.2f-%.2f], pinned-to-pinned %.2f ms [%.2f-%.2f]",
			float64(median(kern[i]))/1e6, float64(slices.Min(kern[i]))/1e6, float64(slices.Max(kern[i]))/1e6,
			float64(median(wall[i]))/1e6, float64(slices.Min(wall[i]))/1e6, float64(slices.Max(wall[i]))/1e6)
	}
}
