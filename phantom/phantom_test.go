package phantom

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"voxpipe/io/nifti"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// fixture is the size of the shipped fixtures; most checks run at it.
var fixture = Params{NX: 96, NY: 96, NZ: 64}

func generate(t testing.TB, p Params) *Phantom {
	t.Helper()
	ph, err := Generate(p)
	if err != nil {
		t.Fatalf("Generate(%+v): %v", p, err)
	}
	return ph
}

// cache keeps the fixture-size phantoms that several tests look at.
var cache = map[uint64]*Phantom{}

func fixturePhantom(t testing.TB, seed uint64) *Phantom {
	if ph, ok := cache[seed]; ok {
		return ph
	}
	p := fixture
	p.Seed = seed
	ph := generate(t, p)
	cache[seed] = ph
	return ph
}

func TestSameSeedAnyWorkersSameBytes(t *testing.T) {
	p := Params{NX: 37, NY: 29, NZ: 23, Seed: 7, Workers: 1}
	want := generate(t, p)
	for _, workers := range []int{0, 1, 2, 3, 8, 64} {
		t.Run(fmt.Sprint("workers=", workers), func(t *testing.T) {
			p.Workers = workers
			got := generate(t, p)
			if !slices.Equal(got.Image, want.Image) {
				t.Error("image differs from the one-worker image")
			}
			if !slices.Equal(got.Truth, want.Truth) {
				t.Error("truth differs from the one-worker truth")
			}
			if !reflect.DeepEqual(got.Header, want.Header) {
				t.Error("header differs")
			}
		})
	}
}

func TestSeedsGiveDifferentPhantoms(t *testing.T) {
	a := generate(t, Params{NX: 40, NY: 40, NZ: 24, Seed: 1})
	b := generate(t, Params{NX: 40, NY: 40, NZ: 24, Seed: 2})
	if slices.Equal(a.Truth, b.Truth) {
		t.Error("seeds 1 and 2 give the same truth")
	}
	same := 0
	for i := range a.Image {
		if a.Image[i] == b.Image[i] {
			same++
		}
	}
	if frac := float64(same) / float64(len(a.Image)); frac > 0.05 {
		t.Errorf("seeds 1 and 2 share %.1f%% of image values; the noise should differ", 100*frac)
	}
}

// TestGoldenDigests pins the exact output, so that a change of the generator (which would
// silently change every fixture and benchmark input) shows up here. Refresh with -update.
func TestGoldenDigests(t *testing.T) {
	cases := []Params{
		{NX: 96, NY: 96, NZ: 64, Seed: 1},
		{NX: 33, NY: 47, NZ: 19, Seed: 12345},
		{NX: 64, NY: 64, NZ: 64, Seed: SeedFor(99, 3)},
	}
	var out strings.Builder
	for _, p := range cases {
		ph := generate(t, p)
		fmt.Fprintf(&out, "%dx%dx%d seed=%d image=%x truth=%x\n", p.NX, p.NY, p.NZ, p.Seed,
			sha256.Sum256(ph.ImageBytes()), sha256.Sum256(ph.Truth))
	}
	golden := filepath.Join("testdata", "digests.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if out.String() != string(want) {
		t.Errorf("digests changed (run with -update if intended):\ngot:\n%swant:\n%s", out.String(), want)
	}
}

type classStats struct {
	count [MaxLabel + 1]int
	mean  [MaxLabel + 1]float64
}

func statsOf(ph *Phantom) classStats {
	var s classStats
	var sum [MaxLabel + 1]float64
	for i, l := range ph.Truth {
		s.count[l]++
		sum[l] += float64(ph.Image[i])
	}
	for c := range s.mean {
		s.mean[c] = sum[c] / float64(max(1, s.count[c]))
	}
	return s
}

// regions numbers the 6-connected regions of label in truth (-1 elsewhere).
func regions(truth []uint8, nx, ny, nz int, label uint8) []int32 {
	id := make([]int32, len(truth))
	for i := range id {
		id[i] = -1
	}
	var next int32
	var stack []int
	for start, l := range truth {
		if l != label || id[start] >= 0 {
			continue
		}
		id[start] = next
		stack = append(stack[:0], start)
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			x, y, z := i%nx, i/nx%ny, i/(nx*ny)
			for _, d := range [][4]int{{-1, 0, 0, -1}, {1, 0, 0, 1}, {0, -1, 0, -nx}, {0, 1, 0, nx}, {0, 0, -1, -nx * ny}, {0, 0, 1, nx * ny}} {
				xx, yy, zz := x+d[0], y+d[1], z+d[2]
				if xx < 0 || yy < 0 || zz < 0 || xx >= nx || yy >= ny || zz >= nz {
					continue
				}
				if j := i + d[3]; truth[j] == label && id[j] < 0 {
					id[j] = next
					stack = append(stack, j)
				}
			}
		}
		next++
	}
	return id
}

// components counts the 6-connected regions of label and the size of the largest.
func components(truth []uint8, nx, ny, nz int, label uint8) (n, largest int) {
	var sizes []int
	for _, r := range regions(truth, nx, ny, nz, label) {
		if r < 0 {
			continue
		}
		for int(r) >= len(sizes) {
			sizes = append(sizes, 0)
		}
		sizes[r]++
	}
	if len(sizes) == 0 {
		return 0, 0
	}
	return len(sizes), slices.Max(sizes)
}

func TestFixtureSizeClasses(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, SeedFor(1, 0), SeedFor(1, 1)} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			ph := fixturePhantom(t, seed)
			s := statsOf(ph)
			n := float64(len(ph.Truth))
			head := float64(s.count[Tissue] + s.count[Fluid] + s.count[Lesion])
			checks := []struct {
				what     string
				got      float64
				min, max float64
			}{
				{"background share of volume", float64(s.count[Background]) / n, 0.6, 0.85},
				{"fluid share of head", float64(s.count[Fluid]) / head, 0.01, 0.08},
				{"lesion share of head", float64(s.count[Lesion]) / head, 0.003, 0.04},
			}
			for _, c := range checks {
				if c.got < c.min || c.got > c.max {
					t.Errorf("%s = %.4f, want in [%g, %g]", c.what, c.got, c.min, c.max)
				}
			}
			lesions, _ := components(ph.Truth, fixture.NX, fixture.NY, fixture.NZ, Lesion)
			if lesions < 3 {
				t.Errorf("%d lesions, want several", lesions)
			}
			_, ventricle := components(ph.Truth, fixture.NX, fixture.NY, fixture.NZ, Fluid)
			if ventricle < 300 {
				t.Errorf("largest fluid region has %d voxels, want visible ventricles (>= 300)", ventricle)
			}
			t.Logf("background %.1f%%, fluid %.2f%% and lesion %.2f%% of head, %d lesions, largest ventricle %d voxels",
				100*float64(s.count[0])/n, 100*float64(s.count[Fluid])/head,
				100*float64(s.count[Lesion])/head, lesions, ventricle)
		})
	}
}

func TestClassIntensityOrder(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		s := statsOf(fixturePhantom(t, seed))
		m := s.mean
		t.Logf("seed %d: mean background %.0f, fluid %.0f, tissue %.0f, lesion %.0f", seed, m[0], m[2], m[1], m[3])
		if !(m[Background] < m[Fluid] && m[Fluid] < m[Tissue] && m[Tissue] < m[Lesion]) {
			t.Errorf("seed %d: class means background %.0f, fluid %.0f, tissue %.0f, lesion %.0f not in increasing order",
				seed, m[0], m[2], m[1], m[3])
		}
		// Distinguishable, not merely ordered.
		if m[Tissue] < 2*m[Fluid] || m[Lesion] < 1.15*m[Tissue] || m[Fluid] < 2*m[Background] {
			t.Errorf("seed %d: classes too close: means %v", seed, m)
		}
	}
}

// TestBackgroundIsRician checks the noise model where the signal is zero: a Rayleigh
// magnitude has mean^2/E[m^2] = pi/4 whatever sigma is.
func TestBackgroundIsRician(t *testing.T) {
	ph := fixturePhantom(t, 1)
	var sum, sq, n float64
	// The corners are far from the head: pure noise.
	for z := range fixture.NZ {
		for y := range 8 {
			for x := range 8 {
				v := float64(ph.Image[x+fixture.NX*(y+fixture.NY*z)])
				sum += v
				sq += v * v
				n++
			}
		}
	}
	mean := sum / n
	ratio := mean * mean / (sq / n)
	if math.Abs(ratio-math.Pi/4) > 0.01 {
		t.Errorf("background mean^2/E[m^2] = %.4f, want pi/4 = %.4f (Rayleigh)", ratio, math.Pi/4)
	}
	if mean < 20 || mean > 120 {
		t.Errorf("background mean %.1f, want noise of a few percent of tissue", mean)
	}
}

// TestNeedsContext checks that the truth is learnable from intensities and local context,
// not from intensities alone: the best global thresholds on single voxels get a good share
// wrong (bias field, noise, partial volume, faint lesion edges), while every lesion is
// brighter, and the ventricles darker, than the tissue right around them.
func TestNeedsContext(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		ph := fixturePhantom(t, seed)
		raw := make([]float64, len(ph.Image))
		for i, v := range ph.Image {
			raw[i] = float64(v)
		}
		acc := thresholdAccuracy(raw, ph.Truth)
		if acc > 0.95 {
			t.Errorf("seed %d: global thresholds on single voxels get %.3f right: too easy", seed, acc)
		}
		lesions := localContrast(ph, Lesion)
		for i, r := range lesions {
			if r < 1.08 {
				t.Errorf("seed %d: lesion %d is %.3f times the tissue around it: not visible", seed, i, r)
			}
		}
		fluids := localContrast(ph, Fluid)
		for i, r := range fluids {
			if r > 0.8 {
				t.Errorf("seed %d: fluid region %d is %.3f times the tissue around it: not visible", seed, i, r)
			}
		}
		t.Logf("seed %d: balanced accuracy of global thresholds %.3f; contrast to surrounding tissue: lesions %.2f, fluid %.2f",
			seed, acc, lesions, fluids)
	}
}

// localContrast returns, for each 6-connected region of label, its mean intensity over the
// mean of the tissue voxels within 2 voxels of it.
func localContrast(ph *Phantom, label uint8) []float64 {
	nx, ny, nz := fixture.NX, fixture.NY, fixture.NZ
	region := regions(ph.Truth, nx, ny, nz, label)
	var inSum, inN, outSum, outN []float64
	shellOf := make([]int32, len(ph.Truth)) // region+1 whose shell already counts the voxel
	for i, r := range region {
		if r < 0 {
			continue
		}
		for int(r) >= len(inSum) {
			inSum, inN, outSum, outN = append(inSum, 0), append(inN, 0), append(outSum, 0), append(outN, 0)
		}
		inSum[r] += float64(ph.Image[i])
		inN[r]++
		x, y, z := i%nx, i/nx%ny, i/(nx*ny)
		for zz := max(0, z-2); zz <= min(nz-1, z+2); zz++ {
			for yy := max(0, y-2); yy <= min(ny-1, y+2); yy++ {
				for xx := max(0, x-2); xx <= min(nx-1, x+2); xx++ {
					j := xx + nx*(yy+ny*zz)
					if ph.Truth[j] == Tissue && shellOf[j] != r+1 {
						shellOf[j] = r + 1
						outSum[r] += float64(ph.Image[j])
						outN[r]++
					}
				}
			}
		}
	}
	ratios := make([]float64, len(inSum))
	for r := range ratios {
		ratios[r] = (inSum[r] / inN[r]) / (outSum[r] / outN[r])
	}
	return ratios
}

// thresholdAccuracy classifies the head's voxels (truth != 0) as fluid < t1 <= tissue < t2
// <= lesion with the best t1, t2 (chosen on the truth itself: an upper bound for any
// intensity-only rule of that form) and returns the balanced accuracy over the three classes.
func thresholdAccuracy(v []float64, truth []uint8) float64 {
	type sample struct {
		v float64
		c uint8
	}
	var ss []sample
	var total [MaxLabel + 1]float64
	for i, c := range truth {
		if c != Background {
			ss = append(ss, sample{v[i], c})
			total[c]++
		}
	}
	slices.SortFunc(ss, func(a, b sample) int { return cmpFloat(a.v, b.v) })
	// below[c][i]: voxels of class c among the i lowest.
	below := [MaxLabel + 1][]float64{}
	for c := range below {
		below[c] = make([]float64, len(ss)+1)
		for i, s := range ss {
			below[c][i+1] = below[c][i]
			if s.c == uint8(c) {
				below[c][i+1]++
			}
		}
	}
	best := 0.0
	n := len(ss)
	step := max(1, n/400)
	for i := 0; i <= n; i += step {
		for j := i; j <= n; j += step {
			fluid := below[Fluid][i] / total[Fluid]
			tissue := (below[Tissue][j] - below[Tissue][i]) / total[Tissue]
			lesion := (total[Lesion] - below[Lesion][j]) / total[Lesion]
			best = max(best, (fluid+tissue+lesion)/3)
		}
	}
	return best
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestHeader(t *testing.T) {
	cases := []struct {
		p               Params
		spacing, slices float64
		version         int
	}{
		{Params{NX: 96, NY: 96, NZ: 64, Seed: 5}, 2.5, 3, 1},
		{Params{NX: 256, NY: 256, NZ: 256}, 0.9375, 1.125, 1},
		{Params{NX: 512, NY: 512, NZ: 1000}, 0.46875, 0.5625, 1},
		{Params{NX: 100, NY: 80, NZ: 7}, float64(float32(2.4)), float64(float32(float64(float32(2.4)) * 1.2)), 1},
		{Params{NX: 40000, NY: 2, NZ: 2}, float64(float32(0.006)), float64(float32(float64(float32(0.006)) * 1.2)), 2},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%dx%dx%d", c.p.NX, c.p.NY, c.p.NZ), func(t *testing.T) {
			h := NewHeader(c.p)
			if h.Version != c.version || h.Datatype != nifti.Int16 || h.BitPix != 16 || h.ByteOrder != binary.LittleEndian {
				t.Errorf("version %d datatype %d bitpix %d order %v", h.Version, h.Datatype, h.BitPix, h.ByteOrder)
			}
			if h.Dim != [8]int64{3, int64(c.p.NX), int64(c.p.NY), int64(c.p.NZ), 1, 1, 1, 1} {
				t.Errorf("dim %v", h.Dim)
			}
			if h.NX() != c.p.NX || h.NY() != c.p.NY || h.NZ() != c.p.NZ {
				t.Errorf("NX/NY/NZ %d %d %d", h.NX(), h.NY(), h.NZ())
			}
			if h.PixDim[1] != c.spacing || h.PixDim[2] != c.spacing || h.PixDim[3] != c.slices {
				t.Errorf("pixdim %v, want %g %g %g", h.PixDim[1:4], c.spacing, c.spacing, c.slices)
			}
			if h.XYZTUnits != 2|8 || h.QformCode != 1 || h.SformCode != 1 {
				t.Errorf("units %d qform %d sform %d", h.XYZTUnits, h.QformCode, h.SformCode)
			}
			if want := fmt.Sprintf("seed=%d", c.p.Seed); !strings.Contains(h.Descrip, want) || len(h.Descrip) > 80 {
				t.Errorf("descrip %q, want it to name %s in at most 80 bytes", h.Descrip, want)
			}
			q := qformMatrix(h)
			s := [3][4]float64{h.SrowX, h.SrowY, h.SrowZ}
			for i := range 3 {
				for j := range 4 {
					if math.Abs(q[i][j]-s[i][j]) > 1e-6*(1+math.Abs(s[i][j])) {
						t.Errorf("qform[%d][%d] = %g, sform %g", i, j, q[i][j], s[i][j])
					}
				}
			}
			// RAS: i, j, k increase towards right, anterior, superior; centred on the volume.
			for i := range 3 {
				if s[i][i] <= 0 {
					t.Errorf("axis %d is not RAS: %v", i, s[i])
				}
				centre := s[i][3] + s[i][i]*float64(h.Dim[i+1]-1)/2
				if math.Abs(centre) > 1e-3*(1+math.Abs(s[i][3])) {
					t.Errorf("axis %d: volume centre at %g mm, want 0", i, centre)
				}
			}
			for _, v := range append(h.PixDim[:], h.QoffsetX, h.QoffsetY, h.QoffsetZ) {
				if v != float64(float32(v)) {
					t.Errorf("%v is not float32-exact: a NIfTI-1 round trip would change it", v)
				}
			}
		})
	}
}

// qformMatrix is the NIfTI-1 method-2 affine (quaternion, pixdim, qfac, offsets).
func qformMatrix(h *nifti.Header) [3][4]float64 {
	b, c, d := h.QuaternB, h.QuaternC, h.QuaternD
	a := math.Sqrt(max(0, 1-b*b-c*c-d*d))
	r := [3][3]float64{
		{a*a + b*b - c*c - d*d, 2 * (b*c - a*d), 2 * (b*d + a*c)},
		{2 * (b*c + a*d), a*a + c*c - b*b - d*d, 2 * (c*d - a*b)},
		{2 * (b*d - a*c), 2 * (c*d + a*b), a*a + d*d - c*c - b*b},
	}
	qfac := 1.0
	if h.PixDim[0] < 0 {
		qfac = -1
	}
	scale := [3]float64{h.PixDim[1], h.PixDim[2], h.PixDim[3] * qfac}
	off := [3]float64{h.QoffsetX, h.QoffsetY, h.QoffsetZ}
	var m [3][4]float64
	for i := range 3 {
		for j := range 3 {
			m[i][j] = r[i][j] * scale[j]
		}
		m[i][3] = off[i]
	}
	return m
}

func TestSeedFor(t *testing.T) {
	seen := map[uint64]string{}
	for _, base := range []uint64{0, 1, 2, math.MaxUint64} {
		for i := range 100 {
			s := SeedFor(base, i)
			if s != SeedFor(base, i) {
				t.Fatalf("SeedFor(%d, %d) is not deterministic", base, i)
			}
			key := fmt.Sprintf("base %d index %d", base, i)
			if prev, ok := seen[s]; ok {
				t.Errorf("%s and %s both give seed %d", prev, key, s)
			}
			seen[s] = key
		}
	}
}

func TestSizesScale(t *testing.T) {
	small := newScene(Params{NX: 96, NY: 96, NZ: 64, Seed: 3})
	big := newScene(Params{NX: 512, NY: 512, NZ: 1000, Seed: 3})
	if len(big.lesions) <= 10*len(small.lesions) {
		t.Errorf("%d lesions at 512x512x1000 vs %d at 96x96x64: want many more", len(big.lesions), len(small.lesions))
	}
	// Radii 2-6 voxels at fixture size, each semi-axis within [0.8, 1.25] of the radius.
	for _, b := range small.lesions {
		if b.amin < 2*0.8-1e-9 || b.reach > 6*1.25*(1+b.wobMax)+pvHalf*zBlur+1+1e-9 {
			t.Errorf("fixture-size lesion with smallest semi-axis %.2f and reach %.2f: want radius 2-6", b.amin, b.reach)
		}
	}
	ratio := big.head.reach / small.head.reach
	if ratio < 5 {
		t.Errorf("head reach grows %.1fx from 96 to 512 voxels: it should fill the volume", ratio)
	}
}

func TestOddSizes(t *testing.T) {
	for _, p := range []Params{{NX: 1, NY: 1, NZ: 1}, {NX: 3, NY: 5, NZ: 2}, {NX: 8, NY: 8, NZ: 8}, {NX: 200, NY: 16, NZ: 3}} {
		ph := generate(t, p)
		if len(ph.Image) != p.NX*p.NY*p.NZ || len(ph.Truth) != len(ph.Image) {
			t.Errorf("%+v: %d image and %d truth voxels", p, len(ph.Image), len(ph.Truth))
		}
		for _, l := range ph.Truth {
			if l > MaxLabel {
				t.Fatalf("%+v: label %d", p, l)
			}
		}
	}
}

func TestBadDims(t *testing.T) {
	for _, p := range []Params{{NX: 0, NY: 1, NZ: 1}, {NX: 4, NY: -1, NZ: 4}, {NX: 1 << 40, NY: 1 << 40, NZ: 2}} {
		if _, err := Generate(p); !errors.Is(err, ErrBadDims) {
			t.Errorf("Generate(%+v) = %v, want ErrBadDims", p, err)
		}
	}
}

func TestParseDims(t *testing.T) {
	cases := []struct {
		in         string
		nx, ny, nz int
		ok         bool
	}{
		{"96x96x64", 96, 96, 64, true},
		{" 512X512x1000 ", 512, 512, 1000, true},
		{"96x96", 0, 0, 0, false},
		{"96x0x64", 0, 0, 0, false},
		{"axbxc", 0, 0, 0, false},
		{"1x2x3x4", 0, 0, 0, false},
	}
	for _, c := range cases {
		nx, ny, nz, err := ParseDims(c.in)
		if c.ok != (err == nil) || nx != c.nx || ny != c.ny || nz != c.nz {
			t.Errorf("ParseDims(%q) = %d, %d, %d, %v", c.in, nx, ny, nz, err)
		}
		if err != nil && !errors.Is(err, ErrBadDims) {
			t.Errorf("ParseDims(%q) error %v is not ErrBadDims", c.in, err)
		}
	}
}

func TestImageBytesLittleEndian(t *testing.T) {
	ph := generate(t, Params{NX: 9, NY: 7, NZ: 5, Seed: 1})
	want := make([]byte, 2*len(ph.Image))
	for i, v := range ph.Image {
		binary.LittleEndian.PutUint16(want[2*i:], uint16(v))
	}
	if !bytes.Equal(ph.ImageBytes(), want) {
		t.Error("ImageBytes is not the little-endian image")
	}
}
