package cpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"unsafe"
	"voxpipe/engine/engine"
	"voxpipe/internal/enginetest"
	"voxpipe/model"
	"voxpipe/stage"
)

func TestCPUMatchesFloat64Reference(t *testing.T) {
	t.Parallel()
	const eps = 1e-4 // relative logit gap within which float32 rounding may flip the argmax
	models := []*model.Model{model.RandomModel(16, 4, 1), model.RandomModel(6, 3, 2)}
	cases := []struct {
		nx, ny, nz int
		i16        bool
	}{
		{1, 1, 1, false}, {5, 3, 1, false}, {7, 9, 11, false}, {13, 1, 6, true},
		{1, 8, 5, true}, {6, 5, 4, true}, {2, 2, 9, false}, {11, 10, 3, false}, {20, 17, 12, true},
	}
	var total, mismatches, ties int
	minGap := math.Inf(1) // smallest relative top-2 gap of the float64 logits seen
	classSeen := map[uint8]int{}
	for mi, m := range models {
		for ci, tc := range cases {
			name := fmt.Sprintf("C%dK%d/%dx%dx%d", m.Channels, m.Classes, tc.nx, tc.ny, tc.nz)
			vol := enginetest.RandomVolume(tc.nx, tc.ny, tc.nz, uint64(100*mi+ci), tc.i16)
			got := enginetest.SegmentWhole(t, New(m, 2), vol, 4)
			logits := enginetest.RefLogits(m, vol)
			for i, l := range logits {
				want := enginetest.Argmax(l)
				if len(l) > 1 {
					second := -1
					for k := range l {
						if k != want && (second < 0 || l[k] > l[second]) {
							second = k
						}
					}
					if gap, _ := enginetest.NearTie(l, want, second, 0); gap < minGap {
						minGap = gap
					}
				}
				classSeen[got[i]]++
				total++
				if int(got[i]) == want {
					continue
				}
				mismatches++
				gap, ok := enginetest.NearTie(l, int(got[i]), want, eps)
				if !ok {
					t.Errorf("%s voxel %d: label %d, float64 reference %d, logits %v: relative gap %.3g is no near-tie", name, i, got[i], want, l, gap)
					continue
				}
				ties++
				t.Logf("%s voxel %d: near-tie mismatch, label %d vs reference %d, relative gap %.3g, logits %v", name, i, got[i], want, gap, l)
			}
		}
	}
	t.Logf("%d voxels, %d mismatches, %d of them near-ties; smallest relative top-2 gap %.3g; label counts %v", total, mismatches, ties, minGap, classSeen)
	if mismatches > total/1000+1 {
		t.Errorf("%d mismatches in %d voxels: too many even if near-ties", mismatches, total)
	}
	if len(classSeen) < 3 {
		t.Errorf("only labels %v appear: test volumes do not exercise the head", classSeen)
	}
}

// TestCPUExactTieLowestIndex gives classes 1 and 3 identical head rows: their float32 logits are
// then bit-identical, and the lower index must win every time.
func TestCPUExactTieLowestIndex(t *testing.T) {
	t.Parallel()
	m := model.RandomModel(16, 4, 21)
	copy(m.HeadW[3*16:4*16], m.HeadW[1*16:2*16])
	m.HeadB[3] = m.HeadB[1]
	vol := enginetest.RandomVolume(10, 9, 7, 4, false)
	got := enginetest.SegmentWhole(t, New(m, 2), vol, 3)
	counts := map[uint8]int{}
	for _, l := range got {
		counts[l]++
	}
	if counts[3] != 0 || counts[1] == 0 {
		t.Errorf("label counts %v: want class 1 present and its tied twin 3 never chosen", counts)
	}
	for i, l := range enginetest.RefLogits(m, vol) {
		if want := enginetest.Argmax(l); int(got[i]) != want {
			t.Errorf("voxel %d: label %d, reference %d", i, got[i], want)
		}
	}
}

func TestCPUSlabsBitIdentical(t *testing.T) {
	t.Parallel()
	m := model.RandomModel(16, 4, 7)
	for _, tc := range []struct {
		nx, ny, nz int
		i16        bool
	}{{9, 7, 13, false}, {4, 3, 8, true}, {3, 5, 1, false}} {
		vol := enginetest.RandomVolume(tc.nx, tc.ny, tc.nz, 42, tc.i16)
		e := New(m, 2)
		want := enginetest.SegmentWhole(t, e, vol, vol.NZ)
		for _, slab := range []int{1, 2, 3, 4, 5, vol.NZ - 1, vol.NZ, vol.NZ + 7} {
			if slab < 1 {
				continue
			}
			if got := enginetest.SegmentWhole(t, e, vol, slab); !slices.Equal(got, want) {
				t.Errorf("%dx%dx%d slab %d: mask differs from whole-volume mask", tc.nx, tc.ny, tc.nz, slab)
			}
		}
		plane := vol.NX * vol.NY
		ranges := [][2]int{{0, 1}, {vol.NZ - 1, vol.NZ}, {0, vol.NZ}, {vol.NZ / 2, vol.NZ/2 + 1}, {1, max(vol.NZ-1, 2)}}
		for _, r := range ranges {
			z0, z1 := r[0], min(r[1], vol.NZ)
			if z0 >= z1 {
				continue
			}
			out := make([]uint8, (z1-z0)*plane)
			if err := e.SegmentSlab(vol, z0, z1, out); err != nil {
				t.Fatalf("SegmentSlab(%d, %d): %v", z0, z1, err)
			}
			if !slices.Equal(out, want[z0*plane:z1*plane]) {
				t.Errorf("%dx%dx%d SegmentSlab(%d, %d) differs from the whole-volume mask", tc.nx, tc.ny, tc.nz, z0, z1)
			}
		}
	}
}

func TestCPUWorkersAndReuse(t *testing.T) {
	t.Parallel()
	m := model.RandomModel(16, 4, 3)
	big := enginetest.RandomVolume(12, 10, 9, 5, false)
	small := enginetest.RandomVolume(5, 4, 3, 6, true)
	one := New(m, 1)
	many := New(m, 5)
	wantBig := enginetest.SegmentWhole(t, one, big, 3)
	wantSmall := enginetest.SegmentWhole(t, one, small, 2)
	// The same engine across volumes of other sizes and back must not leak buffer contents.
	for range 2 {
		if got := enginetest.SegmentWhole(t, many, big, 4); !slices.Equal(got, wantBig) {
			t.Fatal("5 workers differ from 1 on the big volume")
		}
		if got := enginetest.SegmentWhole(t, many, small, 1); !slices.Equal(got, wantSmall) {
			t.Fatal("5 workers differ from 1 on the small volume")
		}
	}
	if err := many.Close(); err != nil {
		t.Fatal(err)
	}
	if err := many.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := many.Segment(context.Background(), small, make([]uint8, 60), engine.Options{Slab: 1}); !errors.Is(err, engine.ErrEngineClosed) {
		t.Errorf("Segment after Close: %v, want ErrEngineClosed", err)
	}
	if err := many.SegmentSlab(small, 0, 1, make([]uint8, 20)); !errors.Is(err, engine.ErrEngineClosed) {
		t.Errorf("SegmentSlab after Close: %v, want ErrEngineClosed", err)
	}
}

func TestCPUEvents(t *testing.T) {
	t.Parallel()
	vol := enginetest.RandomVolume(6, 5, 10, 9, true)
	e := New(model.RandomModel(16, 4, 1), 2)
	var mu sync.Mutex
	var events []engine.Event
	out := make([]uint8, 6*5*10)
	err := e.Segment(context.Background(), vol, out, engine.Options{Slab: 4, OnEvent: func(ev engine.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 3 {
		t.Fatalf("%d events for 10 slices in slabs of 4, want 3", len(events))
	}
	wantVoxels := []int64{4 * 30, 4 * 30, 2 * 30}
	wantBytes := []int64{7 * 30 * 2, 9 * 30 * 2, 5 * 30 * 2} // slices read (halo included, clipped), int16
	for i, ev := range events {
		if ev.Stage != stage.Segment || ev.Slab != i || ev.Voxels != wantVoxels[i] || ev.Bytes != wantBytes[i] || ev.Duration <= 0 {
			t.Errorf("event %d: %+v, want stage segment, slab %d, %d voxels, %d bytes", i, ev, i, wantVoxels[i], wantBytes[i])
		}
		if i > 0 && ev.Start < events[i-1].Start+events[i-1].Duration {
			t.Errorf("event %d starts before event %d ends", i, i-1)
		}
	}
}

// OnSlabDone: in z order, contiguous, covering [0, NZ) once, and each range already holds its
// final labels when reported (a snapshot taken in the callback equals the finished mask); the
// engine does not write a reported range again. After a cancellation the calls cover a prefix.
func TestCPUSlabDone(t *testing.T) {
	t.Parallel()
	e := New(model.RandomModel(16, 4, 5), 3)
	for _, tc := range []struct {
		nz, slab int
		i16      bool
	}{{10, 4, true}, {10, 1, false}, {7, 7, true}, {5, 9, false}, {12, 5, false}} {
		vol := enginetest.RandomVolume(6, 5, tc.nz, 11, tc.i16)
		plane := vol.NX * vol.NY
		out := make([]uint8, plane*vol.NZ)
		for i := range out {
			out[i] = 0xAB // not a label: a plane reported before it is written would show it
		}
		var calls [][2]int
		var snapshots [][]uint8
		var events int
		err := e.Segment(context.Background(), vol, out, engine.Options{
			Slab:    tc.slab,
			OnEvent: func(engine.Event) { events++ },
			OnSlabDone: func(z0, z1 int) {
				calls = append(calls, [2]int{z0, z1})
				snapshots = append(snapshots, slices.Clone(out[z0*plane:z1*plane]))
				if events != len(calls) {
					t.Errorf("OnSlabDone(%d, %d) after %d events, want it after its slab's event", z0, z1, events)
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		next := 0
		for i, c := range calls {
			if c[0] != next || c[1] <= c[0] || c[1] > vol.NZ {
				t.Fatalf("nz %d slab %d: call %d is %v after z %d: calls %v", tc.nz, tc.slab, i, c, next, calls)
			}
			if want := min(c[0]+tc.slab, vol.NZ); c[1] != want {
				t.Errorf("nz %d slab %d: call %v, want it to end at %d", tc.nz, tc.slab, c, want)
			}
			if !slices.Equal(snapshots[i], out[c[0]*plane:c[1]*plane]) {
				t.Errorf("nz %d slab %d: planes %v changed after they were reported done", tc.nz, tc.slab, c)
			}
			next = c[1]
		}
		if next != vol.NZ {
			t.Fatalf("nz %d slab %d: calls %v stop at %d", tc.nz, tc.slab, calls, next)
		}
		if want := enginetest.SegmentWhole(t, e, vol, vol.NZ); !slices.Equal(out, want) {
			t.Errorf("nz %d slab %d: mask differs from the whole-volume mask", tc.nz, tc.slab)
		}
	}
	// Cancelled during the second slab: one call, for the first slab only.
	vol := enginetest.RandomVolume(6, 5, 8, 3, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls [][2]int
	err := e.Segment(ctx, vol, make([]uint8, 6*5*8), engine.Options{Slab: 3, OnSlabDone: func(z0, z1 int) {
		calls = append(calls, [2]int{z0, z1})
		cancel()
	}})
	if !errors.Is(err, context.Canceled) || !slices.Equal(calls, [][2]int{{0, 3}}) {
		t.Fatalf("cancel after slab 0: err %v, calls %v, want context.Canceled after [[0 3]]", err, calls)
	}
}

func TestCPUCancel(t *testing.T) {
	t.Parallel()
	vol := enginetest.RandomVolume(8, 8, 8, 1, false)
	e := New(model.RandomModel(16, 4, 1), 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := e.Segment(ctx, vol, make([]uint8, 512), engine.Options{Slab: 2})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Segment with a cancelled context: %v, want context.Canceled", err)
	}
	// Cancelled during the second slab: the first slab's event comes, then the error.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	slabs := 0
	err = e.Segment(ctx, vol, make([]uint8, 512), engine.Options{Slab: 2, OnEvent: func(engine.Event) { slabs++; cancel() }})
	if !errors.Is(err, context.Canceled) || slabs != 1 {
		t.Fatalf("cancel after slab 0: err %v after %d slabs, want context.Canceled after 1", err, slabs)
	}
}

func TestCPUBadInput(t *testing.T) {
	t.Parallel()
	e := New(model.RandomModel(16, 4, 1), 1)
	good := func() *model.Volume { return &model.Volume{NX: 2, NY: 2, NZ: 2, F32: make([]float32, 8)} }
	cases := []struct {
		name string
		vol  *model.Volume
		out  []uint8
		slab int
	}{
		{"nil volume", nil, make([]uint8, 8), 1},
		{"zero dim", &model.Volume{NX: 0, NY: 2, NZ: 2, F32: []float32{}}, nil, 1},
		{"no data", &model.Volume{NX: 2, NY: 2, NZ: 2}, make([]uint8, 8), 1},
		{"both data", &model.Volume{NX: 2, NY: 2, NZ: 2, F32: make([]float32, 8), I16: make([]int16, 8)}, make([]uint8, 8), 1},
		{"short data", &model.Volume{NX: 2, NY: 2, NZ: 2, I16: make([]int16, 7)}, make([]uint8, 8), 1},
		{"short mask", good(), make([]uint8, 7), 1},
		{"zero slab", good(), make([]uint8, 8), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := e.Segment(context.Background(), tc.vol, tc.out, engine.Options{Slab: tc.slab})
			if !errors.Is(err, engine.ErrBadVolume) {
				t.Errorf("got %v, want ErrBadVolume", err)
			}
		})
	}
	for _, r := range [][3]int{{-1, 1, 16}, {0, 3, 24}, {1, 1, 0}, {0, 1, 3}} {
		if err := e.SegmentSlab(good(), r[0], r[1], make([]uint8, r[2])); !errors.Is(err, engine.ErrBadVolume) {
			t.Errorf("SegmentSlab(%d, %d, out of %d): %v, want ErrBadVolume", r[0], r[1], r[2], err)
		}
	}
}

func TestCPUScratchBytes(t *testing.T) {
	t.Parallel()
	e := New(model.RandomModel(16, 4, 1), 2)
	vol := enginetest.RandomVolume(9, 7, 10, 1, false)
	enginetest.SegmentWhole(t, e, vol, 4)
	held := 4 * (cap(e.xbuf) + cap(e.ebuf))
	for _, ws := range e.scratch {
		held += 4 * (cap(ws.s) + cap(ws.g) + cap(ws.t))
	}
	if got := e.ScratchBytes(9, 7, 4); got != int64(held) {
		t.Errorf("ScratchBytes = %d, buffers hold %d", got, held)
	}
}

func TestFLOPsPerVoxel(t *testing.T) {
	t.Parallel()
	if got := model.FLOPsPerVoxel(16, 4); got != 29200 {
		t.Errorf("FLOPsPerVoxel(16, 4) = %v, want 29200", got)
	}
	// Count the multiply-adds of the reference implementation's loops directly.
	c, k := 6, 3
	g := c / 2
	macs := 27*c + 27*c*c*2 + 2*g*c + g + c + k*c
	if got := model.FLOPsPerVoxel(c, k); got != float64(2*macs) {
		t.Errorf("FLOPsPerVoxel(%d, %d) = %v, want %d", c, k, got, 2*macs)
	}
}

// TestPaddedCounts: workers' counters, allocated one after another, lie a cache line or more
// apart, and cannot grow into their padding.
func TestPaddedCounts(t *testing.T) {
	t.Parallel()
	a, b := paddedCounts(4), paddedCounts(4)
	if len(a) != 4 || cap(a) != 4 {
		t.Fatalf("len %d cap %d, want 4 and 4", len(a), cap(a))
	}
	lo, hi := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	if lo > hi {
		lo, hi = hi, lo
	}
	if gap := hi - (lo + 4*8); gap < 64 {
		t.Errorf("%d bytes between two workers' counters, want 64 or more", gap)
	}
}

// TestSlabBufMapsLargeBuffers: from 4 MiB on, slab buffers are mappings (huge pages advised),
// zeroed, kept while large enough, replaced when not, released by Close; smaller ones come
// from the heap. A volume whose slab buffers are mapped segments as the Go kernels do.
func TestSlabBufMapsLargeBuffers(t *testing.T) {
	t.Parallel()
	e := New(model.RandomModel(16, 4, 3), 2)
	small := e.slabBuf(&e.xmap, nil, 1000)
	if len(small) != 1000 || e.xmap != nil {
		t.Fatalf("a small buffer: len %d, mapped %v", len(small), e.xmap != nil)
	}
	big := e.slabBuf(&e.emap, nil, 2<<20) // 8 MiB
	if len(big) != 2<<20 || e.emap == nil || &e.emap[0] != (*byte)(unsafe.Pointer(&big[0])) {
		t.Fatalf("a large buffer: len %d, mapped %v", len(big), e.emap != nil)
	}
	for _, v := range big[:4096] {
		if v != 0 {
			t.Fatal("a fresh mapping is not zeroed")
		}
	}
	big[0] = 7
	if again := e.slabBuf(&e.emap, big, 1<<20); &again[0] != &big[0] || len(again) != 1<<20 {
		t.Fatal("a buffer large enough was replaced")
	}
	first := &e.emap[0]
	bigger := e.slabBuf(&e.emap, big, 3<<20)
	if len(bigger) != 3<<20 || &e.emap[0] == first {
		t.Fatal("a larger buffer did not replace the mapping")
	}
	e.Close()
	if e.emap != nil || e.xmap != nil {
		t.Fatal("Close left a mapping")
	}
	// 96x80 rows, slabs of 8: e's buffer is 12 x 84 x 100 x 16 float32s (6.4 MiB).
	vectorMasksMatch(t, model.RandomModel(16, 4, 5), enginetest.RandomVolume(96, 80, 10, 9, true), 8)
}
