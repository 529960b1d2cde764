package nifti

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"voxpipe/internal/testexec"
)

// TestAffineMatchesNibabel compares Affine with nibabel's affine on a file with a qform only and
// one with an sform only, each rotated and flipped so that no term is trivially zero. (With
// neither, nibabel makes up a centred LAS affine; Affine follows the standard's method 1.)
func TestAffineMatchesNibabel(t *testing.T) {
	t.Parallel()
	python := nibabelPython(t)
	base := Header{Version: 1, Dim: [8]int64{3, 4, 5, 6, 1, 1, 1, 1}, Datatype: Int16, BitPix: 16,
		PixDim: [8]float64{-1, 0.9, 1.3, 2.7}, XYZTUnits: 2, Magic: "n+1", SclSlope: 1}
	qonly := base
	qonly.QformCode = 1
	qonly.QuaternB, qonly.QuaternC, qonly.QuaternD = 0.1, -0.7, 0.3
	qonly.QoffsetX, qonly.QoffsetY, qonly.QoffsetZ = 10, -20, 30.5
	sonly := base
	sonly.SformCode = 2
	sonly.SrowX = [4]float64{0, -0.9, 0.1, 5}
	sonly.SrowY = [4]float64{1.2, 0, 0, -7}
	sonly.SrowZ = [4]float64{0, 0.05, -2.5, 9}
	names := []string{"qform", "sform"}
	var paths []string
	for i, h := range []Header{qonly, sonly} {
		path := t.TempDir() + "/a.nii"
		if err := Write(path, &h, make([]byte, 4*5*6*2), WriteOptions{}); err != nil {
			t.Fatalf("%s: %v", names[i], err)
		}
		paths = append(paths, path)
	}
	// One interpreter for both files: a line per file.
	script := "import nibabel,sys\nfor p in sys.argv[1:]: print(' '.join(repr(float(v)) for v in nibabel.load(p).affine.ravel()))"
	out, err := testexec.Cmd(t, python, append([]string{"-c", script}, paths...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("nibabel: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(paths) {
		t.Fatalf("nibabel: %d lines for %d files\n%s", len(lines), len(paths), out)
	}
	for k, path := range paths {
		read, err := ReadHeader(path)
		if err != nil {
			t.Fatal(err)
		}
		got := read.Affine()
		for i, f := range strings.Fields(lines[k]) {
			want, _ := strconv.ParseFloat(f, 64)
			if math.Abs(got[i/4][i%4]-want) > 1e-5 {
				t.Errorf("%s: affine[%d][%d] = %v, nibabel says %v", names[k], i/4, i%4, got[i/4][i%4], want)
			}
		}
	}
}

// TestAffineMethod1 checks the fallback without qform or sform: pixdim scaling alone, unset
// sizes counting as 1.
func TestAffineMethod1(t *testing.T) {
	t.Parallel()
	h := Header{PixDim: [8]float64{1, -2, 0, 3}}
	want := Affine{{2, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 3, 0}, {0, 0, 0, 1}}
	if got := h.Affine(); got != want {
		t.Errorf("Affine() = %v, want %v", got, want)
	}
	if got := want.VoxelSizes(); got != [3]float64{2, 1, 3} {
		t.Errorf("VoxelSizes() = %v", got)
	}
}

// TestSetAffineMatchesNibabel writes affines with SetAffine (axial, sagittal, oblique, each
// handedness) and checks that nibabel reads the same matrix from the qform and the sform.
func TestSetAffineMatchesNibabel(t *testing.T) {
	t.Parallel()
	python := nibabelPython(t)
	c, s := math.Cos(0.3), math.Sin(0.3)
	cases := map[string]Affine{
		"axial":      {{-0.8, 0, 0, 90}, {0, 0.8, 0, -120}, {0, 0, 2.5, -40}, {0, 0, 0, 1}},
		"sagittal":   {{0, 0, -1.5, 10}, {1.1, 0, 0, -100}, {0, 1.1, 0, -80}, {0, 0, 0, 1}},
		"oblique":    {{c * 0.9, -s * 0.9, 0, 1}, {s * 0.9, c * 0.9, 0, 2}, {0, 0, -3, 3}, {0, 0, 0, 1}},
		"oblique-lh": {{-c * 0.9, -s * 0.9, 0, 1}, {-s * 0.9, c * 0.9, 0, 2}, {0, 0, 3, 3}, {0, 0, 0, 1}},
	}
	names := slices.Sorted(maps.Keys(cases))
	var paths []string
	for _, name := range names {
		want := cases[name]
		h := Header{Version: 1, Dim: [8]int64{3, 2, 3, 4, 1, 1, 1, 1}, Datatype: Int16, SclSlope: 1, XYZTUnits: 10}
		h.SetAffine(want, 1)
		if got := h.QformAffine(); !affineNear(got, want, 1e-9) {
			t.Errorf("%s: QformAffine = %v, want %v", name, got, want)
		}
		path := t.TempDir() + "/a.nii"
		if err := Write(path, &h, make([]byte, 2*3*4*2), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	// One interpreter for all the files: two lines per file, its qform and its sform.
	script := "import nibabel,sys\nfor p in sys.argv[1:]:\n img=nibabel.load(p)\n for m in (img.get_qform(), img.get_sform()): print(' '.join(repr(float(v)) for v in m.ravel()))"
	out, err := testexec.Cmd(t, python, append([]string{"-c", script}, paths...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("nibabel: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2*len(paths) {
		t.Fatalf("nibabel: %d lines for %d files\n%s", len(lines), len(paths), out)
	}
	for l, line := range lines {
		name := names[l/2]
		var got Affine
		for i, f := range strings.Fields(line) {
			got[i/4][i%4], _ = strconv.ParseFloat(f, 64)
		}
		if want := cases[name]; !affineNear(got, want, 1e-5) {
			t.Errorf("%s: nibabel's %s = %v, want %v", name, []string{"qform", "sform"}[l%2], got, want)
		}
	}
}

func affineNear(a, b Affine, tol float64) bool {
	for i := range 4 {
		for j := range 4 {
			if math.Abs(a[i][j]-b[i][j]) > tol {
				return false
			}
		}
	}
	return true
}
