package main

import (
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"voxpipe/analysis/volstats"
	"voxpipe/geometry"
	"voxpipe/io/nifti"
)

// TestStatisticsAndPreview: --statistics writes per-volume JSON and CSV whose voxel counts are
// the mask's and whose volumes are counts times the voxel volume, merged into statistics.csv;
// --preview writes a PNG; a volume redone without them loses its stale ones.
func TestStatisticsAndPreview(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	in := "../../fixtures/volumes/phantom_003.nii.gz"
	if code, _, stderr := captureRun(t, "run", "-q", "--engine", "cpu", "--statistics", "--preview", in, "-o", out, "--run-id", "a"); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	mh, mask, err := nifti.ReadLabels(filepath.Join(out, "phantom_003_mask.nii.gz"))
	if err != nil {
		t.Fatal(err)
	}
	var counts [4]int64
	for _, l := range mask {
		counts[l]++
	}
	voxelML := mh.PixDim[1] * mh.PixDim[2] * mh.PixDim[3] / 1000
	f, err := os.Open(filepath.Join(out, "statistics.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := volstats.ReadCSV(f)
	f.Close()
	if err != nil || len(rows) != 4 {
		t.Fatalf("statistics.csv: %d rows, %v", len(rows), err)
	}
	for _, r := range rows {
		if r.Volume != "phantom_003" || r.Voxels != counts[r.Label] {
			t.Errorf("row %+v: want %d voxels of label %d", r, counts[r.Label], r.Label)
		}
		if want := float64(counts[r.Label]) * voxelML; math.Abs(float64(r.VolumeML)-want) > 1e-9*want {
			t.Errorf("label %d: %v mL, want %v", r.Label, r.VolumeML, want)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "statistics", "phantom_003.json"))
	var js map[string]map[string]any
	if err != nil || json.Unmarshal(b, &js) != nil || js["lesion"]["voxels"].(float64) != float64(counts[3]) {
		t.Errorf("statistics JSON (%v):\n%s", err, b)
	}
	pf, err := os.Open(filepath.Join(out, "previews", "phantom_003.png"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(pf)
	pf.Close()
	if err != nil || img.Bounds().Dx() < 300 {
		t.Errorf("preview: %v, %v", img.Bounds(), err)
	}
	timings, _ := os.ReadFile(filepath.Join(out, "runs", "a", "timings.csv"))
	if !strings.Contains(string(timings), ",phantom_003,analyse,-1,host,") {
		t.Errorf("no analyse row in timings.csv")
	}

	// Redone without them: the stale files go, and statistics.csv with them.
	if code, _, stderr := captureRun(t, "run", "-q", "--engine", "cpu", "--overwrite", in, "-o", out, "--run-id", "b"); code != 0 {
		t.Fatalf("rerun: exit %d\n%s", code, stderr)
	}
	for _, p := range []string{"statistics.csv", "statistics/phantom_003.json", "statistics/phantom_003.csv", "previews/phantom_003.png"} {
		if _, err := os.Stat(filepath.Join(out, p)); !os.IsNotExist(err) {
			t.Errorf("%s survived a rerun without --statistics/--preview (%v)", p, err)
		}
	}
}

// TestDomainVerdicts: an all-zero volume is out of domain in summary.csv (and the run
// goes on); --strict-domain fails them.
func TestDomainVerdicts(t *testing.T) {
	t.Parallel()
	in, out := t.TempDir(), t.TempDir()
	h, vals := readFixture(t, "../../fixtures/volumes/phantom_000.nii.gz")
	dims := [3]int{h.NX(), h.NY(), h.NZ()}
	writeAs(t, filepath.Join(in, "zero.nii"), h, dims, h.Affine(), make([]float32, len(vals)))
	writeAs(t, filepath.Join(in, "phantom.nii"), h, dims, h.Affine(), vals)
	if code, _, stderr := captureRun(t, "run", "-q", "--engine", "cpu", in, "-o", out, "--run-id", "a"); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	summary, _ := os.ReadFile(filepath.Join(out, "runs", "a", "summary.csv"))
	for _, want := range []string{"phantom,ok,", ",ok,RAS,", "zero,ok,", "out-of-domain: constant volume"} {
		if !strings.Contains(string(summary), want) {
			t.Errorf("summary.csv lacks %q:\n%s", want, summary)
		}
	}
	// volumes.csv, regenerated from the runs' summaries, keeps the verdicts.
	if vols, _ := os.ReadFile(filepath.Join(out, "volumes.csv")); !strings.Contains(string(vols), "out-of-domain: constant volume") || !strings.Contains(string(vols), ",ok,RAS,") {
		t.Errorf("volumes.csv lost the domain or grid columns:\n%s", vols)
	}
	out2 := t.TempDir()
	if code, _, _ := captureRun(t, "run", "-q", "--engine", "cpu", "--strict-domain", in, "-o", out2, "--run-id", "s"); code != exitFailed {
		t.Errorf("--strict-domain with a constant volume: exit %d, want %d", code, exitFailed)
	}
	summary, _ = os.ReadFile(filepath.Join(out2, "runs", "s", "summary.csv"))
	if !strings.Contains(string(summary), "zero,failed,") || !strings.Contains(string(summary), "phantom,ok,") {
		t.Errorf("--strict-domain: want zero failed and phantom ok:\n%s", summary)
	}
}

// TestStatisticsOfFlippedCopy: an LPS-stored copy (flipped in place for the engine, flipped back
// for the analysis) gets the RAS copy's statistics, its bounding boxes mirrored in x and y.
func TestStatisticsOfFlippedCopy(t *testing.T) {
	t.Parallel()
	h, vals := readFixture(t, "../../fixtures/volumes/phantom_001.nii.gz")
	dims := [3]int{h.NX(), h.NY(), h.NZ()}
	in, out := t.TempDir(), t.TempDir()
	ro, err := geometry.NewReorient("RAS", "LPS", dims)
	if err != nil {
		t.Fatal(err)
	}
	flipped := make([]float32, len(vals))
	geometry.Apply(ro, flipped, vals)
	writeAs(t, filepath.Join(in, "ras.nii"), h, dims, h.Affine(), vals)
	writeAs(t, filepath.Join(in, "lps.nii"), h, dims, ro.Affine(h.Affine()), flipped)
	if code, _, stderr := captureRun(t, "run", "-q", "--engine", "cpu", "--statistics", in, "-o", out, "--run-id", "a"); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	read := func(name string) []volstats.Row {
		f, err := os.Open(filepath.Join(out, "statistics", name+".csv"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rows, err := volstats.ReadCSV(f)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	ras, lps := read("ras"), read("lps")
	for i := range ras {
		a, b := ras[i], lps[i]
		if a.Voxels != b.Voxels || a.IntensityMean != b.IntensityMean || a.Components != b.Components ||
			b.BBoxX0 != dims[0]-1-a.BBoxX1 || b.BBoxY0 != dims[1]-1-a.BBoxY1 || a.BBoxZ0 != b.BBoxZ0 {
			t.Errorf("label %d: RAS copy %+v, LPS copy %+v", a.Label, a, b)
		}
	}
}
