package pipeline

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"
	"voxpipe/engine/engine"

	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/model"
	"voxpipe/telemetry/timing"
)

// writeVolume writes a smooth int16 test volume and returns its stored values.
func writeVolume(t *testing.T, path string, nx, ny, nz int, seed int) []int16 {
	t.Helper()
	vals := make([]int16, nx*ny*nz)
	for z := 0; z < nz; z++ {
		for y := 0; y < ny; y++ {
			for x := 0; x < nx; x++ {
				f := math.Sin(float64(x+seed)/3) + math.Cos(float64(y*2+z)/5)
				vals[(z*ny+y)*nx+x] = int16(1000 * f)
			}
		}
	}
	h := &nifti.Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: nifti.Int16, BitPix: 16,
		Dim: [8]int64{3, int64(nx), int64(ny), int64(nz), 1, 1, 1, 1}, PixDim: [8]float64{1, 1, 1, 1.5},
		SclSlope: 1, QformCode: 1, SformCode: 1, SrowX: [4]float64{1, 0, 0, -10}, SrowY: [4]float64{0, 1, 0, 5},
		SrowZ: [4]float64{0, 0, 1.5, 2}, XYZTUnits: 10, Magic: "n+1"}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vals))), 2*len(vals))
	if err := nifti.Write(path, h, raw, nifti.WriteOptions{Level: 1}); err != nil {
		t.Fatal(err)
	}
	return vals
}

func expectedMask(t *testing.T, vals []int16) []uint8 {
	t.Helper()
	var st model.Stats
	st.AddInt16(vals)
	vol := &model.Volume{I16: vals, Norm: st.Norm(1, 0)}
	want := make([]uint8, len(vals))
	for i := range vals {
		want[i] = signLabel(vol, i)
	}
	return want
}

type batch struct {
	in, out string
	good    map[string][]int16 // name -> stored values
}

// newBatch makes a folder with good volumes and the three kinds of bad input.
func newBatch(t *testing.T, good int) *batch {
	t.Helper()
	dir := t.TempDir()
	b := &batch{in: filepath.Join(dir, "in"), out: filepath.Join(dir, "out"), good: map[string][]int16{}}
	os.MkdirAll(b.in, 0o755)
	for i := 0; i < good; i++ {
		name := "vol" + string(rune('a'+i))
		ext := ".nii.gz"
		if i%2 == 1 {
			ext = ".nii"
		}
		b.good[name] = writeVolume(t, filepath.Join(b.in, name+ext), 9+i, 7, 11+i, i)
	}
	// truncated: a good file cut short
	writeVolume(t, filepath.Join(dir, "full.nii"), 9, 7, 11, 0)
	data, _ := os.ReadFile(filepath.Join(dir, "full.nii"))
	os.WriteFile(filepath.Join(b.in, "truncated.nii"), data[:len(data)-200], 0o644)
	// corrupt gzip: a good .nii.gz with bytes in the middle overwritten
	writeVolume(t, filepath.Join(dir, "full.nii.gz"), 9, 7, 11, 0)
	data, _ = os.ReadFile(filepath.Join(dir, "full.nii.gz"))
	for i := len(data) / 3; i < len(data)/3+40 && i < len(data); i++ {
		data[i] ^= 0x5a
	}
	os.WriteFile(filepath.Join(b.in, "corrupt.nii.gz"), data, 0o644)
	// not NIfTI at all, with a NIfTI name
	os.WriteFile(filepath.Join(b.in, "notes.nii"), []byte("this is not a NIfTI file\n"), 0o644)
	// ignored: not a NIfTI name
	os.WriteFile(filepath.Join(b.in, "README.txt"), []byte("ignored"), 0o644)
	return b
}

type runOutput struct {
	res     Result
	err     error
	rows    []timing.Row
	summary []timing.Summary
}

func runBatch(t *testing.T, ctx context.Context, b *batch, eng engine.Engine, mutate func(*Config)) runOutput {
	t.Helper()
	found, err := jobs.Discover([]string{b.in}, false, b.out, "{name}_mask.nii.gz")
	if err != nil {
		t.Fatal(err)
	}
	batch := found.Jobs
	os.MkdirAll(b.out, 0o755)
	tpath, spath := filepath.Join(b.out, "timings.csv"), filepath.Join(b.out, "summary.csv")
	timings, err := timing.CreateCSV[timing.Row](tpath)
	if err != nil {
		t.Fatal(err)
	}
	summary, err := timing.CreateCSV[timing.Summary](spath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Engines: []engine.Engine{eng},
		Input: Input{
			Jobs: batch,
		},
		Workers: Workers{
			Slab:    4,
			Readers: 2,
			Writers: 1,
		},
		Output: Output{
			Classes: 3,
			Descrip: "voxpipe test",
		},
		Telemetry: Telemetry{
			RunID:   "test",
			Timings: timings,
			Summary: summary,
		},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	res, runErr := Run(ctx, cfg)
	timings.Close()
	summary.Close()
	var out runOutput
	out.res, out.err = res, runErr
	if out.rows, err = timing.ReadRows(tpath); err != nil {
		t.Fatalf("timings.csv does not parse: %v", err)
	}
	if out.summary, err = timing.ReadSummaries(spath); err != nil {
		t.Fatalf("summary.csv does not parse: %v", err)
	}
	return out
}

func statusByVolume(s []timing.Summary) map[string]timing.Summary {
	m := map[string]timing.Summary{}
	for _, r := range s {
		m[r.Volume] = r
	}
	return m
}

func assertNoTemporaries(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp-") {
			t.Errorf("stray temporary %s", path)
		}
		return nil
	})
}
