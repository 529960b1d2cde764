package cpu

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"voxpipe/internal/enginetest"

	"voxpipe/engine/engine"
	"voxpipe/model"
)

// refConfidence is Confidence computed straight from the float64 reference logits (refLogits),
// one voxel at a time: label = first argmax, margin = best minus the best of the other classes,
// counted on the planes MarginPlane samples.
// near counts the voxels whose float64 margin lies within eps of a margin unit's edge or whose
// label is a near-tie, where float32 rounding may legitimately move a voxel by one unit or class.
func refConfidence(m *model.Model, vol *model.Volume, eps float64) (c model.Confidence, near int64) {
	c.Labels = make([]int64, m.Classes)
	for i, l := range enginetest.RefLogits(m, vol) {
		c.Voxels++
		best := enginetest.Argmax(l)
		c.Labels[best]++
		if !model.MarginPlane(i / (vol.NX * vol.NY)) {
			continue
		}
		if best == 0 {
			if len(l) > 1 && l[0]-maxExcept(l, 0) < eps {
				near++
			}
			continue
		}
		margin := l[best] - maxExcept(l, best)
		c.MarginVoxels++
		u := int64(math.Min(math.Floor(margin*model.MarginScale), model.MarginCapUnits))
		c.MarginSum += u
		if u < model.LowMarginUnits {
			c.LowMargin++
		}
		if frac := margin*model.MarginScale - math.Floor(margin*model.MarginScale); frac < eps*model.MarginScale || frac > 1-eps*model.MarginScale || margin < eps {
			near++
		}
	}
	return c, near
}

func maxExcept(l []float64, k int) float64 {
	m := math.Inf(-1)
	for i, v := range l {
		if i != k && v > m {
			m = v
		}
	}
	return m
}

// TestCPUConfidenceMatchesReference: the CPU engine's confidence, accumulated per worker in its
// head, equals the one computed voxel by voxel from the float64 reference logits, up to the
// voxels float32 rounding may move by one unit (near): for any slab size and worker count.
func TestCPUConfidenceMatchesReference(t *testing.T) {
	t.Parallel()
	const eps = 1e-4
	for mi, m := range []*model.Model{model.RandomModel(16, 4, 3), model.RandomModel(6, 3, 4)} {
		for vi, dims := range [][3]int{{9, 7, 5}, {17, 13, 11}} {
			vol := enginetest.RandomVolume(dims[0], dims[1], dims[2], uint64(40+10*mi+vi), vi == 0)
			want, near := refConfidence(m, vol, eps)
			if want.MarginVoxels == 0 || want.MarginVoxels == want.Voxels || want.LowMargin == 0 {
				t.Fatalf("model %d volume %v: reference confidence %+v does not exercise foreground, background and low margins", mi, dims, want)
			}
			t.Logf("model %d volume %v: reference %+v, %d voxels near an edge", mi, dims, want, near)
			for _, run := range []struct{ workers, slab int }{{1, dims[2]}, {2, 2}, {3, 1}} {
				name := fmt.Sprintf("model %d %v workers %d slab %d", mi, dims, run.workers, run.slab)
				var got model.Confidence
				out := make([]uint8, dims[0]*dims[1]*dims[2])
				if err := New(m, run.workers).Segment(context.Background(), vol, out, engine.Options{Slab: run.slab, Confidence: &got}); err != nil {
					t.Fatal(err)
				}
				if got.Voxels != want.Voxels {
					t.Errorf("%s: %d voxels, want %d", name, got.Voxels, want.Voxels)
				}
				if d := abs64(got.MarginVoxels - want.MarginVoxels); d > near {
					t.Errorf("%s: foreground %d, reference %d (%d voxels near a tie)", name, got.MarginVoxels, want.MarginVoxels, near)
				}
				if d := abs64(got.LowMargin - want.LowMargin); d > near {
					t.Errorf("%s: low-margin voxels %d, reference %d", name, got.LowMargin, want.LowMargin)
				}
				// One unit per voxel near an edge, and a near-tie foreground voxel at most one
				// low margin (< LowMarginUnits).
				if d := abs64(got.MarginSum - want.MarginSum); d > near*model.LowMarginUnits {
					t.Errorf("%s: margin sum %d, reference %d", name, got.MarginSum, want.MarginSum)
				}
				var fg int64
				counts := make([]int64, m.Classes)
				for i, l := range out {
					counts[l]++
					if l > 0 && model.MarginPlane(i/(dims[0]*dims[1])) {
						fg++
					}
				}
				if fg != got.MarginVoxels {
					t.Errorf("%s: %d foreground voxels counted on the sampled planes, the mask has %d", name, got.MarginVoxels, fg)
				}
				if !slices.Equal(counts, got.Labels) {
					t.Errorf("%s: label counts %v, the mask has %v", name, got.Labels, counts)
				}
			}
		}
	}
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func TestMarginUnits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		m    float32
		want int64
	}{{0, 0}, {-1, 0}, {float32(math.NaN()), 0}, {1.0 / 64, 1}, {0.999, 63}, {1, 64}, {2.5, 160}, {1023.9, 65529}, {5000, model.MarginCapUnits}, {float32(math.Inf(1)), model.MarginCapUnits}} {
		if got := model.MarginUnits(c.m); got != c.want {
			t.Errorf("MarginUnits(%v) = %d, want %d", c.m, got, c.want)
		}
	}
	c := model.Confidence{Voxels: 10, Labels: []int64{6, 3, 1}, MarginVoxels: 4, MarginSum: 4 * 128, LowMargin: 1}
	if c.MeanMargin() != 2 || c.LowFraction() != 0.25 || c.ForegroundFraction() != 0.4 {
		t.Errorf("%+v: mean %v, low %v, foreground %v", c, c.MeanMargin(), c.LowFraction(), c.ForegroundFraction())
	}
	if !math.IsNaN((model.Confidence{}).MeanMargin()) {
		t.Error("no foreground: mean margin not NaN")
	}
}
