//go:build cuda

package segment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// GPU engine tests: they need an NVIDIA GPU (cc >= 8.0) and run on the GPU machine through
// scripts/gpu-check.sh. Lines starting with "TABLE|" are collected into its summary table.

func newTestCUDAEngine(t testing.TB, m *Model) *cudaEngine {
	t.Helper()
	eng, err := NewCUDAEngine(m, 0)
	if err != nil {
		t.Fatalf("NewCUDAEngine: %v", err)
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
func gpuSegment(t testing.TB, eng *cudaEngine, vol *Volume, out []uint8, slab int) {
	t.Helper()
	for i := range out {
		out[i] = 0xEE
	}
	if err := eng.Segment(context.Background(), vol, out, Options{Slab: slab}); err != nil {
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
func compareWithCPU(t *testing.T, m *Model, vol *Volume, gpu, cpu []uint8, ref [][]float64) (diff, ties int) {
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
			ref = refLogits(m, vol)
		}
		gap, ok := nearTie(ref[i], int(gpu[i]), int(cpu[i]), eps)
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

func TestCUDAMatchesCPU(t *testing.T) {
	type volCase struct {
		nx, ny, nz int
		int16      bool
		slabs      []int
	}
	cases := []struct {
		model *Model
		vols  []volCase
	}{
		{RandomModel(16, 4, 11), []volCase{
			{37, 53, 29, true, []int{1, 7, 29, 64}},
			{37, 53, 29, false, []int{3, 8, 29}},
			{64, 64, 17, true, []int{5, 16}},
		}},
		// Fewer channels and classes: the kernels zero-pad to 16 channels.
		{RandomModel(6, 3, 12), []volCase{{33, 9, 6, false, []int{1, 4}}}},
		{RandomModel(16, 16, 13), []volCase{{5, 70, 3, true, []int{2}}}},
	}
	for ci, c := range cases {
		eng := newTestCUDAEngine(t, c.model)
		eng.poison = true
		cpu := NewCPUEngine(c.model, 0)
		for vi, v := range c.vols {
			vol := randomVolume(v.nx, v.ny, v.nz, uint64(100*ci+vi), v.int16)
			want := segmentWhole(t, cpu, vol, 5)
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
	m := RandomModel(16, 4, 21)
	eng := newTestCUDAEngine(t, m)
	eng.poison = true
	cpu := NewCPUEngine(m, 0)
	for i, v := range []struct {
		nx, ny, nz, slab int
		int16            bool
	}{{20, 11, 9, 4, true}, {41, 30, 12, 12, true}, {41, 30, 12, 5, false}, {20, 11, 9, 2, true}} {
		vol := randomVolume(v.nx, v.ny, v.nz, uint64(200+i), v.int16)
		want := segmentWhole(t, cpu, vol, 4)
		pvol, pout, free := pinnedCopy(t, eng, vol)
		gpuSegment(t, eng, pvol, pout, v.slab)
		st := eng.LastStats()
		if !st.Pinned {
			t.Errorf("volume %d: LastStats().Pinned false for AllocHost memory", i)
		}
		compareWithCPU(t, m, vol, pout, want, nil)
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
	if err := eng.Segment(context.Background(), randomVolume(4, 4, 4, 1, true), make([]uint8, 64), Options{Slab: 2}); !errors.Is(err, ErrEngineClosed) {
		t.Errorf("Segment after Close: %v, want ErrEngineClosed", err)
	}
}

// pinnedCopy copies vol into pinned buffers from the engine and returns it with a pinned mask.
func pinnedCopy(t testing.TB, eng *cudaEngine, vol *Volume) (*Volume, []uint8, func()) {
	t.Helper()
	n := vol.NX * vol.NY * vol.NZ
	ib, err := eng.AllocHost(n * vol.elemSize())
	if err != nil {
		t.Fatal(err)
	}
	ob, err := eng.AllocHost(n)
	if err != nil {
		t.Fatal(err)
	}
	pv := &Volume{NX: vol.NX, NY: vol.NY, NZ: vol.NZ, Norm: vol.Norm}
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
	m := RandomModel(16, 4, 31)
	eng := newTestCUDAEngine(t, m)
	vol := randomVolume(40, 24, 23, 7, true)
	var mu sync.Mutex
	var evs []Event
	out := make([]uint8, 40*24*23)
	const slab = 5
	err := eng.Segment(context.Background(), vol, out, Options{Slab: slab, OnEvent: func(e Event) {
		mu.Lock()
		evs = append(evs, e)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	slabs := (23 + slab - 1) / slab
	if len(evs) != 3*slabs {
		t.Fatalf("%d events for %d slabs, want 3 per slab", len(evs), slabs)
	}
	plane := int64(40 * 24)
	var h2dBytes, d2hBytes, voxels int64
	byStage := map[string][]Event{}
	for _, e := range evs {
		byStage[e.Stage] = append(byStage[e.Stage], e)
		if e.Start < 0 || e.Duration < 0 || e.Slab < 0 || e.Slab >= slabs {
			t.Errorf("bad event %+v", e)
		}
		switch e.Stage {
		case "h2d":
			h2dBytes += e.Bytes
		case "d2h":
			d2hBytes += e.Bytes
			voxels += e.Voxels
		}
	}
	// Input planes uploaded: each slab with its halo clipped to the volume.
	var wantH2D int64
	for z0 := 0; z0 < 23; z0 += slab {
		wantH2D += int64(min(z0+slab+Halo, 23)-max(z0-Halo, 0)) * plane * 2
	}
	if h2dBytes != wantH2D || d2hBytes != 23*plane || voxels != 23*plane {
		t.Errorf("bytes h2d %d (want %d), d2h %d, voxels %d (want %d)", h2dBytes, wantH2D, d2hBytes, voxels, 23*plane)
	}
	for _, stage := range []string{"h2d", "kernels", "d2h"} {
		if len(byStage[stage]) != slabs {
			t.Errorf("%d %s events, want %d", len(byStage[stage]), stage, slabs)
		}
	}
	// Stream order within a slab: upload, kernels, download.
	for k := 0; k < slabs; k++ {
		h, kk, d := byStage["h2d"][k], byStage["kernels"][k], byStage["d2h"][k]
		if h.Slab != k || kk.Slab != k || d.Slab != k {
			t.Fatalf("events out of slab order")
		}
		if kk.Start < h.Start+h.Duration || d.Start < kk.Start+kk.Duration {
			t.Errorf("slab %d: h2d %v+%v, kernels %v+%v, d2h %v+%v out of order", k, h.Start, h.Duration, kk.Start, kk.Duration, d.Start, d.Duration)
		}
	}
	st := eng.LastStats()
	if st.Slabs != slabs || st.Kernels <= 0 || st.Conv1+st.Conv2+st.ConvG+st.GateHead > st.Kernels+time.Microsecond*time.Duration(slabs) {
		t.Errorf("stats %+v", st)
	}
}

func TestCUDACancelAndBadInput(t *testing.T) {
	m := RandomModel(16, 4, 41)
	eng := newTestCUDAEngine(t, m)
	vol := randomVolume(30, 20, 40, 9, true)
	out := make([]uint8, 30*20*40)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := eng.Segment(ctx, vol, out, Options{Slab: 2}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
	if err := eng.Segment(context.Background(), vol, out[:10], Options{Slab: 2}); !errors.Is(err, ErrBadVolume) {
		t.Errorf("short mask: %v, want ErrBadVolume", err)
	}
	if err := eng.Segment(context.Background(), vol, out, Options{Slab: 0}); !errors.Is(err, ErrBadVolume) {
		t.Errorf("slab 0: %v, want ErrBadVolume", err)
	}
	// Still usable after the errors.
	gpuSegment(t, eng, vol, out, 8)
	if _, err := NewCUDAEngine(m, 1<<20); err == nil {
		t.Error("NewCUDAEngine accepted device 1<<20")
	}
	info, err := CUDAInfo()
	if err != nil {
		t.Fatal(err)
	}
	table(t, "gpu", "%s", info)
}

// smoothVolume is a random-but-smooth int16 volume: a few random 3D waves and blobs plus noise,
// values like an MRI's (0..~3000).
func smoothVolume(nx, ny, nz int, seed uint64) *Volume {
	rng := splitMix64{state: seed}
	n := nx * ny * nz
	vol := &Volume{NX: nx, NY: ny, NZ: nz, I16: make([]int16, n)}
	type wave struct{ kx, ky, kz, ph, amp float64 }
	waves := make([]wave, 6)
	for i := range waves {
		waves[i] = wave{rng.float64() * 0.08, rng.float64() * 0.08, rng.float64() * 0.05, rng.float64() * 6.3, 150 + 250*rng.float64()}
	}
	// Separable tables: sin(a+b+c) expanded would need products; instead sum per-axis terms and
	// pairwise products, enough structure at several scales.
	tx := make([][]float64, len(waves))
	ty := make([][]float64, len(waves))
	tz := make([][]float64, len(waves))
	for i, w := range waves {
		tx[i], ty[i], tz[i] = make([]float64, nx), make([]float64, ny), make([]float64, nz)
		for x := range nx {
			tx[i][x] = math.Sin(w.kx*float64(x) + w.ph)
		}
		for y := range ny {
			ty[i][y] = math.Cos(w.ky*float64(y) - w.ph)
		}
		for z := range nz {
			tz[i][z] = math.Sin(w.kz*float64(z) + 2*w.ph)
		}
	}
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for wkr := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := splitMix64{state: seed ^ uint64(wkr+1)*0x9e3779b97f4a7c15}
			for z := wkr; z < nz; z += workers {
				for y := range ny {
					row := vol.I16[(z*ny+y)*nx : (z*ny+y+1)*nx]
					for x := range row {
						v := 1200.0
						for i, w := range waves {
							v += w.amp * tx[i][x] * ty[i][y] * tz[i][z]
						}
						v += 60 * (float64(r.next()>>11)/(1<<53) - 0.5)
						row[x] = int16(max(0, min(v, 32767)))
					}
				}
			}
		}()
	}
	wg.Wait()
	var st Stats
	st.AddInt16(vol.I16)
	vol.Norm = st.Norm(1, 0)
	return vol
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// TestCUDABenchmark512 times one 512x512x1000 int16 volume in pinned memory, per slab size:
// median of several runs after a warm-up. Set VOXPIPE_GPU_BENCH=0 to skip. Also checks that
// the masks do not depend on the slab size and match the CPU engine on a few slabs.
func TestCUDABenchmark512(t *testing.T) {
	if os.Getenv("VOXPIPE_GPU_BENCH") == "0" || testing.Short() {
		t.Skip("benchmark skipped")
	}
	const nx, ny, nz, runs = 512, 512, 1000, 5
	m := RandomModel(16, 4, 51)
	eng := newTestCUDAEngine(t, m)
	t0 := time.Now()
	vol := smoothVolume(nx, ny, nz, 52)
	t.Logf("volume generated in %v", time.Since(t0))
	pvol, pout, free := pinnedCopy(t, eng, vol)
	defer free()

	var first []uint8
	for _, slab := range []int{32, 64, 128} {
		var kern, h2d, d2h, total, wall, c1, c2, cg, gh []time.Duration
		var st GPUStats
		for r := 0; r < runs+1; r++ {
			start := time.Now()
			if err := eng.Segment(context.Background(), pvol, pout, Options{Slab: slab}); err != nil {
				t.Fatal(err)
			}
			w := time.Since(start)
			st = eng.LastStats()
			if r == 0 {
				continue // warm-up: buffer allocation, first launches
			}
			wall = append(wall, w)
			kern, h2d, d2h, total = append(kern, st.Kernels), append(h2d, st.H2D), append(d2h, st.D2H), append(total, st.Total)
			c1, c2, cg, gh = append(c1, st.Conv1), append(c2, st.Conv2), append(cg, st.ConvG), append(gh, st.GateHead)
		}
		if !st.Pinned {
			t.Error("benchmark buffers not pinned")
		}
		ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
		gbps := func(b int64, d time.Duration) float64 { return float64(b) / d.Seconds() / 1e9 }
		table(t, fmt.Sprintf("bench slab %d kernels ms", slab), "%.1f (conv1 %.1f, conv2 %.1f, convg %.1f, gate_head %.1f)",
			ms(median(kern)), ms(median(c1)), ms(median(c2)), ms(median(cg)), ms(median(gh)))
		table(t, fmt.Sprintf("bench slab %d h2d / d2h GB/s", slab), "%.1f / %.1f (%.0f MB in, %.0f MB out)",
			gbps(st.H2DBytes, median(h2d)), gbps(st.D2HBytes, median(d2h)), float64(st.H2DBytes)/1e6, float64(st.D2HBytes)/1e6)
		table(t, fmt.Sprintf("bench slab %d pinned-to-pinned ms", slab), "%.1f wall, %.1f GPU (%.0f Mvox/s)",
			ms(median(wall)), ms(median(total)), float64(nx*ny*nz)/median(wall).Seconds()/1e6)
		if first == nil {
			first = slices.Clone(pout)
		} else if i := firstDiff(first, pout); i >= 0 {
			t.Errorf("slab %d: mask differs from slab 32's at voxel %d", slab, i)
		}
	}

	// Pageable (Go) memory for comparison: one run.
	out := make([]uint8, nx*ny*nz)
	start := time.Now()
	if err := eng.Segment(context.Background(), vol, out, Options{Slab: 64}); err != nil {
		t.Fatal(err)
	}
	w := time.Since(start)
	st := eng.LastStats()
	table(t, "bench slab 64 pageable memory", "%.1f ms wall, h2d %.1f GB/s, d2h %.1f GB/s (pinned %v)",
		float64(w)/1e6, float64(st.H2DBytes)/st.H2D.Seconds()/1e9, float64(st.D2HBytes)/st.D2H.Seconds()/1e9, st.Pinned)
	if i := firstDiff(first, out); i >= 0 {
		t.Errorf("pageable run: mask differs at voxel %d", i)
	}

	// The CPU engine on a few slabs of the same volume: borders and the middle.
	cpu := NewCPUEngine(m, 0)
	plane := nx * ny
	for _, z := range [][2]int{{0, 2}, {499, 501}, {998, 1000}} {
		want := make([]uint8, (z[1]-z[0])*plane)
		if err := cpu.SegmentSlab(vol, z[0], z[1], want); err != nil {
			t.Fatal(err)
		}
		got := first[z[0]*plane : z[1]*plane]
		diff := 0
		for i := range want {
			if want[i] != got[i] {
				diff++
			}
		}
		agree := 1 - float64(diff)/float64(len(want))
		table(t, fmt.Sprintf("bench vs cpu z %d..%d", z[0], z[1]), "%d of %d differ (%.5f%% agree)", diff, len(want), 100*agree)
		if agree < 0.9999 {
			t.Errorf("z %d..%d: agreement %.6f < 0.9999", z[0], z[1], agree)
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
