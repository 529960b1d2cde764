//go:build cuda

package cuda

import (
	"context"
	"fmt"
	"math"
	"testing"
	"voxpipe/internal/enginetest"

	"voxpipe/engine/cpu"
	"voxpipe/engine/engine"
	"voxpipe/fixtures"
	"voxpipe/model"
	"voxpipe/phantom"
)

// TestCUDAConfidenceMatchesCPU: the CUDA engine's confidence, accumulated by gate_head and
// count_confidence (from the fused kernel's stored logits), against the CPU engine's on the
// same volumes. Both precisions, slabs that cut the volume unevenly, the trained model on
// phantoms, random models (4 classes; 9, the fused kernel's _k16 build) on other volumes. The label counts equal the GPU mask's own
// exactly (and the sampled foreground their sum beyond label 0 on the sampled planes), which also shows that the counters start at zero
// for every volume (each volume is segmented twice). fp32 against the CPU: foreground within
// the voxels whose labels differ, mean margin within 0.1 %, low-margin voxels within 0.1 % of
// the foreground. fp16 (fp16 logits): mean margin within 2 %, low-margin fraction within 0.5
// points, label fractions within 0.1 points.
func TestCUDAConfidenceMatchesCPU(t *testing.T) {
	trained, err := model.ParseModel(fixtures.DefaultModel)
	if err != nil {
		t.Fatal(err)
	}
	_, ph := enginetest.PhantomVolume(t, phantom.Params{NX: 96, NY: 96, NZ: 64, Seed: 7})
	_, ph2 := enginetest.PhantomVolume(t, phantom.Params{NX: 181, NY: 217, NZ: 90, Seed: 8})
	cases := []struct {
		name string
		m    *model.Model
		vol  *model.Volume
		slab int
	}{
		{"default model, int16 phantom 96x96x64", trained, ph, 24},
		{"default model, int16 phantom 181x217x90", trained, ph2, 32},
		{"random model, float32 volume 70x50x37", model.RandomModel(16, 4, 71), enginetest.RandomVolume(70, 50, 37, 5, false), 9},
		{"random 9-class model, int16 volume 40x33x21", model.RandomModel(16, 9, 72), enginetest.SmoothVolume(40, 33, 21, 6), 8},
	}
	for _, precision := range precisions {
		for _, c := range cases {
			name := fmt.Sprintf("%s %s", precision, c.name)
			t.Run(name, func(t *testing.T) {
				n := c.vol.NX * c.vol.NY * c.vol.NZ
				cpuOut := make([]uint8, n)
				var want model.Confidence
				if err := cpu.New(c.m, 0).Segment(context.Background(), c.vol, cpuOut, engine.Options{Slab: c.slab, Confidence: &want}); err != nil {
					t.Fatal(err)
				}
				eng := newTestCUDAEngine(t, c.m, precision)
				vol, out, free := pinnedCopy(t, eng, c.vol)
				defer free()
				var got model.Confidence
				for run := range 2 {
					got = model.Confidence{}
					if err := eng.Segment(context.Background(), vol, out, engine.Options{Slab: c.slab, Confidence: &got}); err != nil {
						t.Fatal(err)
					}
					checkCountsOfMask(t, fmt.Sprintf("run %d", run), got, out, c.m.Classes, c.vol.NX*c.vol.NY)
				}
				diff := 0
				for i := range out {
					if out[i] != cpuOut[i] {
						diff++
					}
				}
				table(t, "confidence "+name, "gpu fg %d margin %.4f low %.4f %%; cpu fg %d margin %.4f low %.4f %%; %d labels differ",
					got.MarginVoxels, got.MeanMargin(), 100*got.LowFraction(), want.MarginVoxels, want.MeanMargin(), 100*want.LowFraction(), diff)
				if got.Voxels != want.Voxels {
					t.Errorf("voxels %d, cpu %d", got.Voxels, want.Voxels)
				}
				relMargin, lowPts, fracPts := 0.02, 0.005, 0.001
				if precision == engine.PrecisionFP32 {
					relMargin, lowPts = 0.001, 0.001
					if d := got.MarginVoxels - want.MarginVoxels; max(d, -d) > int64(diff) {
						t.Errorf("foreground %d, cpu %d, with %d labels different", got.MarginVoxels, want.MarginVoxels, diff)
					}
				}
				if gm, wm := got.MeanMargin(), want.MeanMargin(); !(math.Abs(gm-wm) <= relMargin*wm) {
					t.Errorf("mean margin %.4f, cpu %.4f", gm, wm)
				}
				if gl, wl := got.LowFraction(), want.LowFraction(); !(math.Abs(gl-wl) <= lowPts) {
					t.Errorf("low-margin fraction %.5f, cpu %.5f", gl, wl)
				}
				for l := range c.m.Classes {
					if gf, wf := got.LabelFraction(l), want.LabelFraction(l); !(math.Abs(gf-wf) <= fracPts) {
						t.Errorf("label %d fraction %.5f, cpu %.5f", l, gf, wf)
					}
				}
			})
		}
	}
}

// checkCountsOfMask: c's label counts are the mask's (planes of plane voxels), its margins'
// voxels the mask's foreground on the sampled planes (MarginPlane).
func checkCountsOfMask(t *testing.T, what string, c model.Confidence, mask []uint8, classes, plane int) {
	t.Helper()
	counts := make([]int64, classes)
	var fg int64
	for i, l := range mask {
		counts[l]++
		if l > 0 && model.MarginPlane(i/plane) {
			fg++
		}
	}
	if len(c.Labels) != classes {
		t.Fatalf("%s: %d label counts for %d classes", what, len(c.Labels), classes)
	}
	for l := range classes {
		if c.Labels[l] != counts[l] {
			t.Errorf("%s: label %d: %d voxels counted, the mask has %d", what, l, c.Labels[l], counts[l])
		}
	}
	if c.MarginVoxels != fg || c.Voxels != int64(len(mask)) {
		t.Errorf("%s: foreground %d of %d voxels, the mask has %d of %d", what, c.MarginVoxels, c.Voxels, fg, len(mask))
	}
}
