package metrics

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"voxpipe/engine/cpu"
	"voxpipe/engine/engine"
	"voxpipe/internal/spans"
	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/model"
	"voxpipe/phantom"
	"voxpipe/pipeline"
	"voxpipe/stage"
	"voxpipe/telemetry/progress"
	"voxpipe/telemetry/timing"
)

// writePhantoms writes n phantoms into the folder in, phantom i of params(i) as vol<i><ext>.
func writePhantoms(t *testing.T, in string, n int, params func(i int) phantom.Params, ext string, opts nifti.WriteOptions) {
	t.Helper()
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ph, err := phantom.Generate(params(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := nifti.Write(filepath.Join(in, fmt.Sprintf("vol%d%s", i, ext)), ph.Header, ph.ImageBytes(), opts); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPipelineRun wires Metrics into a real run (CPU engine) as run and watch do, and checks
// the metrics against the run's own timings.csv and summary.csv.
func TestPipelineRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	os.MkdirAll(out, 0o755)
	writePhantoms(t, in, 3, func(i int) phantom.Params {
		return phantom.Params{NX: 24, NY: 20, NZ: 10 + 3*i, Seed: uint64(i + 1)}
	}, ".nii.gz", nifti.DefaultWriteOptions())
	os.WriteFile(filepath.Join(in, "notes.nii"), []byte("not NIfTI\n"), 0o644) // fails
	found, err := jobs.Discover([]string{in}, false, out, "{name}_mask.nii.gz")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	rows, sums := runCPU(t, found.Jobs, out, New(reg))
	s := scrape(t, reg)
	checkRunVolumes(t, s, sums)
	checkRunStages(t, s, rows)
}

// runCPU runs jobs through the pipeline on a CPU engine with m as its Progress and Observer,
// and returns the rows of its timings.csv and summary.csv (in out). It wants 3 volumes ok
// and 1 failed.
func runCPU(t *testing.T, jobList []jobs.Job, out string, m *Metrics) ([]timing.Row, []timing.Summary) {
	t.Helper()
	tpath, spath := filepath.Join(out, "timings.csv"), filepath.Join(out, "summary.csv")
	timings, err := timing.CreateCSV[timing.Row](tpath)
	if err != nil {
		t.Fatal(err)
	}
	summary, err := timing.CreateCSV[timing.Summary](spath)
	if err != nil {
		t.Fatal(err)
	}
	mdl := model.RandomModel(8, 4, 7)
	eng := cpu.New(mdl, 2)
	defer eng.Close()
	res, err := pipeline.Run(context.Background(), pipeline.Config{
		Engines: []engine.Engine{eng},
		Input: pipeline.Input{
			Jobs: jobList,
		},
		Workers: pipeline.Workers{
			Slab:    4,
			Readers: 2,
			Writers: 1,
		},
		Output: pipeline.Output{
			Classes: mdl.Classes,
			Descrip: "voxpipe test",
		},
		Telemetry: pipeline.Telemetry{
			RunID:    "metrics-test",
			Timings:  timings,
			Summary:  summary,
			Progress: progress.Multi(m),
			Observer: m,
		},
	})
	timings.Close()
	summary.Close()
	if err != nil || res.OK != 3 || res.Failed != 1 {
		t.Fatalf("run: %+v, %v", res, err)
	}
	rows, err := timing.ReadRows(tpath)
	if err != nil {
		t.Fatal(err)
	}
	sums, err := timing.ReadSummaries(spath)
	if err != nil {
		t.Fatal(err)
	}
	return rows, sums
}

// checkRunVolumes checks the volume counters of scrape s against the summary rows.
func checkRunVolumes(t *testing.T, s map[string]float64, sums []timing.Summary) {
	t.Helper()
	want(t, s, `voxpipe_volumes_total{status="ok"}`, 3)
	want(t, s, `voxpipe_volumes_total{status="failed"}`, 1)
	want(t, s, "voxpipe_volumes_in_flight", 0)
	var voxels int64
	var wall float64
	for _, sum := range sums {
		if sum.Status == timing.StatusOK {
			voxels += sum.Voxels
			wall += sum.WallMS / 1e3
		}
	}
	want(t, s, "voxpipe_voxels_segmented_total", float64(24*20*(10+13+16)))
	want(t, s, "voxpipe_voxels_segmented_total", float64(voxels))
	want(t, s, "voxpipe_volume_turnaround_seconds_count", 3)
	want(t, s, "voxpipe_volume_turnaround_seconds_sum", wall)
}

// checkRunStages checks the stage histograms and the CPU engine's busy time of scrape s
// against the timings rows.
func checkRunStages(t *testing.T, s map[string]float64, rows []timing.Row) {
	t.Helper()
	perStage := map[stage.Stage]int{}
	var slabs []timing.Row
	for _, r := range rows {
		perStage[r.Stage]++
		if r.Stage == stage.Segment {
			if r.Device != "cpu" || r.Slab < 0 {
				t.Fatalf("the CPU engine's segment rows are per slab: %+v", r)
			}
			slabs = append(slabs, r)
		}
	}
	for _, st := range []stage.Stage{stage.Read, stage.Segment, stage.Write} {
		if perStage[st] == 0 {
			t.Errorf("no %s rows", st)
		}
		want(t, s, `voxpipe_stage_duration_seconds_count{stage="`+string(st)+`"}`, float64(perStage[st]))
	}
	// Busy: the union of the CPU engine's slabs (one volume at a time, in order).
	slices.SortFunc(slabs, func(a, b timing.Row) int { return cmp.Compare(a.StartMS, b.StartMS) })
	var end, busy float64
	for _, r := range slabs {
		busy += spans.BusyAdded(&end, r.StartMS, r.DurationMS)
	}
	if busy <= 0 {
		t.Fatal("no busy time in the rows")
	}
	want(t, s, `voxpipe_engine_busy_seconds_total{device="cpu"}`, busy/1e3)
	if f := s[`voxpipe_engine_busy_fraction{device="cpu"}`]; f <= 0 || f > 1 {
		t.Errorf("busy fraction %v, want in (0, 1]", f)
	}
}

// Metrics is what the pipeline takes as its Progress and Observer (checked here: the package
// itself does not import the pipeline, which sits above it).
var (
	_ pipeline.Progress = (*Metrics)(nil)
	_ pipeline.Observer = (*Metrics)(nil)
)
