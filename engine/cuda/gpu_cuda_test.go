//go:build cuda

package cuda

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
	"voxpipe/internal/enginetest"

	"gorgonia.org/cu"

	"voxpipe/engine"
	"voxpipe/engine/cpu"
	"voxpipe/engine/cuda/kernels"
	"voxpipe/fixtures"
	"voxpipe/model"
	"voxpipe/phantom"
	"voxpipe/stage"
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

// TestCUDAPinnedAndGrowth runs volumes in pinned memory from AllocHost, in an order that grows
// the device buffers (larger plane, thicker slab, float32 after int16) and reuses them.
func TestCUDAPinnedAndGrowth(t *testing.T) {
	for _, precision := range precisions {
		t.Run(precision, func(t *testing.T) { testPinnedAndGrowth(t, precision) })
	}
}

func testPinnedAndGrowth(t *testing.T, precision string) {
	m := model.RandomModel(16, 4, 21)
	eng := newTestCUDAEngine(t, m, precision)
	eng.poison = true
	cpu := cpu.New(m, 0)
	for i, v := range []struct {
		nx, ny, nz, slab int
		int16            bool
	}{{20, 11, 9, 4, true}, {41, 30, 12, 12, true}, {41, 30, 12, 5, false}, {20, 11, 9, 2, true}} {
		vol := enginetest.RandomVolume(v.nx, v.ny, v.nz, uint64(200+i), v.int16)
		want := enginetest.SegmentWhole(t, cpu, vol, 4)
		pvol, pout, free := pinnedCopy(t, eng, vol)
		gpuSegment(t, eng, pvol, pout, v.slab)
		st := eng.LastStats()
		if !st.Pinned {
			t.Errorf("volume %d: LastStats().Pinned false for AllocHost memory", i)
		}
		if precision == engine.PrecisionFP32 {
			compareWithCPU(t, m, vol, pout, want, nil)
		} else {
			compareFP16(t, m, vol, pout, want, 0.99)
		}
		free()
	}
	// Buffers freed after Close: the context must still be there.
	buf, err := eng.AllocHost(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	clear(buf.Bytes())
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	if err := buf.Free(); err != nil {
		t.Fatalf("Free after Close: %v", err)
	}
	if err := eng.Segment(context.Background(), enginetest.RandomVolume(4, 4, 4, 1, true), make([]uint8, 64), engine.Options{Slab: 2}); !errors.Is(err, engine.ErrEngineClosed) {
		t.Errorf("Segment after Close: %v, want ErrEngineClosed", err)
	}
}

// pinnedCopy copies vol into pinned buffers from the engine and returns it with a pinned mask.
func pinnedCopy(t testing.TB, eng *cudaEngine, vol *model.Volume) (*model.Volume, []uint8, func()) {
	t.Helper()
	n := vol.NX * vol.NY * vol.NZ
	ib, err := eng.AllocHost(n * vol.ElemSize())
	if err != nil {
		t.Fatal(err)
	}
	ob, err := eng.AllocHost(n)
	if err != nil {
		t.Fatal(err)
	}
	pv := &model.Volume{NX: vol.NX, NY: vol.NY, NZ: vol.NZ, Norm: vol.Norm}
	p := unsafe.Pointer(unsafe.SliceData(ib.Bytes()))
	if vol.I16 != nil {
		pv.I16 = unsafe.Slice((*int16)(p), n)
		copy(pv.I16, vol.I16)
	} else {
		pv.F32 = unsafe.Slice((*float32)(p), n)
		copy(pv.F32, vol.F32)
	}
	return pv, ob.Bytes(), func() {
		if err := ib.Free(); err != nil {
			t.Error(err)
		}
		if err := ob.Free(); err != nil {
			t.Error(err)
		}
	}
}

func TestCUDAEvents(t *testing.T) {
	for _, precision := range precisions {
		t.Run(precision, func(t *testing.T) { testEvents(t, precision) })
	}
}

func testEvents(t *testing.T, precision string) {
	m := model.RandomModel(16, 4, 31)
	eng := newTestCUDAEngine(t, m, precision)
	vol := enginetest.RandomVolume(40, 24, 23, 7, true)
	var mu sync.Mutex
	var evs []engine.Event
	out := make([]uint8, 40*24*23)
	const slab = 5
	err := eng.Segment(context.Background(), vol, out, engine.Options{Slab: slab, OnEvent: func(e engine.Event) {
		mu.Lock()
		evs = append(evs, e)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	// The fp16 engine's slabs grow in the middle of the volume (SlabRamp): 5, 13, 5.
	sizes := eng.slabSizes(23, slab, 40*24*2)
	if want := map[string]int{engine.PrecisionFP32: 5, engine.PrecisionFP16: 3}[precision]; len(sizes) != want {
		t.Fatalf("%s: slabs %v, want %d of them", precision, sizes, want)
	}
	slabs := len(sizes)
	if len(evs) != 3*slabs {
		t.Fatalf("%d events for %d slabs, want 3 per slab", len(evs), slabs)
	}
	plane := int64(40 * 24)
	var h2dBytes, d2hBytes, voxels int64
	byStage := map[stage.Stage][]engine.Event{}
	for _, e := range evs {
		byStage[e.Stage] = append(byStage[e.Stage], e)
		if e.Start < 0 || e.Duration < 0 || e.Slab < 0 || e.Slab >= slabs {
			t.Errorf("bad event %+v", e)
		}
		switch e.Stage {
		case stage.H2D:
			h2dBytes += e.Bytes
		case stage.D2H:
			d2hBytes += e.Bytes
			voxels += e.Voxels
		}
	}
	// Input planes uploaded: each slab with its halo clipped to the volume.
	var wantH2D int64
	for z0, k := 0, 0; k < slabs; z0, k = z0+sizes[k], k+1 {
		wantH2D += int64(min(z0+sizes[k]+model.Halo, 23)-max(z0-model.Halo, 0)) * plane * 2
	}
	if h2dBytes != wantH2D || d2hBytes != 23*plane || voxels != 23*plane {
		t.Errorf("bytes h2d %d (want %d), d2h %d, voxels %d (want %d)", h2dBytes, wantH2D, d2hBytes, voxels, 23*plane)
	}
	for _, st := range []stage.Stage{stage.H2D, stage.Kernels, stage.D2H} {
		if len(byStage[st]) != slabs {
			t.Errorf("%d %s events, want %d", len(byStage[st]), st, slabs)
		}
	}
	// Stream order within a slab: upload, kernels, download.
	for k := 0; k < slabs; k++ {
		h, kk, d := byStage[stage.H2D][k], byStage[stage.Kernels][k], byStage[stage.D2H][k]
		if h.Slab != k || kk.Slab != k || d.Slab != k {
			t.Fatalf("events out of slab order")
		}
		if kk.Start < h.Start+h.Duration || d.Start < kk.Start+kk.Duration {
			t.Errorf("slab %d: h2d %v+%v, kernels %v+%v, d2h %v+%v out of order", k, h.Start, h.Duration, kk.Start, kk.Duration, d.Start, d.Duration)
		}
	}
	st := eng.LastStats()
	groups := st.Conv1 + st.Conv2 + st.ConvG + st.GateHead + st.Fused
	if st.Slabs != slabs || st.Kernels <= 0 || groups > st.Kernels+time.Microsecond*time.Duration(slabs) || groups < st.Kernels/2 {
		t.Errorf("stats %+v", st)
	}
	if fused := precision == engine.PrecisionFP16; fused != (st.Fused > 0) || fused == (st.Conv2 > 0) {
		t.Errorf("%s: kernel groups %+v", precision, st)
	}
}

func TestCUDACancelAndBadInput(t *testing.T) {
	for _, precision := range precisions {
		t.Run(precision, func(t *testing.T) { testCancelAndBadInput(t, precision) })
	}
}

func testCancelAndBadInput(t *testing.T, precision string) {
	m := model.RandomModel(16, 4, 41)
	eng := newTestCUDAEngine(t, m, precision)
	vol := enginetest.RandomVolume(30, 20, 40, 9, true)
	out := make([]uint8, 30*20*40)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := eng.Segment(ctx, vol, out, engine.Options{Slab: 2}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
	if err := eng.Segment(context.Background(), vol, out[:10], engine.Options{Slab: 2}); !errors.Is(err, engine.ErrBadVolume) {
		t.Errorf("short mask: %v, want ErrBadVolume", err)
	}
	if err := eng.Segment(context.Background(), vol, out, engine.Options{Slab: 0}); !errors.Is(err, engine.ErrBadVolume) {
		t.Errorf("slab 0: %v, want ErrBadVolume", err)
	}
	// Still usable after the errors.
	gpuSegment(t, eng, vol, out, 8)
	if _, err := New(m, 1<<20); err == nil {
		t.Error("New accepted device 1<<20")
	}
	if _, err := NewWith(m, 0, engine.CUDAOptions{Precision: "fp8"}); !errors.Is(err, engine.ErrBadPrecision) {
		t.Errorf("precision fp8: %v, want ErrBadPrecision", err)
	}
	info, err := Info()
	if err != nil {
		t.Fatal(err)
	}
	table(t, "gpu", "%s", info)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

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
			name := fmt.Sprintf("bench %s slab %d", b.precision, slab)
			if b.precision == engine.PrecisionFP32 {
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
					model.FLOPsPerVoxel(m.Channels, m.Classes)*float64(nx*ny*nz)/median(kern).Seconds()/1e12)
			}
			table(t, name+" h2d / d2h GB/s", "%.1f / %.1f (%.0f MB in, %.0f MB out)",
				gbps(st.H2DBytes, median(h2d)), gbps(st.D2HBytes, median(d2h)), float64(st.H2DBytes)/1e6, float64(st.D2HBytes)/1e6)
			table(t, name+" pinned-to-pinned ms", "%.1f wall, %.1f GPU (%.0f Mvox/s)",
				ms(median(wall)), ms(median(total)), float64(nx*ny*nz)/median(wall).Seconds()/1e6)
			if first == nil {
				first = slices.Clone(pout)
			} else if i := firstDiff(first, pout); i >= 0 {
				t.Errorf("%s: mask differs from slab %d's at voxel %d", name, b.slabs[0], i)
			}
		}
		if b.precision == engine.PrecisionFP16 {
			// Pageable (Go) memory for comparison: one run.
			out := make([]uint8, nx*ny*nz)
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

	// The CPU engine on a few slabs of the same volume: borders and the middle.
	cpu := cpu.New(m, 0)
	plane := nx * ny
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

func firstDiff(a, b []uint8) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
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

// TestCUDABackgroundOpen: the engine returns before its context exists; buffers allocated and
// filled meanwhile are page-locked before Segment copies from them; a buffer freed before its
// page-locking leaves the queue; a failed open reaches Ready, Segment and AllocHost'd buffers
// cleanly, and Close returns.
func TestCUDABackgroundOpen(t *testing.T) {
	m := model.RandomModel(16, 4, 61)
	vol := enginetest.RandomVolume(37, 29, 23, 62, true)
	want := enginetest.SegmentWhole(t, cpu.New(m, 0), vol, 4)
	eng, err := NewWith(m, 0, engine.CUDAOptions{Precision: engine.PrecisionFP32})
	if err != nil {
		t.Fatal(err)
	}
	e := eng.(*cudaEngine)
	n := vol.NX * vol.NY * vol.NZ
	ib, err := e.AllocHost(2 * n) // most likely before the context exists
	if err != nil {
		t.Fatal(err)
	}
	ob, err := e.AllocHost(n)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := e.AllocHost(1 << 20) // freed at once: it may still be queued
	if err != nil {
		t.Fatal(err)
	}
	if err := gone.Free(); err != nil {
		t.Errorf("Free of a fresh buffer: %v", err)
	}
	in := unsafe.Slice((*int16)(unsafe.Pointer(unsafe.SliceData(ib.Bytes()))), n)
	copy(in, vol.I16)
	pv := &model.Volume{NX: vol.NX, NY: vol.NY, NZ: vol.NZ, Norm: vol.Norm, I16: in}
	out := ob.Bytes()
	gpuSegment(t, e, pv, out, 5)
	if err := e.Ready(); err != nil {
		t.Fatalf("Ready after Segment: %v", err)
	}
	if !e.LastStats().Pinned {
		t.Error("buffers allocated while the engine opened were not page-locked by Segment")
	}
	compareWithCPU(t, m, vol, out, want, nil)
	// Many buffers allocated and freed from several goroutines while the engine works.
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				b, err := e.AllocHost(64 << 10)
				if err != nil {
					t.Error(err)
					return
				}
				b.Bytes()[0] = 1
				if err := b.Free(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	gpuSegment(t, e, pv, out, 7)
	wg.Wait()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, b := range []engine.HostBuffer{ib, ob} {
		if err := b.Free(); err != nil {
			t.Errorf("Free after Close: %v", err)
		}
	}

	// A failed open.
	fault := errors.New("injected setup fault")
	testSetupFault = fault // read by the engine's thread: reset only once it has opened
	eng, err = NewWith(m, 0, engine.CUDAOptions{})
	if err != nil {
		testSetupFault = nil
		t.Fatal(err)
	}
	e = eng.(*cudaEngine)
	b, err := e.AllocHost(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	err = e.Ready()
	testSetupFault = nil
	if !errors.Is(err, fault) {
		t.Fatalf("Ready: %v, want the injected fault", err)
	}
	if err := e.Segment(context.Background(), pv, out, engine.Options{Slab: 4}); !errors.Is(err, fault) {
		t.Errorf("Segment after a failed open: %v, want the injected fault", err)
	}
	if err := b.Free(); err != nil {
		t.Errorf("Free after a failed open: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("Close after a failed open: %v", err)
	}
}

// labSM90aCubin is the lab's sm_90a cubin (lab/wgmma), found from the package folder (go test)
// or the repository root (scripts/gpu-check.sh runs the test binary there).
func labSM90aCubin(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"lab/wgmma/voxpipe_sm90a.cubin", "../../lab/wgmma/voxpipe_sm90a.cubin"} {
		if _, err := os.Stat(p); err == nil {
			abs, err := filepath.Abs(p)
			if err != nil {
				t.Fatal(err)
			}
			return abs
		}
	}
	t.Fatal("lab/wgmma/voxpipe_sm90a.cubin not found from the package folder or the repository root")
	return ""
}

// TestCUDAKernelImages checks which kernel image the engine loads on this device (ChooseImage's
// pick by device) and, on compute capability 9.0 where the lab's sm_90a cubin (loaded from its
// file through EnvKernels) also loads, that the fused kernel of each gives the same labels on
// phantoms (>= 99.99 %: two compilers may contract floating-point operations differently).
func TestCUDAKernelImages(t *testing.T) {
	if os.Getenv(kernels.EnvKernels) != "" {
		t.Skipf("%s is set: the choice by device is not what runs", kernels.EnvKernels)
	}
	mdl, err := model.ParseModel(fixtures.DefaultModel)
	if err != nil {
		t.Fatal(err)
	}
	major, minor, err := cu.Device(0).ComputeCapability()
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := kernels.ChooseImage(major, minor, "")
	if err != nil {
		t.Fatal(err)
	}
	open := func(env string) *cudaEngine {
		t.Setenv(kernels.EnvKernels, env)
		e := newTestCUDAEngine(t, mdl, engine.PrecisionFP16)
		desc, err := e.Kernels() // waits for the open, which sets e.mod
		if err != nil {
			t.Fatal(err)
		}
		table(t, "kernels, "+kernels.EnvKernels+"="+env, "%s", desc)
		return e
	}
	auto := open("")
	if auto.mod.Image.Name != want.Name {
		t.Fatalf("compute capability %d.%d: loaded the %s, want the %s", major, minor, auto.mod.Image, want)
	}
	if major != 9 || minor != 0 {
		return
	}
	cubinPath := labSM90aCubin(t)
	cubin, fat := open(cubinPath), open("fatbin")
	if cubin.mod.Image.Name != cubinPath || fat.mod.Image.Name != "fatbin" {
		t.Fatalf("forced images: %s and %s", cubin.mod.Image, fat.mod.Image)
	}
	for _, p := range []phantom.Params{{NX: 181, NY: 217, NZ: 90, Seed: 2}, {NX: 256, NY: 256, NZ: 160, Seed: 3}} {
		ph, vol := enginetest.PhantomVolume(t, p)
		a, b := make([]uint8, len(ph.Image)), make([]uint8, len(ph.Image))
		gpuSegment(t, cubin, vol, a, 32)
		gpuSegment(t, fat, vol, b, 32)
		diff, agree, _, _ := maskAgreement(a, b, mdl.Classes)
		table(t, fmt.Sprintf("sm_90a cubin vs fatbin, phantom %dx%dx%d", p.NX, p.NY, p.NZ), "%d of %d differ (%.5f%% agree)", diff, len(a), 100*agree)
		if agree < 0.9999 {
			t.Errorf("phantom %dx%dx%d: the images' labels agree on %.5f %% of voxels, want >= 99.99 %%", p.NX, p.NY, p.NZ, 100*agree)
		}
	}
}
