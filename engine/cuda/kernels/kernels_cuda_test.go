//go:build cuda

package kernels

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"unsafe"

	"gorgonia.org/cu"
)

// Each wrapper against a float64 Go reference of its layer, on small awkward sizes, with the
// output buffers poisoned and their untouched parts checked. Needs a GPU (cuda tag).

// onGPU runs f on the test's goroutine, locked to its OS thread, with device 0's primary context
// current there and the module loaded.
func onGPU(t testing.TB, f func(m *Module)) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dev := cu.Device(0)
	if err := CheckDevice(dev); err != nil {
		t.Fatalf("device 0: %v", err)
	}
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		t.Fatalf("retain context: %v", err)
	}
	defer dev.ReleasePrimaryCtx()
	if err := cu.SetCurrentContext(ctx); err != nil {
		t.Fatalf("set context: %v", err)
	}
	// The image the engine would load on this device (or EnvKernels'): the fatbin, or a file
	// such as the lab's sm_90a cubin.
	m, err := LoadModuleFor(dev)
	if err != nil {
		t.Fatalf("load module: %v", err)
	}
	defer m.Unload()
	f(m)
}

func randWeights(rng *rand.Rand, c, k int) *Weights {
	g := c / 2
	r := func(n int, bound float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(bound * (2*rng.Float64() - 1))
		}
		return v
	}
	return &Weights{
		Channels: c, Classes: k,
		C1W: r(c*27, math.Sqrt(6.0/27)), C1B: r(c, 0.1),
		C2W: r(c*c*27, math.Sqrt(6.0/float64(27*c))), C2B: r(c, 0.1),
		CGW: r(c*c*27, math.Sqrt(6.0/float64(27*c))), CGB: r(c, 0.1),
		WXW: r(g*c, math.Sqrt(6.0/float64(c))), WXB: r(g, 0.1),
		WGW: r(g*c, math.Sqrt(6.0/float64(c))), WGB: r(g, 0.1),
		PsiW: r(g, math.Sqrt(6.0/float64(g))), PsiB: r(1, 0.1),
		HeadW: r(k*c, math.Sqrt(6.0/float64(c))), HeadB: r(k, 0.1),
	}
}

func alloc(t testing.TB, bytes int64) cu.DevicePtr {
	t.Helper()
	p, err := cu.MemAlloc(bytes)
	if err != nil {
		t.Fatalf("MemAlloc(%d): %v", bytes, err)
	}
	return p
}

func put[T any](t *testing.T, p cu.DevicePtr, v []T) {
	t.Helper()
	if err := cu.MemcpyHtoD(p, unsafe.Pointer(&v[0]), int64(len(v))*int64(unsafe.Sizeof(v[0]))); err != nil {
		t.Fatalf("MemcpyHtoD: %v", err)
	}
}

func get[T any](t *testing.T, v []T, p cu.DevicePtr) {
	t.Helper()
	if err := cu.MemcpyDtoH(unsafe.Pointer(&v[0]), p, int64(len(v))*int64(unsafe.Sizeof(v[0]))); err != nil {
		t.Fatalf("MemcpyDtoH: %v", err)
	}
}

func syncDevice(t *testing.T) {
	t.Helper()
	if err := cu.Synchronize(); err != nil {
		t.Fatalf("synchronize: %v", err)
	}
}

func nanSlice(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.NaN())
	}
	return v
}

func relErr(got float32, want float64) float64 {
	return math.Abs(float64(got)-want) / (1 + math.Abs(want))
}

func TestConv1(t *testing.T) {
	onGPU(t, func(m *Module) {
		for _, asInt16 := range []bool{true, false} {
			rng := rand.New(rand.NewPCG(1, 2))
			const c = 11 // padded to 16: channels 11..15 must come out 0
			w := randWeights(rng, c, 3)
			dw, err := m.SetWeights(w)
			if err != nil {
				t.Fatal(err)
			}
			// Volume of nz=5 planes; the slab's e planes are global -2..4 (nzE=7): two outside.
			const nx, ny, nz, zE0, nzE = 37, 13, 5, -2, 7
			ePlanes := int32(nzE + 3)
			plane := nx * ny
			scale, shift := float32(0.0037), float32(-1.3)
			// Input planes: global zE0-1 .. zE0+nzE (nzE+2 planes); outside the volume: garbage.
			vals := make([]float64, (nzE+2)*plane)
			for i := range vals {
				vals[i] = math.Round(rng.Float64()*4000 - 500)
			}
			in := uploadStored(t, vals, asInt16)
			e := alloc(t, int64(4*Channels*int(ePlanes)*plane))
			put(t, e, nanSlice(Channels*int(ePlanes)*plane))
			if asInt16 {
				err = m.Conv1I16(cu.Stream{}, in, e, nx, ny, nz, zE0, nzE, ePlanes, scale, shift)
			} else {
				err = m.Conv1F32(cu.Stream{}, in, e, nx, ny, nz, zE0, nzE, ePlanes, scale, shift)
			}
			if err != nil {
				t.Fatal(err)
			}
			syncDevice(t)
			got := make([]float32, Channels*int(ePlanes)*plane)
			get(t, got, e)
			x := func(z, y, xx int) float64 { // z global
				if z < 0 || z >= nz || y < 0 || y >= ny || xx < 0 || xx >= nx {
					return 0
				}
				q := z - (zE0 - 1)
				return float64(float32(float32(vals[q*plane+y*nx+xx])*scale) + shift)
			}
			maxErr := checkConv1(t, asInt16, got, w, c, conv1Geom{nx, ny, nz, zE0, nzE, int(ePlanes)}, x)
			t.Logf("conv1 int16=%v: max relative error %.2g", asInt16, maxErr)
			cu.MemFree(in)
			cu.MemFree(e)
			dw.Free()
		}
	})
}

func TestConv2AndConvG(t *testing.T) {
	onGPU(t, func(m *Module) {
		rng := rand.New(rand.NewPCG(3, 4))
		const c = 16
		w := randWeights(rng, c, 4)
		dw, err := m.SetWeights(w)
		if err != nil {
			t.Fatal(err)
		}
		defer dw.Free()
		const nx, ny, nzOut = 45, 19, 6
		ePlanes := EPlanes(nzOut)
		oPlanes := int32(nzOut + 2)
		plane := nx * ny
		ev := make([]float32, Channels*int(ePlanes)*plane)
		for i := range ev {
			ev[i] = float32(math.Max(rng.NormFloat64(), 0))
		}
		e := alloc(t, int64(4*len(ev)))
		defer cu.MemFree(e)
		put(t, e, ev)
		for _, tc := range []struct {
			name   string
			dil    int
			launch func(out cu.DevicePtr) error
			w, b   []float32
		}{
			{"conv2", 1, func(out cu.DevicePtr) error {
				return m.Conv2(cu.Stream{}, e, dw.W2, dw.B2, out, nx, ny, ePlanes, nzOut, oPlanes)
			}, w.C2W, w.C2B},
			{"convg", 2, func(out cu.DevicePtr) error {
				return m.ConvG(cu.Stream{}, e, dw.WG, dw.BG, out, nx, ny, ePlanes, nzOut, oPlanes)
			}, w.CGW, w.CGB},
		} {
			n := Channels * int(oPlanes) * plane
			out := alloc(t, int64(4*n))
			put(t, out, nanSlice(n))
			if err := tc.launch(out); err != nil {
				t.Fatal(err)
			}
			syncDevice(t)
			got := make([]float32, n)
			get(t, got, out)
			cu.MemFree(out)
			maxErr := checkConvCC(t, tc.name, got, ev, tc.w, tc.b, c, tc.dil, convCCGeom{nx, ny, int(ePlanes), nzOut, int(oPlanes)})
			t.Logf("%s: max relative error %.2g", tc.name, maxErr)
		}
	})
}

func TestGateHead(t *testing.T) {
	onGPU(t, func(m *Module) {
		rng := rand.New(rand.NewPCG(5, 6))
		const c, k = 16, 5
		w := randWeights(rng, c, k)
		dw, err := m.SetWeights(w)
		if err != nil {
			t.Fatal(err)
		}
		defer dw.Free()
		// Output planes 6..8 of a volume: plane 8's margins are counted (MarginStride).
		const nx, ny, z0, nzOut, sPlanes = 33, 7, 6, 3, 4
		plane := nx * ny
		n := Channels * sPlanes * plane
		sv, gv := make([]float32, n), make([]float32, n)
		for i := range sv {
			sv[i] = float32(math.Max(2*rng.NormFloat64(), 0))
			gv[i] = float32(math.Max(2*rng.NormFloat64(), 0))
		}
		s, g := alloc(t, int64(4*n)), alloc(t, int64(4*n))
		lab := alloc(t, int64(sPlanes*plane))
		conf := alloc(t, 8*ConfLen)
		defer cu.MemFree(s)
		defer cu.MemFree(g)
		defer cu.MemFree(lab)
		defer cu.MemFree(conf)
		put(t, conf, make([]uint64, ConfLen))
		put(t, s, sv)
		put(t, g, gv)
		poison := make([]uint8, sPlanes*plane)
		for i := range poison {
			poison[i] = 0xEE
		}
		put(t, lab, poison)
		if err := m.GateHead(cu.Stream{}, s, g, lab, conf, nx, ny, z0, nzOut, sPlanes, k); err != nil {
			t.Fatal(err)
		}
		if err := m.CountConfidence(cu.Stream{}, lab, 0, conf, int64(plane), z0, nzOut, k); err != nil {
			t.Fatal(err)
		}
		syncDevice(t)
		got := make([]uint8, sPlanes*plane)
		get(t, got, lab)
		gotConf := make([]uint64, ConfLen)
		get(t, gotConf, conf)
		// The confidence from the float64 logits (confTally).
		var ref confTally
		ref.labels = make([]uint64, k)
		for i := 0; i < sPlanes*plane; i++ {
			if i >= nzOut*plane {
				if got[i] != 0xEE {
					t.Fatalf("label %d beyond the slab written", i)
				}
				continue
			}
			at := func(v []float32, ch int) float64 { return float64(v[ch*sPlanes*plane+i]) }
			l, best := gateHeadRef(w, c, k, func(ch int) float64 { return at(sv, ch) }, func(ch int) float64 { return at(gv, ch) })
			if int(got[i]) != best {
				if got[i] >= k || (l[best]-l[got[i]])/math.Max(1, math.Abs(l[best])) > 1e-5 {
					t.Fatalf("voxel %d: label %d, want %d (logits %v)", i, got[i], best, l)
				}
				ref.ties++
			}
			ref.labels[got[i]]++
			if best > 0 && (z0+i/plane)%MarginStride == 0 {
				ref.addMargin(l, best)
			}
		}
		t.Logf("gate_head: %d voxels, %d near-ties; confidence %v, float64 fg %d margin %d low %d (%d near an edge)", nzOut*plane, ref.ties, gotConf, ref.fg, ref.margin, ref.low, ref.near)
		checkConfidence(t, gotConf, &ref, k)
	})
}

func TestWrapperArgumentChecks(t *testing.T) {
	onGPU(t, func(m *Module) {
		p := alloc(t, 1<<16)
		defer cu.MemFree(p)
		if err := m.Conv1I16(cu.Stream{}, 0, p, 8, 8, 8, 0, 4, 4, 1, 0); err == nil {
			t.Error("Conv1I16 accepted a null input")
		}
		if err := m.Conv2(cu.Stream{}, p, p, p, p, 8, 8, EPlanes(4)-1, 4, 4); err == nil {
			t.Error("Conv2 accepted an e buffer too thin for its tiles")
		}
		if err := m.ConvG(cu.Stream{}, p, p+4, p, p, 8, 8, EPlanes(4), 4, 4); err == nil {
			t.Error("ConvG accepted misaligned weights")
		}
		if err := m.GateHead(cu.Stream{}, p, p, p, p, 8, 8, 0, 4, 4, MaxClasses+1); err == nil {
			t.Error("GateHead accepted too many classes")
		}
		if err := m.GateHead(cu.Stream{}, p, p, p, 0, 8, 8, 0, 4, 4, 4); err == nil {
			t.Error("GateHead accepted a null confidence buffer")
		}
		if err := m.GateHead(cu.Stream{}, p, p, p, p, 8, 8, -1, 4, 4, 4); err == nil {
			t.Error("GateHead accepted a negative first plane")
		}
		if err := m.CountConfidence(cu.Stream{}, p+1, 0, p, 100, 0, 1, 4); err == nil {
			t.Error("CountConfidence accepted misaligned labels")
		}
		if _, err := m.SetWeights(&Weights{Channels: 17, Classes: 2}); err == nil {
			t.Error("SetWeights accepted 17 channels")
		}
		if err := m.Fused(cu.Stream{}, true, p, p, p, p, 8, 8, 8, 4, 5, 5, 1, 0, 4); err == nil {
			t.Error("Fused accepted output planes beyond the volume")
		}
		if err := m.Fused(cu.Stream{}, false, p, p, p, p+8, 8, 8, 8, 0, 4, 4, 1, 0, 4); err == nil {
			t.Error("Fused accepted misaligned weights")
		}
		if err := m.Fused(cu.Stream{}, true, p, 0, p, p, 8, 8, 8, 0, 4, 4, 1, 0, 4); err == nil {
			t.Error("Fused accepted a null label buffer")
		}
		if err := m.Fused(cu.Stream{}, true, p, p, p, p, 8, 8, 8, 0, 4, 0, 1, 0, 4); err == nil {
			t.Error("Fused accepted zChunk 0")
		}
		if err := m.Fused(cu.Stream{}, true, p, p, p, p, 8, 8, 8, 0, 4, 4, float32(math.Inf(1)), 0, 4); err == nil {
			t.Error("Fused accepted an infinite scale")
		}
		if err := m.Fused(cu.Stream{}, true, p, p, p, p, 8, 8, 8, 0, 4, 4, 1, 0, 0); err == nil {
			t.Error("Fused accepted 0 classes")
		}
	})
}
