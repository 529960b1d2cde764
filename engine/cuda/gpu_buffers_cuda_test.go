//go:build cuda

package cuda

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
	"unsafe"

	"voxpipe/engine/cpu"
	"voxpipe/engine/engine"
	"voxpipe/internal/enginetest"
	"voxpipe/model"
	"voxpipe/stage"
)

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
