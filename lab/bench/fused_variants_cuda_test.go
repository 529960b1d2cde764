//go:build cuda

package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"gorgonia.org/cu"

	"voxpipe/engine/cuda/kernels"
)

// TestFusedVariants times builds of engine/cuda/kernels/fused.cu with other compile-time settings
// (VOXPIPE_FUSED_VARIANTS="name=path.fatbin,...", built by scripts/gpu-build.sh) against the
// committed fused kernel on one 512x512 slab of 64 planes with a random smooth int16 input:
// median of several launches, scaled to a 1000-plane volume. Variants named full-* must give the
// committed kernel's labels bit for bit; prec-* change the arithmetic (their labels may differ at
// near-ties); skip-* leave a stage out (their labels are wrong by design) to show what the stage
// costs. Skipped without the variable.
func TestFusedVariants(t *testing.T) {
	spec := os.Getenv("VOXPIPE_FUSED_VARIANTS")
	if spec == "" {
		t.Skip("VOXPIPE_FUSED_VARIANTS not set")
	}
	runs := 7
	if os.Getenv("VOXPIPE_VARIANT_RUNS") == "1" {
		runs = 1 // under ncu
	}
	onGPU(t, func(m *kernels.Module) {
		rng := rand.New(rand.NewPCG(9, 10))
		dw, err := m.SetWeights(randWeights(rng, 16, 4))
		if err != nil {
			t.Fatal(err)
		}
		defer dw.Free()
		const nx, ny, nz, nzOut = 512, 512, 64, 64
		plane := nx * ny
		in := smoothInput(rng, nx, plane, nzOut+6)
		din := alloc(t, int64(2*len(in)))
		defer cu.MemFree(din)
		put(t, din, in)
		lab := alloc(t, int64(nzOut*plane))
		defer cu.MemFree(lab)
		logits := alloc(t, kernels.FusedLogitBytes(nzOut, int64(plane), 4)) // not checked here
		defer cu.MemFree(logits)
		lt := newLaunchTimer(t)
		defer lt.close()
		const scale, shift = float32(1.0 / 400), float32(-3)

		time1 := func(name string, fn cu.Function, rows, threads, smem int, zChunk int32) (time.Duration, []uint8) {
			// Launched directly: each build has its own geometry (fused_geometry).
			a := new(kernels.Args).Ptr(din).Ptr(lab).Ptr(logits).Ptr(dw.Fused).I32(nx).I32(ny).I32(nz).I32(0).I32(nzOut).I32(zChunk).F32(scale).F32(shift).I32(4)
			ms, err := lt.times(runs+1, func() error { return cu.MemsetD8(lab, 0xEE, int64(nzOut*plane)) },
				func(st cu.Stream) error {
					return kernels.LaunchShared(name, fn, [3]int{ceilDiv(nx, kernels.FusedTileX), ceilDiv(ny, int32(rows)), ceilDiv(nzOut, zChunk)}, [3]int{threads, 1, 1}, smem, st, a)
				})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out := make([]uint8, nzOut*plane)
			get(t, out, lab)
			return time.Duration(medianMS(ms) * float64(time.Millisecond)), out
		}
		g := m.FusedGeometry()
		_, fusedI16 := m.FusedKernel(true, 4)
		base, want := time1("fused_i16", fusedI16, int(g.Rows), int(g.Threads), int(g.SharedBytes), nzOut)
		perVolume := func(d time.Duration) float64 { return float64(d) / 1e6 * 1000 / nzOut }
		t.Logf("TABLE|variant committed (rows %d)|%.3f ms per 64-plane slab, %.1f ms per 1000 planes", g.Rows, float64(base)/1e6, perVolume(base))
		// Thinner z-chunks: more blocks of fewer steps each. Every block pays the start (weights
		// into shared memory, the first x planes) and 4 warm-up e planes; the per-block cost
		// follows from these times (docs/perf.md, seventh session).
		for _, c := range []int32{32, 16, 8} {
			d, got := time1("fused_i16", fusedI16, int(g.Rows), int(g.Threads), int(g.SharedBytes), c)
			if !slices.Equal(got, want) {
				t.Errorf("committed kernel at zChunk %d: labels differ from zChunk %d", c, nzOut)
			}
			t.Logf("TABLE|committed, zChunk %d (%d blocks of %d steps)|%.3f ms per slab", c, ceilDiv(nx, kernels.FusedTileX)*ceilDiv(ny, g.Rows)*ceilDiv(nzOut, c), c+4, float64(d)/1e6)
		}
		for _, v := range strings.Split(spec, ",") {
			name, path, ok := strings.Cut(v, "=")
			if !ok {
				t.Fatalf("bad variant %q (want name=path)", v)
			}
			timeFusedVariant(t, time1, name, path, nzOut, base, want, perVolume)
		}
	})
}

// smoothInput is planes planes of a random smooth int16 volume nx voxels wide.
func smoothInput(rng *rand.Rand, nx, plane, planes int) []int16 {
	in := make([]int16, planes*plane)
	for i := range in {
		z, y, x := i/plane, i%plane/nx, i%nx
		v := 1200 + 400*math.Sin(0.07*float64(x)+0.3)*math.Cos(0.05*float64(y)) + 300*math.Sin(0.09*float64(z)) + 60*rng.NormFloat64()
		in[i] = int16(v)
	}
	return in
}

// fusedTimer times a fused kernel build launched with its own geometry over the test's slab at
// z-chunks of zChunk planes, and returns the median time and the labels.
type fusedTimer func(name string, fn cu.Function, rows, threads, smem int, zChunk int32) (time.Duration, []uint8)

// timeFusedVariant loads the variant fatbin at path, times its fused_i16 (whole slabs of nzOut
// planes) against the committed kernel's time base and labels want, and reports it; full-*
// variants must give want's labels.
func timeFusedVariant(t *testing.T, time1 fusedTimer, name, path string, nzOut int32, base time.Duration, want []uint8, perVolume func(time.Duration) float64) {
	t.Helper()
	image, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mod := loadFatbin(t, path, image)
	defer mod.Unload()
	fn, err := mod.Function("fused_i16")
	if err != nil {
		t.Fatal(err)
	}
	vg, err := kernels.ReadFusedGeometry(mod)
	if err != nil {
		t.Fatal(err)
	}
	if err := kernels.SetSharedMemory(fn, int(vg.SharedBytes)); err != nil {
		t.Fatal(err)
	}
	rows := int(vg.Rows)
	d, got := time1(name, fn, rows, int(vg.Threads), int(vg.SharedBytes), nzOut)
	same := "labels identical"
	if i := slices.Compare(got, want); i != 0 {
		n := 0
		for j := range got {
			if got[j] != want[j] {
				n++
			}
		}
		same = fmt.Sprintf("labels differ at %d voxels", n)
		if strings.HasPrefix(name, "full") {
			t.Errorf("variant %s: %s", name, same)
		}
	}
	t.Logf("TABLE|variant %s (rows %d)|%.3f ms per slab, %.1f ms per 1000 planes (%+.0f%%); %s", name, rows,
		float64(d)/1e6, perVolume(d), 100*(float64(d)/float64(base)-1), same)
}
