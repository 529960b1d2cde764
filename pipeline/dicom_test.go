package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"voxpipe/engine/engine"

	"voxpipe/internal/dicomtest"
	"voxpipe/io/dicom"
	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/telemetry/timing"
)

// dcmSeries describes a synthetic axial DICOM series for the pipeline's tests.
type dcmSeries struct {
	uid        string
	n          int // slices, 2 mm apart
	rows, cols int
	bits       int // 8, 16 or 32 allocated (and stored)
	signed     bool
	slope      func(k int) float64 // nil: no rescale
	value      func(k, i int) int64
}

// write writes the series as dir/IM<k> (explicit VR little endian Part 10 files) and returns
// their paths.
func (s dcmSeries) write(t *testing.T, dir string) []string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for k := range s.n {
		p := filepath.Join(dir, fmt.Sprintf("IM%d", k))
		if err := os.WriteFile(p, s.image(k).File(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// image is slice k (explicit VR little endian; StudyDate 20240102, PatientID PID-0042).
func (s dcmSeries) image(k int) dicomtest.Image {
	px := make([]uint32, s.rows*s.cols)
	for i := range px {
		px[i] = uint32(s.value(k, i))
	}
	img := dicomtest.Image{
		IDs: dicomtest.IDs{
			StudyUID: "1.2.3", SeriesUID: s.uid, SOPUID: fmt.Sprintf("%s.%d", s.uid, k+1), Number: 7, Instance: k + 1,
			StudyDate: "20240102", PatientID: "PID-0042",
		},
		Geometry: dicomtest.Geometry{
			Rows: s.rows, Columns: s.cols, Position: [3]float64{-5, 7, float64(10 + 2*k)},
			Orientation: dicomtest.Axial, Spacing: [2]float64{1, 1},
		},
		Pixels: dicomtest.Pixels{BitsAllocated: s.bits, Signed: s.signed, Values: px},
	}
	if s.slope != nil {
		img.Pixels.Slope, img.Pixels.Intercept = s.slope(k), -3
	}
	return img
}

// runInputs discovers inputs and runs them with the sign engine, returning the summary by job.
func runInputs(t *testing.T, inputs []string, out string, mutate func(*Config)) (Result, map[string]timing.Summary) {
	t.Helper()
	found, err := jobs.Discover(inputs, false, out, "{name}_mask.nii.gz")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(out, 0o755)
	spath := filepath.Join(out, "summary.csv")
	summary, err := timing.CreateCSV[timing.Summary](spath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Engines: []engine.Engine{&signEngine{}},
		Input: Input{
			Jobs: found.Jobs,
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
			Summary: summary,
		},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	res, err := Run(context.Background(), cfg)
	summary.Close()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := timing.ReadSummaries(spath)
	if err != nil {
		t.Fatal(err)
	}
	return res, statusByVolume(rows)
}

func ramp(k, i int) int64 { return int64(100*k + 7*i) }

// TestRunDICOMBrokenMember: a series whose first file is cut short fails, its error naming
// the file, while the series of another folder is segmented.
func TestRunDICOMBrokenMember(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := dcmSeries{uid: "1.1", n: 5, rows: 6, cols: 5, bits: 16, value: ramp}.write(t, filepath.Join(dir, "a"))
	dcmSeries{uid: "2.2", n: 4, rows: 6, cols: 5, bits: 16, value: ramp}.write(t, filepath.Join(dir, "b"))
	b, _ := os.ReadFile(a[0])
	os.WriteFile(a[0], b[:len(b)-7], 0o644)
	res, rows := runInputs(t, []string{filepath.Join(dir, "a"), filepath.Join(dir, "b")}, filepath.Join(dir, "out"), nil)
	if res.OK != 1 || res.Failed != 1 {
		t.Fatalf("result %+v, want one series ok and one failed", res)
	}
	for name, r := range rows {
		switch r.Status {
		case timing.StatusFailed:
			if !strings.Contains(r.Error, a[0]) || !strings.Contains(r.Error, "truncated") {
				t.Errorf("%s: error %q does not name %s and why", name, r.Error, a[0])
			}
		case timing.StatusOK:
			if r.Dims != "5x6x4" {
				t.Errorf("%s: dims %s", name, r.Dims)
			}
		}
	}
}

// TestDiscoverDICOMSkipped: discovery lists the candidate files that are not DICOM images,
// with why, and not those that are broken DICOM (they fail their series).
func TestDiscoverDICOMSkipped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := dcmSeries{uid: "1.1", n: 3, rows: 4, cols: 4, bits: 16, value: ramp}.write(t, dir)
	b, _ := os.ReadFile(a[1])
	os.WriteFile(a[1], b[:len(b)-3], 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not DICOM at all, just some notes here\n"), 0o644)
	found, err := jobs.Discover([]string{dir}, false, filepath.Join(dir, "out"), "{name}_mask.nii.gz")
	if err != nil {
		t.Fatal(err)
	}
	if len(found.Skipped) != 1 || found.Skipped[0].Path != filepath.Join(dir, "notes.txt") || !errors.Is(found.Skipped[0].Err, dicom.ErrNotDICOM) {
		t.Errorf("Skipped = %v, want notes.txt, not DICOM", found.Skipped)
	}
	if len(found.Jobs) != 1 || found.Jobs[0].Err == nil || !strings.Contains(found.Jobs[0].Err.Error(), a[1]) {
		t.Errorf("jobs %+v: want one failed series naming %s", found.Jobs, a[1])
	}
}

// TestRunDICOMVolume: a series is one volume: --volume 0 reads it, --volume 3 fails it as it
// fails a 3D NIfTI file (nifti.ErrMultiVolume).
func TestRunDICOMVolume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dcmSeries{uid: "1.1", n: 4, rows: 4, cols: 5, bits: 16, value: ramp}.write(t, filepath.Join(dir, "in"))
	os.MkdirAll(filepath.Join(dir, "nii"), 0o755)
	writeVolume(t, filepath.Join(dir, "nii", "vol.nii"), 5, 4, 4, 0)
	for _, v := range []int{0, 3} {
		res, rows := runInputs(t, []string{filepath.Join(dir, "in"), filepath.Join(dir, "nii")}, filepath.Join(dir, fmt.Sprint("out", v)), func(c *Config) { c.Input.Volume = &v })
		for name, r := range rows {
			if v == 0 && r.Status != timing.StatusOK {
				t.Errorf("--volume 0: %s %s %s", name, r.Status, r.Error)
			}
			if v == 3 && (r.Status != timing.StatusFailed || !strings.Contains(r.Error, "volume 3 requested")) {
				t.Errorf("--volume 3: %s %s %q, want failed as the NIfTI fails", name, r.Status, r.Error)
			}
		}
		if res.Done() != 2 {
			t.Errorf("--volume %d: %+v", v, res)
		}
	}
}

// TestRunDICOMSampleTypes: series of every pixel type are read straight into the input buffer
// and widened there; each gives the mask the same pipeline gives the NIfTI of its volume
// (dicom.Series.Volume), under a memory budget that holds the input buffer and the mask and
// nothing else.
func TestRunDICOMSampleTypes(t *testing.T) {
	t.Parallel()
	for name, s := range map[string]dcmSeries{
		"uint8":          {bits: 8, value: func(k, i int) int64 { return int64((3*k + i) % 256) }},
		"int8":           {bits: 8, signed: true, value: func(k, i int) int64 { return int64((3*k+i)%256 - 128) }},
		"uint16 > int16": {bits: 16, value: func(k, i int) int64 { return int64(40000 + 97*i - 13*k) }},
		"uint16 fits":    {bits: 16, value: ramp},
		"int32":          {bits: 32, signed: true, value: func(k, i int) int64 { return int64(-70000 + 991*i + k) }},
		"slope varies":   {bits: 16, value: ramp, slope: func(k int) float64 { return 1 + float64(k)/4 }},
	} {
		dir := t.TempDir()
		s.uid, s.n, s.rows, s.cols = "3.3", 6, 7, 5
		s.write(t, filepath.Join(dir, "dcm"))
		scan := dicom.ScanFiles([]string{filepath.Join(dir, "dcm", "IM0"), filepath.Join(dir, "dcm", "IM1"), filepath.Join(dir, "dcm", "IM2"),
			filepath.Join(dir, "dcm", "IM3"), filepath.Join(dir, "dcm", "IM4"), filepath.Join(dir, "dcm", "IM5")}, 1)
		h, data, err := scan.Series[0].Volume(1)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		os.MkdirAll(filepath.Join(dir, "nii"), 0o755)
		if err := nifti.Write(filepath.Join(dir, "nii", "ref.nii"), h, data, nifti.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		voxels := int64(s.rows * s.cols * s.n)
		sample := int64(4)
		if nifti.Int16Exact(scan.Series[0].StoredType()) {
			sample = 2
		}
		budget := voxels*sample + inputHeadroom + voxels
		_, dcmRows := runInputs(t, []string{filepath.Join(dir, "dcm")}, filepath.Join(dir, "out-dcm"), func(c *Config) { c.Workers.MaxMemory, c.Workers.Readers = budget, 1 })
		_, niiRows := runInputs(t, []string{filepath.Join(dir, "nii")}, filepath.Join(dir, "out-nii"), nil)
		var dcmMask, niiMask []byte
		for _, r := range dcmRows {
			if r.Status != timing.StatusOK {
				t.Fatalf("%s: DICOM series %s: %s", name, r.Status, r.Error)
			}
			_, dcmMask, _ = nifti.ReadUint8(filepath.Join(dir, "out-dcm", "series_7_"+scan.Series[0].ID()+"_mask.nii.gz"))
		}
		for _, r := range niiRows {
			if r.Status != timing.StatusOK {
				t.Fatalf("%s: NIfTI: %s %s", name, r.Status, r.Error)
			}
			_, niiMask, _ = nifti.ReadUint8(r.Output)
		}
		if len(dcmMask) == 0 || !bytes.Equal(dcmMask, niiMask) {
			t.Errorf("%s: the series' mask (%d bytes) differs from its NIfTI's (%d bytes)", name, len(dcmMask), len(niiMask))
		}
	}
}

// TestDiscoverFIFO: a FIFO named as an input (no NIfTI name, so a DICOM candidate) is a job
// that fails as not a regular file, without being opened.
func TestDiscoverFIFO(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan *jobs.Discovery, 1)
	go func() {
		found, _ := jobs.Discover([]string{fifo}, false, t.TempDir(), "{name}_mask.nii.gz")
		done <- found
	}()
	select {
	case found := <-done:
		if found == nil || len(found.Jobs) != 1 || !errors.Is(found.Jobs[0].Err, jobs.ErrNotRegular) {
			t.Errorf("discovery of a FIFO: %+v", found)
		}
	case <-time.After(20 * time.Second): // a bound, not a timing: discovery blocked on the FIFO
		t.Fatal("Discover blocked on a FIFO")
	}
}
