package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
	"voxpipe/engine/engine"

	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/model"
	"voxpipe/phantom"
	"voxpipe/telemetry/timing"
)

// replayEngine stands in for a GPU: it copies a precomputed mask slab by slab,
// waiting perSlab for each, so the engine costs a fixed time and (almost) no CPU, as a GPU does.
type replayEngine struct {
	mask    []uint8
	perSlab time.Duration
	mu      sync.Mutex
	free    []*keptBuffer // AllocHost's buffers, kept across runs
}

func (e *replayEngine) Name() string { return "replay" }
func (e *replayEngine) Close() error { return nil }

// AllocHost keeps the host buffers across runs, already faulted in, like a GPU engine's pinned
// memory: the benchmark then times reading, statistics and writing, not page faults (which
// cost more than the copies on this VM and are the allocator's business).
func (e *replayEngine) AllocHost(n int) (engine.HostBuffer, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, b := range e.free {
		if len(b.b) == n {
			e.free = append(e.free[:i], e.free[i+1:]...)
			return b, nil
		}
	}
	b := &keptBuffer{b: make([]byte, n), e: e}
	for i := range b.b {
		b.b[i] = 1
	}
	return b, nil
}

type keptBuffer struct {
	b []byte
	e *replayEngine
}

func (k *keptBuffer) Bytes() []byte { return k.b }
func (k *keptBuffer) Free() error {
	k.e.mu.Lock()
	defer k.e.mu.Unlock()
	k.e.free = append(k.e.free, k)
	return nil
}

func (e *replayEngine) Segment(ctx context.Context, vol *model.Volume, out []uint8, opt engine.Options) error {
	plane := vol.NX * vol.NY
	for z0 := 0; z0 < vol.NZ; z0 += opt.Slab {
		if err := ctx.Err(); err != nil {
			return err
		}
		z1 := min(z0+opt.Slab, vol.NZ)
		select { // the slab's fixed time, unless cancelled
		case <-time.After(e.perSlab):
		case <-ctx.Done():
			return ctx.Err()
		}
		copy(out[z0*plane:z1*plane], e.mask[z0*plane:z1*plane])
		if opt.OnSlabDone != nil {
			opt.OnSlabDone(z0, z1)
		}
	}
	return nil
}

// BenchmarkRunOneVolume times `run` on one phantom .nii, file to file into a .nii.gz mask,
// with an engine that takes a fixed 62 ms per volume and no CPU (the GPU's figure on
// 512x512x1000): what overlapping read, segment and write wins on a single volume.
// VOXPIPE_BENCH_DIMS overrides the size (default 256x256x256); VOXPIPE_BENCH_TIMINGS names a
// file for the last run's timings.csv.
func BenchmarkRunOneVolume(b *testing.B) {
	const slab, engineTime = 64, 62 * time.Millisecond
	batch, eng, out := benchVolume(b, slab, engineTime)
	var sum timing.Summary
	for i := -1; i < b.N; i++ { // run -1 is a warm-up: it allocates (and faults in) the buffers
		if i == 0 {
			sum = timing.Summary{}
			b.ResetTimer()
		}
		row := benchRun(b, batch, eng, slab, filepath.Join(out, "summary.csv"))
		sum.ReadMS += row.ReadMS
		sum.StatsMS += row.StatsMS
		sum.WriteMS += row.WriteMS
		sum.WallMS += row.WallMS
	}
	n := float64(b.N)
	b.ReportMetric(sum.ReadMS/n, "read-ms")
	b.ReportMetric(sum.StatsMS/n, "stats-ms")
	b.ReportMetric(sum.WriteMS/n, "write-ms")
	b.ReportMetric(sum.WallMS/n, "wall-ms")
}

// benchVolume writes BenchmarkRunOneVolume's phantom (VOXPIPE_BENCH_DIMS, default
// 256x256x256) and returns its job, an engine replaying its truth in engineTime per volume,
// and the output folder.
func benchVolume(b *testing.B, slab int, engineTime time.Duration) ([]jobs.Job, *replayEngine, string) {
	b.Helper()
	dims := "256x256x256"
	if d := os.Getenv("VOXPIPE_BENCH_DIMS"); d != "" {
		dims = d
	}
	nx, ny, nz, err := phantom.ParseDims(dims)
	if err != nil {
		b.Fatal(err)
	}
	ph, err := phantom.Generate(phantom.Params{NX: nx, NY: ny, NZ: nz, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	input := filepath.Join(dir, "in", "vol.nii")
	os.MkdirAll(filepath.Dir(input), 0o755)
	if err := nifti.Write(input, ph.Header, ph.ImageBytes(), nifti.WriteOptions{}); err != nil {
		b.Fatal(err)
	}
	slabs := (nz + slab - 1) / slab
	eng := &replayEngine{mask: ph.Truth, perSlab: engineTime / time.Duration(slabs)}
	out := filepath.Join(dir, "out")
	found, err := jobs.Discover([]string{input}, false, out, "{name}_mask.nii.gz")
	if err != nil {
		b.Fatal(err)
	}
	os.MkdirAll(out, 0o755)
	return found.Jobs, eng, out
}

// benchRun runs the one-volume batch, its summary to spath (and its timings to
// VOXPIPE_BENCH_TIMINGS, when set: the last run's are left there), and returns its summary row.
func benchRun(b *testing.B, batch []jobs.Job, eng engine.Engine, slab int, spath string) timing.Summary {
	b.Helper()
	summary, err := timing.CreateCSV[timing.Summary](spath)
	if err != nil {
		b.Fatal(err)
	}
	var timings *timing.CSVFile[timing.Row]
	if tpath := os.Getenv("VOXPIPE_BENCH_TIMINGS"); tpath != "" { // timings.csv of the last run
		if timings, err = timing.CreateCSV[timing.Row](tpath); err != nil {
			b.Fatal(err)
		}
	}
	res, err := Run(context.Background(), Config{
		Engines: []engine.Engine{eng},
		Input:   Input{Jobs: batch},
		Workers: Workers{Slab: slab, Readers: 1, Writers: 1},
		Output: Output{
			Classes:   4,
			Write:     nifti.DefaultWriteOptions(),
			Overwrite: true,
		},
		Telemetry: Telemetry{RunID: "bench", Summary: summary, Timings: timings},
	})
	summary.Close()
	if timings != nil {
		timings.Close()
	}
	if err != nil || res.OK != 1 {
		b.Fatalf("%+v %v", res, err)
	}
	rows, err := timing.ReadSummaries(spath)
	if err != nil || len(rows) != 1 {
		b.Fatal(rows, err)
	}
	return rows[0]
}

// BenchmarkReadDir times the read stage alone (ReadAll, one reader, as `voxpipe bench
// --read-only --readers 1`) on the volumes of VOXPIPE_BENCH_READ_DIR, buffers allocated afresh
// each time as in a single-volume run; with -test.cpuprofile it shows where a read's CPU goes.
// Skipped without the variable.
func BenchmarkReadDir(b *testing.B) {
	dir := os.Getenv("VOXPIPE_BENCH_READ_DIR")
	if dir == "" {
		b.Skip("VOXPIPE_BENCH_READ_DIR not set")
	}
	found, err := jobs.Discover([]string{dir}, false, b.TempDir(), "{name}_mask.nii.gz")
	if err != nil {
		b.Fatal(err)
	}
	batch := found.Jobs
	var voxels int64
	for b.Loop() {
		if _, voxels, err = ReadAll(context.Background(), batch, 1, 64); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(voxels)/1e6, "Mvox")
}
