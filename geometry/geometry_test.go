package geometry

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"voxpipe/internal/testexec"
	"voxpipe/io/nifti"
)

func diag(x, y, z float64) nifti.Affine {
	return nifti.Affine{{x, 0, 0, 0}, {0, y, 0, 0}, {0, 0, z, 0}, {0, 0, 0, 1}}
}

func TestAxcodesSimple(t *testing.T) {
	t.Parallel()
	sag := nifti.Affine{{0, 0, -1, 0}, {1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 0, 1}} // i->A, j->S, k->L
	for _, c := range []struct {
		a    nifti.Affine
		want string
	}{
		{diag(1, 1, 1), "RAS"},
		{diag(-0.5, -0.5, 2), "LPS"},
		{diag(2.5, -2.5, 3), "RPS"},
		{sag, "ASL"},
	} {
		got, err := Axcodes(c.a)
		if err != nil || got != c.want {
			t.Errorf("Axcodes(%v) = %q, %v; want %q", c.a, got, err, c.want)
		}
	}
	if _, err := Axcodes(diag(1, 0, 1)); !errors.Is(err, ErrDegenerate) {
		t.Errorf("singular affine: err %v, want ErrDegenerate", err)
	}
}

// randomAffine is a random rotation near an axis permutation with flips, scaled and sheared a
// little, so the closest canonical orientation is unambiguous but not trivial.
func randomAffine(r *rand.Rand) nifti.Affine {
	perm := r.Perm(3)
	var m nifti.Affine
	for c := range 3 {
		s := 0.5 + 3*r.Float64()
		if r.IntN(2) == 0 {
			s = -s
		}
		m[perm[c]][c] = s
		for row := range 3 {
			m[row][c] += 0.3 * (r.Float64() - 0.5) * math.Abs(s)
		}
		m[c][3] = 100 * (r.Float64() - 0.5)
	}
	m[3][3] = 1
	return m
}

// TestAxcodesMatchesNibabel compares Axcodes with nibabel.aff2axcodes on random affines.
func TestAxcodesMatchesNibabel(t *testing.T) {
	t.Parallel()
	const python = "/usr/bin/python3"
	const noNibabel = "no-nibabel"
	r := rand.New(rand.NewPCG(1, 2))
	var script strings.Builder
	// One interpreter (starting one and importing nibabel is most of the test's time): it
	// says so when nibabel is missing.
	fmt.Fprintf(&script, "try:\n    import numpy as np, nibabel\nexcept ImportError:\n    print(%q)\n    raise SystemExit(0)\n", noNibabel)
	var affines []nifti.Affine
	for range 200 {
		a := randomAffine(r)
		affines = append(affines, a)
		fmt.Fprintf(&script, "print(''.join(nibabel.aff2axcodes(np.array(%s))))\n", pyMatrix(a))
	}
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no %s for nibabel: %v", python, err)
	}
	out, err := testexec.Cmd(t, python, "-c", script.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("nibabel: %v\n%s", err, out)
	}
	lines := strings.Fields(string(out))
	if len(lines) == 1 && lines[0] == noNibabel {
		t.Skipf("no nibabel for %s (apt-get install python3-nibabel)", python)
	}
	if len(lines) != len(affines) {
		t.Fatalf("nibabel printed %d lines for %d affines", len(lines), len(affines))
	}
	for i, a := range affines {
		got, err := Axcodes(a)
		if err != nil || got != lines[i] {
			t.Errorf("affine %v: Axcodes %q (%v), nibabel %q", a, got, err, lines[i])
		}
	}
}

func pyMatrix(a nifti.Affine) string {
	var rows []string
	for _, row := range a {
		rows = append(rows, fmt.Sprintf("[%v,%v,%v,%v]", row[0], row[1], row[2], row[3]))
	}
	return "[" + strings.Join(rows, ",") + "]"
}

func apply(a nifti.Affine, i, j, k float64) [3]float64 {
	var w [3]float64
	for r := range 3 {
		w[r] = a[r][0]*i + a[r][1]*j + a[r][2]*k + a[r][3]
	}
	return w
}

// TestReorient checks, for every orientation reached from random affines, that the reoriented
// grid is in the target orientation, that each voxel keeps its world position (value moved with
// its coordinates) and that Inverse brings the volume back exactly.
func TestReorient(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	dims := [3]int{5, 7, 4}
	n := dims[0] * dims[1] * dims[2]
	src := make([]int32, n)
	for i := range src {
		src[i] = int32(i)
	}
	for range 100 {
		a := randomAffine(r)
		from, err := Axcodes(a)
		if err != nil {
			t.Fatal(err)
		}
		ro, err := NewReorient(from, Canonical, dims)
		if err != nil {
			t.Fatal(err)
		}
		dst := make([]int32, n)
		Apply(ro, dst, src)
		na := ro.Affine(a)
		if got, err := Axcodes(na); err != nil || got != Canonical {
			t.Fatalf("%s: reoriented affine is %q (%v), want %s", from, got, err, Canonical)
		}
		od := ro.OutDims()
		for o := range n {
			ox, oy, oz := o%od[0], o/od[0]%od[1], o/(od[0]*od[1])
			v := int(dst[o])
			ix, iy, iz := v%dims[0], v/dims[0]%dims[1], v/(dims[0]*dims[1])
			w1 := apply(na, float64(ox), float64(oy), float64(oz))
			w0 := apply(a, float64(ix), float64(iy), float64(iz))
			for k := range 3 {
				if math.Abs(w1[k]-w0[k]) > 1e-9 {
					t.Fatalf("%s: output voxel %v holds input voxel %v: world %v vs %v", from, [3]int{ox, oy, oz}, [3]int{ix, iy, iz}, w1, w0)
				}
			}
		}
		back := make([]int32, n)
		Apply(ro.Inverse(), back, dst)
		for i := range back {
			if back[i] != src[i] {
				t.Fatalf("%s: Inverse does not undo the reorientation at %d", from, i)
			}
		}
		labels := make([]uint8, n)
		for i := range labels {
			labels[i] = uint8(dst[i] % 251)
		}
		got := make([]uint8, n)
		LabelsBack(got, labels, ro, nil)
		for i := range got {
			if got[i] != uint8(src[i]%251) {
				t.Fatalf("%s: LabelsBack without resampling differs from the inverse at %d", from, i)
			}
		}
	}
	if _, err := NewReorient("RAX", "RAS", dims); !errors.Is(err, ErrAxcodes) {
		t.Errorf("bad codes: %v", err)
	}
	if _, err := NewReorient("RRS", "RAS", dims); !errors.Is(err, ErrAxcodes) {
		t.Errorf("repeated axis: %v", err)
	}
}

func TestResampleIdentityWithinTolerance(t *testing.T) {
	t.Parallel()
	rs, err := NewResample([3]int{4, 3, 2}, [3]float64{2.6, 2.4, 3.2}, [3]float64{2.5, 2.5, 3})
	if err != nil {
		t.Fatal(err)
	}
	if !rs.Identity() {
		t.Fatalf("within tolerance: Out %v, want In", rs.Out)
	}
	src := []int16{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24}
	for i, v := range Image(rs, src) {
		if v != float32(src[i]) {
			t.Fatalf("identity resample changed voxel %d: %v", i, v)
		}
	}
}

// TestResampleLinear: a linear ramp stays the same ramp (in world coordinates) when upsampled or
// downsampled, away from the edges where the filter is cut. Upsampling is exact; the sampled
// tent of a non-integer downsampling factor is not quite centred on the output voxel, so there
// the ramp may move by up to 2 % of an input voxel.
func TestResampleLinear(t *testing.T) {
	t.Parallel()
	in := [3]int{40, 6, 30}
	inMM := [3]float64{1, 2.5, 1.25}
	want := [3]float64{2.5, 2.5, 2.5} // x downsampled 2.5x, y kept, z downsampled 2x
	src := make([]float32, in[0]*in[1]*in[2])
	world := func(i, a int, mm float64) float64 { return (float64(i) + 0.5) * mm } // from the grid's face
	f := func(x, y, z float64) float64 { return 3*x - 2*y + 0.5*z + 7 }
	for z := range in[2] {
		for y := range in[1] {
			for x := range in[0] {
				src[x+in[0]*(y+in[1]*z)] = float32(f(world(x, 0, inMM[0]), world(y, 1, inMM[1]), world(z, 2, inMM[2])))
			}
		}
	}
	for _, c := range []struct {
		name string
		want [3]float64
	}{{"down", want}, {"up", [3]float64{0.5, 1, 0.625}}} {
		rs, err := NewResample(in, inMM, c.want)
		if err != nil {
			t.Fatal(err)
		}
		out := Image(rs, src)
		om := rs.OutSpacing(inMM)
		if got := len(out); got != rs.Out[0]*rs.Out[1]*rs.Out[2] {
			t.Fatalf("%s: %d values for %v", c.name, got, rs.Out)
		}
		margin := 3
		my := margin // y is kept in "down": no edge there
		if rs.Out[1] == in[1] {
			my = 0
		}
		checked := 0
		for z := margin; z < rs.Out[2]-margin; z++ {
			for y := my; y < rs.Out[1]-my; y++ {
				for x := margin; x < rs.Out[0]-margin; x++ {
					got := out[x+rs.Out[0]*(y+rs.Out[1]*z)]
					exp := f(world(x, 0, om[0]), world(y, 1, om[1]), world(z, 2, om[2]))
					tol := 1e-4 * math.Abs(exp)
					if c.name == "down" {
						tol = 0.02 * (3*inMM[0] + 2*inMM[1] + 0.5*inMM[2]) // the ramp's change over one voxel
					}
					if math.Abs(float64(got)-exp) > tol+1e-4 {
						t.Fatalf("%s: out[%d,%d,%d] = %v, want %v", c.name, x, y, z, got, exp)
					}
					checked++
				}
			}
		}
		if checked < 100 {
			t.Fatalf("%s: only %d voxels checked", c.name, checked)
		}
	}
}

// TestResampleAntialias: downsampling a checkerboard of period 2 gives its mean, not an alias.
func TestResampleAntialias(t *testing.T) {
	t.Parallel()
	in := [3]int{64, 1, 1}
	src := make([]int16, 64)
	for i := range src {
		src[i] = int16(100 * (i % 2))
	}
	rs, err := NewResample(in, [3]float64{1, 1, 1}, [3]float64{4, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	out := Image(rs, src)
	for i := 1; i < len(out)-1; i++ {
		if math.Abs(float64(out[i])-50) > 1 {
			t.Fatalf("downsampled checkerboard: out[%d] = %v, want ~50: %v", i, out[i], out)
		}
	}
}

// TestLabelsBackNearest: labels on a 2x coarser grid come back so that each fine voxel takes
// the coarse voxel containing its centre, through a flip too.
func TestLabelsBackNearest(t *testing.T) {
	t.Parallel()
	dims := [3]int{8, 6, 4}
	ro, err := NewReorient("LAS", "RAS", dims)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := NewResample(ro.OutDims(), [3]float64{1, 1, 1}, [3]float64{2, 2, 2})
	if err != nil {
		t.Fatal(err)
	}
	if rs.Out != [3]int{4, 3, 2} {
		t.Fatalf("Out %v", rs.Out)
	}
	coarse := make([]uint8, 4*3*2)
	for i := range coarse {
		coarse[i] = uint8(i)
	}
	fine := make([]uint8, 8*6*4)
	LabelsBack(fine, coarse, ro, rs)
	for z := range 4 {
		for y := range 6 {
			for x := range 8 {
				cx := (7 - x) / 2 // the file's x runs right to left
				want := uint8(cx + 4*(y/2+3*(z/2)))
				if got := fine[x+8*(y+6*z)]; got != want {
					t.Fatalf("fine[%d,%d,%d] = %d, want %d", x, y, z, got, want)
				}
			}
		}
	}
}

// TestFlipXY: the in-place flip equals Apply of the reorientation, on any stack of planes, and
// undoes itself.
func TestFlipXY(t *testing.T) {
	t.Parallel()
	dims := [3]int{7, 5, 4}
	n := dims[0] * dims[1] * dims[2]
	src := make([]int32, n)
	for i := range src {
		src[i] = int32(i)
	}
	for _, from := range []string{"LAS", "RPS", "LPS"} {
		ro, err := NewReorient(from, Canonical, dims)
		if err != nil {
			t.Fatal(err)
		}
		if !ro.InPlaceXY() {
			t.Fatalf("%s: not an in-place flip", from)
		}
		want := make([]int32, n)
		Apply(ro, want, src)
		got := slices.Clone(src)
		FlipXY(got, dims[0], dims[1], ro.Flip[0], ro.Flip[1])
		if !slices.Equal(got, want) {
			t.Fatalf("%s: FlipXY differs from Apply", from)
		}
		FlipXY(got[2*35:], dims[0], dims[1], ro.Flip[0], ro.Flip[1]) // planes 2.. back
		FlipXY(got[:2*35], dims[0], dims[1], ro.Flip[0], ro.Flip[1]) // planes 0, 1 back
		if !slices.Equal(got, src) {
			t.Fatalf("%s: FlipXY twice is not the identity", from)
		}
	}
	for _, from := range []string{"RAS", "RAI", "ASR"} {
		if ro, _ := NewReorient(from, Canonical, dims); ro.InPlaceXY() {
			t.Errorf("%s: InPlaceXY, want false", from)
		}
	}
}
