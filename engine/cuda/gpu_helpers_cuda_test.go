//go:build cuda

package cuda

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"voxpipe/engine/engine"
	"voxpipe/internal/enginetest"
	"voxpipe/model"
)

// GPU engine tests: they need an NVIDIA GPU (cc >= 8.0) and run on the GPU machine through
// scripts/gpu-check.sh. Lines starting with "TABLE|" are collected into its summary table.

var precisions = []string{engine.PrecisionFP16, engine.PrecisionFP32}

func newTestCUDAEngine(t testing.TB, m *model.Model, precision string) *cudaEngine {
	t.Helper()
	eng, err := NewWith(m, 0, engine.CUDAOptions{Precision: precision})
	if err != nil {
		t.Fatalf("NewWith(%s): %v", precision, err)
	}
	if got := eng.(*cudaEngine).Precision(); got != precision {
		t.Fatalf("engine precision %q, want %q", got, precision)
	}
	t.Cleanup(func() {
		if err := eng.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return eng.(*cudaEngine)
}

func table(t testing.TB, name, format string, args ...any) {
	t.Helper()
	t.Logf("TABLE|%s|%s", name, fmt.Sprintf(format, args...))
}

// gpuSegment runs the engine with every output poisoned, checks that every voxel was written and
// that no guard region around a device buffer was touched.
func gpuSegment(t testing.TB, eng *cudaEngine, vol *model.Volume, out []uint8, slab int) {
	t.Helper()
	for i := range out {
		out[i] = 0xEE
	}
	if err := eng.Segment(context.Background(), vol, out, engine.Options{Slab: slab}); err != nil {
		t.Fatalf("Segment (slab %d): %v", slab, err)
	}
	if i := slices.Index(out, 0xEE); i >= 0 {
		t.Fatalf("slab %d: voxel %d not written", slab, i)
	}
	if err := eng.checkGuards(); err != nil {
		t.Fatalf("slab %d: %v", slab, err)
	}
}

// compareWithCPU checks the GPU mask against the pure-Go engine's: at least 99.99% equal, and
// every difference a near-tie of the float64 reference (top-2 logits within 1e-4 relative).
func compareWithCPU(t *testing.T, m *model.Model, vol *model.Volume, gpu, cpu []uint8, ref [][]float64) (diff, ties int) {
	t.Helper()
	const eps = 1e-4
	for i := range gpu {
		if gpu[i] == cpu[i] {
			continue
		}
		diff++
		if int(gpu[i]) >= m.Classes {
			t.Fatalf("voxel %d: label %d out of range", i, gpu[i])
		}
		if ref == nil {
			ref = enginetest.RefLogits(m, vol)
		}
		gap, ok := enginetest.NearTie(ref[i], int(gpu[i]), int(cpu[i]), eps)
		plane := vol.NX * vol.NY
		where := fmt.Sprintf("z %d y %d x %d", i/plane, i%plane/vol.NX, i%vol.NX)
		if !ok {
			t.Errorf("voxel %s: gpu %d, cpu %d, float64 logits %v (gap %.3g > %g): not a near-tie", where, gpu[i], cpu[i], ref[i], gap, eps)
			continue
		}
		ties++
		t.Logf("near-tie at %s: gpu %d, cpu %d, float64 logits %v (relative gap %.2g)", where, gpu[i], cpu[i], ref[i], gap)
	}
	if agree := 1 - float64(diff)/float64(len(gpu)); agree < 0.9999 {
		t.Errorf("agreement %.6f < 0.9999 (%d of %d voxels differ)", agree, diff, len(gpu))
	}
	return diff, ties
}

// volCase is a volume shape, its sample type and the slab sizes to cut it by.
type volCase struct {
	nx, ny, nz int
	int16      bool
	slabs      []int
}

// modelCases pairs a model with the volumes to run it on.
type modelCases struct {
	model *model.Model
	vols  []volCase
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// maskAgreement compares mask a with the reference b: differing voxels, the fraction equal, and
// the Dice coefficient per class (2|A∩B|/(|A|+|B|); classes in neither mask count as 1) and its mean.
func maskAgreement(a, b []uint8, classes int) (diff int, agree, meanDice float64, perClass []float64) {
	inter := make([]int, classes)
	na := make([]int, classes)
	nb := make([]int, classes)
	for i := range a {
		if int(a[i]) < classes {
			na[a[i]]++
		}
		if int(b[i]) < classes {
			nb[b[i]]++
		}
		if a[i] != b[i] {
			diff++
		} else if int(a[i]) < classes {
			inter[a[i]]++
		}
	}
	perClass = make([]float64, classes)
	for k := range perClass {
		perClass[k] = 1
		if na[k]+nb[k] > 0 {
			perClass[k] = 2 * float64(inter[k]) / float64(na[k]+nb[k])
		}
		meanDice += perClass[k] / float64(classes)
	}
	return diff, 1 - float64(diff)/float64(len(a)), meanDice, perClass
}

// compareFP16 checks the fp16 engine's mask against the fp32 one: agreement at least minAgree,
// every label in range, and (for volumes small enough for the float64 reference, vol != nil)
// every difference a near-tie at fp16 precision: both labels within 2e-2 (relative to the
// logits' scale) of the best float64 logit.
func compareFP16(t *testing.T, m *model.Model, vol *model.Volume, fp16, fp32 []uint8, minAgree float64) (diff int, agree, dice float64) {
	t.Helper()
	const eps = 2e-2
	diff, agree, dice, _ = maskAgreement(fp16, fp32, m.Classes)
	for i := range fp16 {
		if int(fp16[i]) >= m.Classes {
			t.Fatalf("voxel %d: label %d out of range", i, fp16[i])
		}
		if fp16[i] == fp32[i] || vol == nil {
			continue
		}
		plane := vol.NX * vol.NY
		z, y, x := i/plane, i%plane/vol.NX, i%vol.NX
		ref := enginetest.RefLogitsAt(m, vol, z, y, x)
		if gap, ok := enginetest.NearTie(ref, int(fp16[i]), int(fp32[i]), eps); !ok {
			t.Errorf("voxel z %d y %d x %d: fp16 %d, fp32 %d, float64 logits %v (gap %.3g > %g): not a near-tie",
				z, y, x, fp16[i], fp32[i], ref, gap, eps)
		}
	}
	if agree < minAgree {
		t.Errorf("fp16 vs fp32 agreement %.5f < %g (%d of %d voxels differ)", agree, minAgree, diff, len(fp16))
	}
	return diff, agree, dice
}

func firstDiff(a, b []uint8) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
