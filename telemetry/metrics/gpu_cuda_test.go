//go:build cuda

package metrics

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"voxpipe/engine/engine"
	"voxpipe/engine/open"
	"voxpipe/fixtures"
	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/model"
	"voxpipe/phantom"
	"voxpipe/pipeline"
	"voxpipe/telemetry/timing"
)

// TestPipelineRunCUDA runs the CUDA engine (fp16: kernels of consecutive slabs overlap on two
// streams) under Metrics: the busy counter is the union of its kernel spans, which is what
// summary.csv's kernels_ms sums per volume.
func TestPipelineRunCUDA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	os.MkdirAll(out, 0o755)
	writePhantoms(t, in, 3, func(i int) phantom.Params {
		return phantom.Params{NX: 256, NY: 256, NZ: 200 + 50*i, Seed: uint64(i + 1)}
	}, ".nii", nifti.WriteOptions{Level: 0})
	found, err := jobs.Discover([]string{in}, false, out, "{name}_mask.nii.gz")
	if err != nil {
		t.Fatal(err)
	}
	mdl, err := model.ParseModel(fixtures.DefaultModel)
	if err != nil {
		t.Fatal(err)
	}
	engines, err := open.Engines(mdl, open.KindCUDA, "0", 0, engine.CUDAOptions{Precision: engine.PrecisionFP16})
	if err != nil {
		t.Skipf("no CUDA engine: %v", err)
	}
	defer engines[0].Close()
	spath := filepath.Join(out, "summary.csv")
	summary, err := timing.CreateCSV[timing.Summary](spath)
	if err != nil {
		t.Fatal(err)
	}
	var rows rowRecorder
	reg := prometheus.NewRegistry()
	m := New(reg)
	res, err := pipeline.Run(context.Background(), pipeline.Config{
		Engines: engines,
		Input: pipeline.Input{
			Jobs: found.Jobs,
		},
		Workers: pipeline.Workers{
			Slab:    32,
			Readers: 2,
			Writers: 2,
		},
		Output: pipeline.Output{
			Classes: mdl.Classes,
			Descrip: "voxpipe test",
		},
		Telemetry: pipeline.Telemetry{
			RunID:    "metrics-cuda",
			Summary:  summary,
			Progress: m,
			Observer: multiObserver{m, &rows},
		},
	})
	summary.Close()
	if err != nil || res.OK != 3 {
		t.Fatalf("run: %+v, %v", res, err)
	}
	sums, err := timing.ReadSummaries(spath)
	if err != nil {
		t.Fatal(err)
	}
	var kernelsMS float64
	for _, s := range sums {
		kernelsMS += s.KernelsMS
	}
	sumOfSpans, overlaps := kernelSpans(rows.rows)
	s := scrape(t, reg)
	busy := s[`voxpipe_engine_busy_seconds_total{device="cuda:0"}`]
	t.Logf("kernels_ms %.3f, busy %.3f ms, spans summed %.3f ms, %d overlapping spans, busy fraction %.3f",
		kernelsMS, busy*1e3, sumOfSpans, overlaps, s[`voxpipe_engine_busy_fraction{device="cuda:0"}`])
	want(t, s, `voxpipe_engine_busy_seconds_total{device="cuda:0"}`, kernelsMS/1e3)
	want(t, s, `voxpipe_volumes_total{status="ok"}`, 3)
	want(t, s, "voxpipe_volumes_in_flight", 0)
	if _, ok := s[`voxpipe_engine_busy_seconds_total{device="host"}`]; ok {
		t.Error("host rows counted as busy")
	}
}

// kernelSpans is the sum of the kernels rows' durations and how many of them start before
// the previous ones ended.
func kernelSpans(rows []timing.Row) (sumMS float64, overlaps int) {
	var end float64
	for _, r := range rows {
		if r.Stage == "kernels" {
			sumMS += r.DurationMS
			if r.StartMS < end {
				overlaps++
			}
			end = max(end, r.StartMS+r.DurationMS)
		}
	}
	return sumMS, overlaps
}

// rowRecorder keeps the rows (in the order they were recorded, which for one engine is the
// order of their starts).
type rowRecorder struct {
	mu   sync.Mutex
	rows []timing.Row
}

func (r *rowRecorder) Row(row timing.Row) {
	r.mu.Lock()
	r.rows = append(r.rows, row)
	r.mu.Unlock()
}

func (r *rowRecorder) Summary(timing.Summary) {}

type multiObserver []pipeline.Observer

func (m multiObserver) Row(r timing.Row) {
	for _, o := range m {
		o.Row(r)
	}
}

func (m multiObserver) Summary(s timing.Summary) {
	for _, o := range m {
		o.Summary(s)
	}
}
