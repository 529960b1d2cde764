package volstats

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"voxpipe/io/nifti"
	"voxpipe/model"
)

var fourLabels = []model.Label{
	{Value: 0, Name: "background", Color: "#000000"},
	{Value: 1, Name: "tissue", Color: "#c0c0c0"},
	{Value: 2, Name: "fluid", Color: "#3070ff"},
	{Value: 3, Name: "lesion", Color: "#ff3030"},
}

// reference computes the statistics the obvious way: counts, boxes and two-pass moments voxel
// by voxel, components by a breadth-first flood fill over the 26 neighbours of each voxel.
func reference[T int16 | float32](t *testing.T, mask []uint8, image []T, g Grid, labels []model.Label) []Stats {
	t.Helper()
	nx, ny, nz := g.Dims[0], g.Dims[1], g.Dims[2]
	slope, inter := g.Slope, g.Inter
	if slope == 0 {
		slope, inter = 1, 0
	}
	out := make([]Stats, len(labels))
	for li, l := range labels {
		s := Stats{Value: l.Value, Name: l.Name, BBoxMin: [3]int{-1, -1, -1}, BBoxMax: [3]int{-1, -1, -1},
			IntensityMean: math.NaN(), IntensityStd: math.NaN()}
		var sum float64
		for i, v := range mask {
			if int(v) != l.Value {
				continue
			}
			c := [3]int{i % nx, i / nx % ny, i / (nx * ny)}
			for a := range 3 {
				if s.Voxels == 0 || c[a] < s.BBoxMin[a] {
					s.BBoxMin[a] = c[a]
				}
				if s.Voxels == 0 || c[a] > s.BBoxMax[a] {
					s.BBoxMax[a] = c[a]
				}
			}
			s.Voxels++
			if len(image) > 0 {
				if x := float64(image[i])*slope + inter; !math.IsNaN(x) && !math.IsInf(x, 0) {
					sum += x
					s.IntensityVoxels++
				}
			}
		}
		if s.IntensityVoxels > 0 {
			s.IntensityMean = sum / float64(s.IntensityVoxels)
			var ss float64
			for i, v := range mask {
				if int(v) == l.Value {
					if x := float64(image[i])*slope + inter; !math.IsNaN(x) && !math.IsInf(x, 0) {
						ss += (x - s.IntensityMean) * (x - s.IntensityMean)
					}
				}
			}
			s.IntensityStd = math.Sqrt(ss / float64(s.IntensityVoxels))
		}
		s.VolumeML = float64(s.Voxels) * g.VoxelMM[0] * g.VoxelMM[1] * g.VoxelMM[2] / 1000
		seen := make([]bool, len(mask))
		for start, v := range mask {
			if int(v) != l.Value || seen[start] {
				continue
			}
			s.Components++
			seen[start] = true
			queue := []int{start}
			for len(queue) > 0 {
				i := queue[0]
				queue = queue[1:]
				x, y, z := i%nx, i/nx%ny, i/(nx*ny)
				for dz := -1; dz <= 1; dz++ {
					for dy := -1; dy <= 1; dy++ {
						for dx := -1; dx <= 1; dx++ {
							X, Y, Z := x+dx, y+dy, z+dz
							if X < 0 || Y < 0 || Z < 0 || X >= nx || Y >= ny || Z >= nz {
								continue
							}
							j := (Z*ny+Y)*nx + X
							if !seen[j] && int(mask[j]) == l.Value {
								seen[j] = true
								queue = append(queue, j)
							}
						}
					}
				}
			}
		}
		out[li] = s
	}
	return out
}

func near(a, b, tol float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func compare(t *testing.T, what string, got *Volume, want []Stats) {
	t.Helper()
	if len(got.Labels) != len(want) {
		t.Fatalf("%s: %d labels, want %d", what, len(got.Labels), len(want))
	}
	for i, w := range want {
		g := got.Labels[i]
		if g.Value != w.Value || g.Name != w.Name || g.Voxels != w.Voxels || g.BBoxMin != w.BBoxMin ||
			g.BBoxMax != w.BBoxMax || g.Components != w.Components || g.IntensityVoxels != w.IntensityVoxels {
			t.Fatalf("%s: label %d:\n got  %+v\n want %+v", what, w.Value, g, w)
		}
		if !near(g.VolumeML, w.VolumeML, 1e-12) || !near(g.IntensityMean, w.IntensityMean, 1e-9) ||
			!near(g.IntensityStd, w.IntensityStd, 1e-7) {
			t.Fatalf("%s: label %d moments:\n got  %+v\n want %+v", what, w.Value, g, w)
		}
	}
}

// randomMask draws one of three kinds of structure: independent voxels (many tiny components
// touching along edges and corners), spheres (blobs, some merging), or sparse single voxels.
func randomMask(r *rand.Rand, nx, ny, nz, labels int) []uint8 {
	m := make([]uint8, nx*ny*nz)
	switch r.IntN(3) {
	case 0:
		p := r.Float64()
		for i := range m {
			if r.Float64() < p {
				m[i] = uint8(1 + r.IntN(labels-1))
			}
		}
	case 1:
		for range 1 + r.IntN(8) {
			cx, cy, cz := r.Float64()*float64(nx), r.Float64()*float64(ny), r.Float64()*float64(nz)
			rad := 0.5 + r.Float64()*float64(max(nx, ny, nz))/3
			l := uint8(1 + r.IntN(labels-1))
			for z := range nz {
				for y := range ny {
					for x := range nx {
						dx, dy, dz := float64(x)-cx, float64(y)-cy, float64(z)-cz
						if dx*dx+dy*dy+dz*dz <= rad*rad {
							m[(z*ny+y)*nx+x] = l
						}
					}
				}
			}
		}
	default:
		for range r.IntN(len(m)/4 + 1) {
			m[r.IntN(len(m))] = uint8(1 + r.IntN(labels-1))
		}
	}
	return m
}

func TestRandomMasksMatchReference(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		nx, ny, nz := 1+r.IntN(19), 1+r.IntN(13), 1+r.IntN(17)
		mask := randomMask(r, nx, ny, nz, len(fourLabels))
		g := Grid{Dims: [3]int{nx, ny, nz}, VoxelMM: [3]float64{0.5 + r.Float64(), 1, 1.5}}
		workers := 1 + r.IntN(6)
		if trial%2 == 0 {
			img := make([]int16, len(mask))
			for i := range img {
				img[i] = int16(r.IntN(4000) - 1000 + 300*int(mask[i]))
			}
			g.Slope, g.Inter = []float64{0, 1, 2.5}[r.IntN(3)], float64(r.IntN(100))
			got, err := Compute(mask, img, g, fourLabels, Options{Workers: workers})
			if err != nil {
				t.Fatal(err)
			}
			compare(t, "int16", got, reference(t, mask, img, g, fourLabels))
		} else {
			img := make([]float32, len(mask))
			for i := range img {
				img[i] = float32(r.NormFloat64()*50 + 1000)
				if r.IntN(20) == 0 {
					img[i] = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}[r.IntN(3)]
				}
			}
			got, err := Compute(mask, img, g, fourLabels, Options{Workers: workers})
			if err != nil {
				t.Fatal(err)
			}
			compare(t, "float32", got, reference(t, mask, img, g, fourLabels))
		}
	}
}

// at builds a mask of the given dims from voxel coordinates and their labels.
func at(dims [3]int, voxels map[[3]int]uint8) []uint8 {
	m := make([]uint8, dims[0]*dims[1]*dims[2])
	for c, l := range voxels {
		m[(c[2]*dims[1]+c[1])*dims[0]+c[0]] = l
	}
	return m
}

func TestComponentsByHand(t *testing.T) {
	t.Parallel()
	dims := [3]int{6, 5, 4}
	for _, tc := range []struct {
		name   string
		voxels map[[3]int]uint8
		want   [4]int // components per label 0..3
	}{
		{"corner-only touch is one component", map[[3]int]uint8{{1, 1, 1}: 1, {2, 2, 2}: 1}, [4]int{1, 1, 0, 0}},
		{"edge-only touch is one component", map[[3]int]uint8{{1, 1, 1}: 1, {2, 2, 1}: 1}, [4]int{1, 1, 0, 0}},
		{"two apart are two", map[[3]int]uint8{{0, 0, 0}: 1, {2, 0, 0}: 1}, [4]int{1, 2, 0, 0}},
		{"a different label between does not join", map[[3]int]uint8{{0, 0, 0}: 1, {1, 0, 0}: 2, {2, 0, 0}: 1}, [4]int{1, 2, 1, 0}},
		{"opposite corners of the volume", map[[3]int]uint8{{0, 0, 0}: 3, {5, 4, 3}: 3}, [4]int{1, 0, 0, 2}},
		{"a diagonal chain through every plane", map[[3]int]uint8{{0, 0, 0}: 2, {1, 1, 1}: 2, {2, 2, 2}: 2, {3, 3, 3}: 2}, [4]int{1, 0, 1, 0}},
		// A wall of label 1 filling plane z=2 cuts the background in two.
		{"a wall splits the background", wall(dims, 2), [4]int{2, 1, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mask := at(dims, tc.voxels)
			g := Grid{Dims: dims, VoxelMM: [3]float64{1, 1, 1}}
			for workers := 1; workers <= 4; workers++ { // 4 workers: one plane per z-range
				v, err := Compute[int16](mask, nil, g, fourLabels, Options{Workers: workers})
				if err != nil {
					t.Fatal(err)
				}
				for l, want := range tc.want {
					if got := v.Labels[l].Components; got != want {
						t.Errorf("workers %d: label %d: %d components, want %d", workers, l, got, want)
					}
				}
			}
		})
	}
}

func wall(dims [3]int, z int) map[[3]int]uint8 {
	m := map[[3]int]uint8{}
	for y := range dims[1] {
		for x := range dims[0] {
			m[[3]int{x, y, z}] = 1
		}
	}
	return m
}

func TestBorderAndAbsentLabel(t *testing.T) {
	t.Parallel()
	dims := [3]int{4, 3, 5}
	mask := at(dims, map[[3]int]uint8{{3, 0, 0}: 1, {3, 2, 4}: 1, {0, 1, 2}: 1})
	v, err := Compute[float32](mask, nil, Grid{Dims: dims, VoxelMM: [3]float64{2, 2, 2}}, fourLabels, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l1 := v.Labels[1]
	if l1.Voxels != 3 || l1.BBoxMin != [3]int{0, 0, 0} || l1.BBoxMax != [3]int{3, 2, 4} || l1.Components != 3 {
		t.Errorf("label 1 = %+v", l1)
	}
	if l1.VolumeML != 3*8.0/1000 {
		t.Errorf("label 1: %v mL, want 3 voxels of 8 mm³", l1.VolumeML)
	}
	if !math.IsNaN(l1.IntensityMean) || l1.IntensityVoxels != 0 {
		t.Errorf("no image: intensity %v over %d voxels, want NaN over 0", l1.IntensityMean, l1.IntensityVoxels)
	}
	for _, l := range v.Labels[2:] {
		if l.Voxels != 0 || l.Components != 0 || l.BBoxMin != [3]int{-1, -1, -1} || l.BBoxMax != [3]int{-1, -1, -1} || l.VolumeML != 0 {
			t.Errorf("absent label %d = %+v", l.Value, l)
		}
	}
	if bg := v.Labels[0]; bg.Voxels != 4*3*5-3 || bg.BBoxMin != [3]int{0, 0, 0} || bg.BBoxMax != [3]int{3, 2, 4} || bg.Components != 1 {
		t.Errorf("background = %+v", bg)
	}
}

// TestVolumeIsVoxelsTimesVoxelVolume reads a header's geometry: metres as units, a negative
// and a zero pixdim, and checks volumes are counts times the voxel volume and add up.
func TestVolumeIsVoxelsTimesVoxelVolume(t *testing.T) {
	t.Parallel()
	h := &nifti.Header{Dim: [8]int64{3, 7, 6, 5, 1, 1, 1, 1}, PixDim: [8]float64{1, -0.0005, 0.002, 0, 1},
		XYZTUnits: 1, SclSlope: 2, SclInter: -10}
	g := GridOf(h)
	if g.Dims != [3]int{7, 6, 5} || g.VoxelMM != [3]float64{0.5, 2, 1000} || g.Slope != 2 || g.Inter != -10 {
		t.Fatalf("GridOf = %+v", g)
	}
	r := rand.New(rand.NewPCG(3, 4))
	mask := randomMask(r, 7, 6, 5, 4)
	img := make([]int16, len(mask))
	for i := range img {
		img[i] = int16(i % 100)
	}
	v, err := Compute(mask, img, g, fourLabels, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var voxels int64
	var ml float64
	for _, l := range v.Labels {
		voxels += l.Voxels
		ml += l.VolumeML
		if want := float64(l.Voxels) * 0.5 * 2 * 1000 / 1000; l.VolumeML != want {
			t.Errorf("label %d: %v mL, want %d voxels x 1 mL", l.Value, l.VolumeML, l.Voxels)
		}
	}
	if voxels != int64(len(mask)) || !near(ml, float64(len(mask)), 1e-12) {
		t.Errorf("labels add up to %d voxels, %v mL; want %d of each", voxels, ml, len(mask))
	}
	compare(t, "scaled", v, reference(t, mask, img, g, fourLabels))
}

func TestWorkersDoNotChangeTheResult(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	mask := randomMask(r, 40, 30, 37, 4)
	img := make([]float32, len(mask))
	for i := range img {
		img[i] = float32(r.NormFloat64()*1e3 + 1e5)
	}
	g := Grid{Dims: [3]int{40, 30, 37}, VoxelMM: [3]float64{1, 1, 1}}
	one, err := Compute(mask, img, g, fourLabels, Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []int{2, 3, 16, 64} {
		v, err := Compute(mask, img, g, fourLabels, Options{Workers: w})
		if err != nil {
			t.Fatal(err)
		}
		for i := range v.Labels {
			a, b := one.Labels[i], v.Labels[i]
			if a.IntensityMean != b.IntensityMean || a.IntensityStd != b.IntensityStd || a.Components != b.Components {
				t.Errorf("workers %d: label %d = %+v, with 1 worker %+v", w, i, b, a)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	g := Grid{Dims: [3]int{2, 2, 2}, VoxelMM: [3]float64{1, 1, 1}}
	mask := make([]uint8, 8)
	if _, err := Compute(mask[:7], []int16(nil), g, fourLabels, Options{}); !errors.Is(err, ErrDims) {
		t.Errorf("short mask: %v, want ErrDims", err)
	}
	if _, err := Compute(mask, make([]int16, 9), g, fourLabels, Options{}); !errors.Is(err, ErrDims) {
		t.Errorf("long image: %v, want ErrDims", err)
	}
	if _, err := Compute(mask, []int16(nil), Grid{Dims: [3]int{0, 2, 2}}, fourLabels, Options{}); !errors.Is(err, ErrDims) {
		t.Errorf("zero dim: %v, want ErrDims", err)
	}
	dup := []model.Label{{Value: 0, Name: "a"}, {Value: 0, Name: "b"}}
	if _, err := Compute(mask, []int16(nil), g, dup, Options{}); !errors.Is(err, ErrLabels) {
		t.Errorf("duplicate value: %v, want ErrLabels", err)
	}
	mask[5] = 7
	_, err := Compute(mask, []int16(nil), g, fourLabels, Options{})
	if !errors.Is(err, ErrUnknownLabel) || !strings.Contains(err.Error(), "value 7") {
		t.Errorf("value 7: %v, want ErrUnknownLabel naming it", err)
	}
}

func TestCSVAndJSON(t *testing.T) {
	t.Parallel()
	dims := [3]int{3, 3, 3}
	mask := at(dims, map[[3]int]uint8{{0, 0, 0}: 1, {1, 1, 1}: 1, {2, 2, 2}: 3})
	img := make([]float32, 27)
	img[0], img[13] = 10, 20
	img[26] = float32(math.NaN())
	v, err := Compute(mask, img, Grid{Dims: dims, VoxelMM: [3]float64{10, 10, 10}}, fourLabels, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "statistics.csv")
	if err := WriteCSV(path, append(v.Rows("a"), v.Rows("b")...)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 9 {
		t.Fatalf("%d lines, want a header and 4 labels x 2 volumes:\n%s", len(lines), data)
	}
	const header = "volume,label,name,voxels,volume_ml,intensity_voxels,intensity_mean,intensity_std,bbox_x0,bbox_x1,bbox_y0,bbox_y1,bbox_z0,bbox_z1,components"
	if lines[0] != header {
		t.Errorf("header %q\nwant     %q", lines[0], header)
	}
	for _, want := range []string{"a,1,tissue,2,2,2,15,5,0,1,0,1,0,1,1", "a,3,lesion,1,1,0,,,2,2,2,2,2,2,1", "b,2,fluid,0,0,0,,,-1,-1,-1,-1,-1,-1,0"} {
		if !strings.Contains(string(data), want+"\n") {
			t.Errorf("no line %q in\n%s", want, data)
		}
	}
	rows, err := ReadCSV(bytes.NewReader(data))
	if err != nil || len(rows) != 8 || rows[3].Name != "lesion" || !math.IsNaN(float64(rows[3].IntensityMean)) {
		t.Errorf("read back %+v, %v", rows, err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(m) > 0 {
		t.Errorf("temporary files left: %v", m)
	}

	jpath := filepath.Join(dir, "a.json")
	if err := v.WriteJSON(jpath); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(jpath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m["background"]; ok || len(m) != 3 {
		t.Errorf("keys %v: want the three foreground labels", m)
	}
	tissue := m["tissue"]
	if tissue.Volume != 2 || tissue.Intensity == nil || *tissue.Intensity != 15 || tissue.Components != 1 ||
		tissue.BBox == nil || *tissue.BBox != [3][2]int{{0, 1}, {0, 1}, {0, 1}} {
		t.Errorf("tissue = %+v", tissue)
	}
	if l := m["lesion"]; l.Intensity != nil || l.Voxels != 1 {
		t.Errorf("lesion (its only voxel NaN) = %+v, want null intensity", l)
	}
	if fl := m["fluid"]; fl.BBox != nil || fl.Volume != 0 {
		t.Errorf("absent fluid = %+v", fl)
	}
	raw, _ := os.ReadFile(jpath)
	if i, j := strings.Index(string(raw), `"tissue"`), strings.Index(string(raw), `"lesion"`); i < 0 || j < i {
		t.Errorf("labels not in label order:\n%s", raw)
	}
}

// TestUShapes joins two columns along z at one end only: at the last plane (the union-find
// must know, many compactions later, that they were apart) and at the first plane (that they
// were together). With one worker each z-range spans several planes.
func TestUShapes(t *testing.T) {
	t.Parallel()
	dims := [3]int{5, 4, 30}
	for _, bridge := range []int{0, 29} {
		voxels := map[[3]int]uint8{}
		for z := range dims[2] {
			voxels[[3]int{0, 0, z}] = 2
			voxels[[3]int{4, 3, z}] = 2
		}
		for x := range 5 {
			voxels[[3]int{x, x * 3 / 4, bridge}] = 2
		}
		mask := at(dims, voxels)
		g := Grid{Dims: dims, VoxelMM: [3]float64{1, 1, 1}}
		for _, w := range []int{1, 2, 7} {
			v, err := Compute[int16](mask, nil, g, fourLabels, Options{Workers: w})
			if err != nil {
				t.Fatal(err)
			}
			compare(t, "U", v, reference[int16](t, mask, nil, g, fourLabels))
			if v.Labels[2].Components != 1 {
				t.Errorf("bridge at z=%d, %d workers: %d components, want 1", bridge, w, v.Labels[2].Components)
			}
		}
	}
}
