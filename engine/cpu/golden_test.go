package cpu_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"voxpipe/analysis/eval"
	"voxpipe/engine/cpu"
	"voxpipe/engine/engine"
	"voxpipe/io/nifti"
	"voxpipe/model"
)

// Golden cases come from the PyTorch twin (baseline/golden.py) and live in
//
//	engine/cpu/testdata/golden/<case>/input.nii          the volume: stored values, scl_slope/scl_inter in its header
//	engine/cpu/testdata/golden/<case>/model.safetensors  the weights
//	engine/cpu/testdata/golden/<case>/mask.nii           the expected labels, uint8, same dimensions
//	engine/cpu/testdata/golden/manifest.json             optional: per case, the twin's norm (scale_f32, shift_f32)
//
// TestGolden runs every case folder it finds (and skips when there is none) the way the pipeline
// does: stored values read slab by slab into Stats, Norm from Stats.Norm(scl_slope, scl_inter),
// the CPU engine over slabs of 1, 4 and the whole depth. At least 99.99% of the voxels must
// match (with the small cases here, that means all of them).
const goldenDir = "testdata/golden"

type goldenManifest struct {
	Cases []struct {
		Name string `json:"name"`
		Norm struct {
			ScaleF32 float64 `json:"scale_f32"`
			ShiftF32 float64 `json:"shift_f32"`
		} `json:"norm"`
	} `json:"cases"`
}

func TestGolden(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(goldenDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var cases []string
	for _, e := range entries {
		if e.IsDir() {
			cases = append(cases, e.Name())
		}
	}
	if len(cases) == 0 {
		t.Skipf("no golden cases in %s", goldenDir)
	}
	norms := map[string][2]float64{}
	if raw, err := os.ReadFile(filepath.Join(goldenDir, "manifest.json")); err == nil {
		var man goldenManifest
		if err := json.Unmarshal(raw, &man); err != nil {
			t.Fatalf("manifest.json: %v", err)
		}
		for _, c := range man.Cases {
			norms[c.Name] = [2]float64{c.Norm.ScaleF32, c.Norm.ShiftF32}
		}
	}
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(goldenDir, name)
			m, err := model.LoadModel(filepath.Join(dir, "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			vol := readGoldenVolume(t, filepath.Join(dir, "input.nii"))
			if want, ok := norms[name]; ok {
				if !closeF32(vol.Norm.Scale, want[0]) || !closeF32(vol.Norm.Shift, want[1]) {
					t.Errorf("norm %+v, twin's scale %v shift %v", vol.Norm, want[0], want[1])
				}
			}
			hdr, mask, err := nifti.ReadUint8(filepath.Join(dir, "mask.nii"))
			if err != nil {
				t.Fatal(err)
			}
			if hdr.NX() != vol.NX || hdr.NY() != vol.NY || hdr.NZ() != vol.NZ {
				t.Fatalf("mask is %dx%dx%d, input %dx%dx%d", hdr.NX(), hdr.NY(), hdr.NZ(), vol.NX, vol.NY, vol.NZ)
			}
			e := cpu.New(m, 0)
			for _, slab := range []int{1, 4, vol.NZ} {
				got := make([]uint8, len(mask))
				if err := e.Segment(context.Background(), vol, got, engine.Options{Slab: slab}); err != nil {
					t.Fatal(err)
				}
				met := eval.Compare(got, mask, m.Classes)
				allowed := met.Voxels / 10000 // 99.99%
				if wrong := met.Voxels - met.Correct; wrong > allowed {
					t.Errorf("slab %d: %d of %d voxels differ from the twin's mask (allowed %d)", slab, wrong, met.Voxels, allowed)
				} else if wrong > 0 {
					t.Logf("slab %d: %d of %d voxels differ (within 99.99%%)", slab, wrong, met.Voxels)
				}
			}
		})
	}
}

// closeF32 reports whether got is want rounded to float32, give or take one float32 step:
// the stats' float64 sums may round differently from numpy's.
func closeF32(got float32, want float64) bool {
	w := float32(want)
	return got == w || got == math.Nextafter32(w, float32(math.Inf(1))) || got == math.Nextafter32(w, float32(math.Inf(-1)))
}

// readGoldenVolume reads a volume as the pipeline does: stored values (int16 when they fit
// exactly, float32 otherwise) slab by slab, statistics accumulated per slab.
func readGoldenVolume(t *testing.T, path string) *model.Volume {
	t.Helper()
	r, err := nifti.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := r.Header()
	vol := &model.Volume{NX: h.NX(), NY: h.NY(), NZ: r.Depth()}
	plane := r.SliceVoxels()
	var st model.Stats
	if nifti.Int16Exact(r.Datatype()) {
		vol.I16 = readSlabs(t, r.ReadSlicesInt16, st.AddInt16, plane, vol.NZ)
	} else {
		vol.F32 = readSlabs(t, r.ReadSlicesFloat32, st.AddFloat32, plane, vol.NZ)
	}
	if st.Count() != int64(plane*vol.NZ) {
		t.Fatalf("read %d voxels, want %d", st.Count(), plane*vol.NZ)
	}
	vol.Norm = st.Norm(r.Scaling())
	return vol
}

// readSlabs reads nz slices of plane voxels, two at a time, handing each slab to add.
func readSlabs[T int16 | float32](t *testing.T, read func([]T, int) (int, error), add func([]T), plane, nz int) []T {
	t.Helper()
	data := make([]T, plane*nz)
	for z := 0; z < nz; {
		n, err := read(data[z*plane:], min(2, nz-z))
		if err != nil {
			t.Fatalf("read slices from %d: %v", z, err)
		}
		add(data[z*plane : (z+n)*plane])
		z += n
	}
	return data
}
