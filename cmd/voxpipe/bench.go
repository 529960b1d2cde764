package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"
	"voxpipe/engine/cpu"
	"voxpipe/engine/engine"

	"github.com/urfave/cli/v2"

	"voxpipe/internal/regular"
	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/model"
	"voxpipe/phantom"
	"voxpipe/pipeline"
	"voxpipe/stage"
	"voxpipe/telemetry/timing"
)

func init() {
	commandMakers = append(commandMakers, func() *cli.Command {
		return &cli.Command{
			Name:   "bench",
			Before: requireFlags("output"),
			Usage:  "time the engine on one volume (kernels, copies, pinned-in to mask-out) and the whole file-to-file run",
			Description: "Generates a phantom of --dims (or takes --input, an int16 NIfTI), runs the engine --runs times\n" +
				"after --warmup untimed runs on the volume in (pinned) host memory, then times reading the\n" +
				"volume from a .nii file alone (run's read stage), writing its mask alone, and `run` on that file\n" +
				"end to end.\n" +
				"Writes OUT/timings.csv and OUT/summary.csv (one summary row per timed engine run) and\n" +
				"prints medians with [min-max]; on stderr, a line as each engine run ends (its time, and\n" +
				"how long the engine runs left should take), unless --quiet.\n" +
				"Defaults depend on the engine: a GPU times 512x512x1000 (the volume of the latency\n" +
				"targets), --runs 10, --warmup 2, --file-runs 3; the CPU engine, on which that volume takes\n" +
				"minutes a run, times 128x128x64 with --runs 3, --warmup 1, --file-runs 1 (seconds in all).\n" +
				"Flags given explicitly are kept, on either engine.",
			Flags: append(engineFlags("0"),
				&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "folder for the CSVs and the files it times (required)"},
				&cli.StringFlag{Name: "input", Usage: "int16 NIfTI volume to time (default: a generated phantom)"},
				&cli.StringFlag{Name: "dims", Usage: "phantom size NXxNYxNZ",
					DefaultText: gpuBenchDefaults.dims + "; CPU engine: " + cpuBenchDefaults.dims},
				&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "phantom seed"},
				&cli.IntFlag{Name: "slab", Value: 64, Usage: "z-slices per slab"},
				&cli.IntFlag{Name: "runs", Usage: "timed engine runs",
					DefaultText: fmt.Sprintf("%d; CPU engine: %d", gpuBenchDefaults.runs, cpuBenchDefaults.runs)},
				&cli.IntFlag{Name: "warmup", Usage: "untimed engine runs first",
					DefaultText: fmt.Sprintf("%d; CPU engine: %d", gpuBenchDefaults.warmup, cpuBenchDefaults.warmup)},
				&cli.IntFlag{Name: "file-runs", Usage: "timed read-alone, write-alone and end-to-end runs (0: skip)",
					DefaultText: fmt.Sprintf("%d; CPU engine: %d", gpuBenchDefaults.fileRuns, cpuBenchDefaults.fileRuns)},
				&cli.StringFlag{Name: "read-only", Usage: "instead: only read (decode, normalise) every volume in `DIR`, --readers in parallel"},
				&cli.IntFlag{Name: "readers", Value: 2, Usage: "parallel readers for --read-only"},
				&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "only the summary line"},
			),
			Action: benchAction,
		}
	})
}

func benchAction(c *cli.Context) error {
	out := c.String("output")
	if dir := c.String("read-only"); dir != "" {
		return benchReadOnly(c, dir)
	}
	if err := checkBenchFlags(c); err != nil {
		return err
	}
	mdl, modelName, _, engines, err := openModelAndEngines(c)
	if err != nil {
		return err
	}
	defer closeEngines(engines)
	eng := engines[0]
	set := benchSettingsFor(c, eng)
	runs, warmup, fileRuns, slab := set.runs, set.warmup, set.fileRuns, c.Int("slab")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	say := func(format string, args ...any) {
		if !c.Bool("quiet") {
			fmt.Fprintf(c.App.Writer, format, args...)
		}
	}

	// The volume, and the .nii file the file-to-file runs read.
	hdr, vol, input, err := benchVolume(c, out, set.dims)
	if err != nil {
		return err
	}
	dims := fmt.Sprintf("%dx%dx%d", vol.NX, vol.NY, vol.NZ)
	voxels := int64(vol.NX * vol.NY * vol.NZ)
	say("bench: %s int16 (%.0f MB), engine %s, model %s, slab %d\n", dims, float64(2*voxels)/1e6, eng.Name(), modelName, slab)

	ctx := context.Background()
	progress := io.Discard
	if !c.Bool("quiet") {
		progress = c.App.ErrWriter
	}
	lines := newBenchProgress(progress, warmup, runs)
	benchRuns, mask, err := pipeline.BenchEngine(ctx, lines.wrap(eng), vol, slab, warmup, runs)
	lines.close()
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := writeBenchCSVs(out, dims, voxels, eng.Name(), benchRuns); err != nil {
		return err
	}
	line := fmt.Sprintf("bench %s %s slab %d n=%d: pinned-in to mask-out %s", dims, eng.Name(), slab, runs, engineSpreads(eng, benchRuns))
	if fileRuns > 0 {
		fileLine, err := benchFiles(ctx, eng, mdl, hdr, vol, mask, input, out, slab, fileRuns, say)
		if err != nil {
			return err
		}
		line += "; " + fileLine
	}
	fmt.Fprintln(c.App.Writer, line)
	return nil
}

// checkBenchFlags checks the flags given (usage errors) before the engine opens; the defaults
// of those not given depend on the engine.
func checkBenchFlags(c *cli.Context) error {
	if (c.IsSet("runs") && c.Int("runs") < 1) || c.Int("warmup") < 0 || c.Int("file-runs") < 0 || c.Int("slab") < 1 {
		return usageError{errors.New("bench: --runs and --slab must be >= 1, --warmup and --file-runs >= 0")}
	}
	if c.IsSet("dims") && c.String("input") == "" {
		if _, _, _, err := phantom.ParseDims(c.String("dims")); err != nil {
			return usageError{fmt.Errorf("bench: --dims: %w", err)}
		}
	}
	if in := c.String("input"); in != "" {
		if _, err := regular.Check(in); err != nil {
			return usageError{fmt.Errorf("bench: --input: %w", err)}
		}
	}
	return checkEngineFlags(c, "bench")
}

// engineSpreads summarises the timed engine runs: the wall times, and on a GPU the times of
// the kernels and copies, the copy rates and how much of the copies the kernels hid; then the
// kernels the engine runs, when it says.
func engineSpreads(eng engine.Engine, benchRuns []pipeline.BenchRun) string {
	var walls, kernels, h2d, d2h, gpuTotal []time.Duration
	for _, r := range benchRuns {
		walls = append(walls, r.Wall)
		kernels = append(kernels, r.GPU.Kernels)
		h2d = append(h2d, r.GPU.H2D)
		d2h = append(d2h, r.GPU.D2H)
		gpuTotal = append(gpuTotal, r.GPU.Total)
	}
	line := pipeline.SpreadOf(walls).String()
	if benchRuns[0].GPU.Slabs > 0 {
		g := benchRuns[0].GPU
		line += fmt.Sprintf(", GPU total %s, kernels %s, h2d %s (%.1f GB/s), d2h %s (%.1f GB/s), copy hidden %.1f%%",
			pipeline.SpreadOf(gpuTotal), pipeline.SpreadOf(kernels),
			pipeline.SpreadOf(h2d), float64(g.H2DBytes)/g.H2D.Seconds()/1e9,
			pipeline.SpreadOf(d2h), float64(g.D2HBytes)/g.D2H.Seconds()/1e9,
			100*hiddenCopyFraction(benchRuns[len(benchRuns)-1].Events))
	}
	if k, ok := eng.(engine.KernelDescriber); ok {
		if desc, err := k.Kernels(); err == nil {
			line += "; kernels: " + desc
		}
	}
	return line
}

// benchVolume generates or reads the volume and makes sure a plain .nii of it exists to time
// file reads on.
func benchVolume(c *cli.Context, out, dims string) (*nifti.Header, *model.Volume, string, error) {
	input := c.String("input")
	if input == "" {
		nx, ny, nz, err := phantom.ParseDims(dims)
		if err != nil {
			return nil, nil, "", usageError{fmt.Errorf("bench: --dims: %w", err)}
		}
		ph, err := phantom.Generate(phantom.Params{NX: nx, NY: ny, NZ: nz, Seed: c.Uint64("seed")})
		if err != nil {
			return nil, nil, "", fmt.Errorf("bench: %w", err)
		}
		input = filepath.Join(out, "input", "bench.nii")
		if err := os.MkdirAll(filepath.Dir(input), 0o755); err != nil {
			return nil, nil, "", fmt.Errorf("bench: %w", err)
		}
		if err := nifti.Write(input, ph.Header, ph.ImageBytes(), nifti.WriteOptions{Level: 0}); err != nil {
			return nil, nil, "", err
		}
		vol := &model.Volume{NX: nx, NY: ny, NZ: nz, I16: ph.Image}
		normalise(vol, 1, 0)
		return ph.Header, vol, input, nil
	}
	r, err := nifti.Open(input)
	if err != nil {
		return nil, nil, "", err
	}
	defer r.Close()
	h := r.Header()
	if !nifti.Int16Exact(h.Datatype) {
		return nil, nil, "", usageError{fmt.Errorf("bench: %s is %s; bench takes int16 volumes", input, h.Datatype)}
	}
	vol := &model.Volume{NX: h.NX(), NY: h.NY(), NZ: h.NZ(), I16: make([]int16, h.NX()*h.NY()*h.NZ())}
	if _, err := r.ReadSlicesInt16(vol.I16, h.NZ()); err != nil {
		return nil, nil, "", err
	}
	slope, inter := r.Scaling()
	if strings.HasSuffix(strings.ToLower(input), ".gz") {
		plain := filepath.Join(out, "input", "bench.nii")
		if err := os.MkdirAll(filepath.Dir(plain), 0o755); err != nil {
			return nil, nil, "", fmt.Errorf("bench: %w", err)
		}
		hh := *h
		hh.Datatype, hh.BitPix = nifti.Int16, 16
		if err := nifti.Write(plain, &hh, int16Bytes(vol.I16), nifti.WriteOptions{Level: 0}); err != nil {
			return nil, nil, "", err
		}
		input = plain
	}
	normalise(vol, slope, inter)
	return h, vol, input, nil
}

// normalise sets vol.Norm from the volume's own statistics, as the pipeline's read stage does.
func normalise(vol *model.Volume, slope, inter float64) {
	var st model.Stats
	st.AddInt16(vol.I16)
	vol.Norm = st.Norm(slope, inter)
}

// benchFiles times reading the .nii alone, writing the mask alone, and `run` end to end.
func benchFiles(ctx context.Context, eng engine.Engine, mdl *model.Model, hdr *nifti.Header,
	vol *model.Volume, mask []uint8, input, out string, slab, n int, say func(string, ...any)) (string, error) {
	var reads, writes, e2e []time.Duration
	maskHdr := nifti.MaskHeader(hdr, uint8(mdl.Classes-1), "voxpipe bench")
	for i := 0; i < n; i++ {
		// Read alone is run's read stage alone, the same code as the end-to-end run below uses
		// (parallel positional read with the statistics fused in, into a fresh buffer), so the
		// comparison is like for like.
		read, _, err := pipeline.ReadAll(ctx, []jobs.Job{{Name: "bench", Input: input}}, 1, slab)
		if err != nil {
			return "", err
		}
		reads = append(reads, read)

		t := time.Now()
		if err := nifti.Write(filepath.Join(out, "write-alone_mask.nii.gz"), maskHdr, mask, nifti.DefaultWriteOptions()); err != nil {
			return "", err
		}
		writes = append(writes, time.Since(t))

		found, err := jobs.Discover([]string{input}, false, filepath.Join(out, "e2e"), "{name}_mask.nii.gz")
		if err != nil {
			return "", err
		}
		batch := found.Jobs
		timings, summary, err := createBenchCSVs(filepath.Join(out, "e2e"))
		if err != nil {
			return "", err
		}
		t = time.Now()
		res, err := pipeline.Run(ctx, pipeline.Config{
			Engines: []engine.Engine{eng},
			Input: pipeline.Input{
				Jobs: batch,
			},
			Workers: pipeline.Workers{
				Slab:    slab,
				Readers: 1,
				Writers: 1,
			},
			Output: pipeline.Output{
				Classes:   mdl.Classes,
				Descrip:   "voxpipe bench",
				Write:     nifti.DefaultWriteOptions(),
				Overwrite: true,
			},
			Telemetry: pipeline.Telemetry{
				RunID:   fmt.Sprintf("bench-e2e-%d", i),
				Timings: timings,
				Summary: summary,
			},
		})
		e2e = append(e2e, time.Since(t))
		if cerr := errors.Join(timings.Close(), summary.Close()); cerr != nil && err == nil {
			err = cerr
		}
		if err != nil || res.OK != 1 {
			return "", fmt.Errorf("bench: end-to-end run: %v (%+v, see %s)", err, res, filepath.Join(out, "e2e", "summary.csv"))
		}
		say("file run %d: read alone %v, write alone %v, end to end %v\n", i, reads[i].Round(time.Millisecond),
			writes[i].Round(time.Millisecond), e2e[i].Round(time.Millisecond))
	}
	rd, wr, ee := pipeline.SpreadOf(reads), pipeline.SpreadOf(writes), pipeline.SpreadOf(e2e)
	return fmt.Sprintf("read .nii alone (run's read stage, statistics included) %s, write .nii.gz mask alone %s, run file-to-file %s (%.2fx the slower of read and write)",
		rd, wr, ee, ee.Median/max(rd.Median, wr.Median)), nil
}

// hiddenCopyFraction is the share of copy time (h2d and d2h events) that runs while at least one
// kernel runs: measured against the union of the kernel spans, since the fp16 engine's kernels
// of consecutive slabs run on two streams and overlap each other.
func hiddenCopyFraction(events []engine.Event) float64 {
	var kernels, copies []timing.Interval[time.Duration]
	for _, e := range events {
		switch {
		case e.Stage.IsCopy():
			copies = append(copies, timing.Interval[time.Duration]{Start: e.Start, Dur: e.Duration})
		case e.Stage == stage.Kernels:
			kernels = append(kernels, timing.Interval[time.Duration]{Start: e.Start, Dur: e.Duration})
		}
	}
	return timing.HiddenCopy(kernels, copies).Fraction()
}

// createBenchCSVs makes dir and the timings.csv and summary.csv in it.
func createBenchCSVs(dir string) (*timing.CSVFile[timing.Row], *timing.CSVFile[timing.Summary], error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	timings, err := timing.CreateCSV[timing.Row](filepath.Join(dir, "timings.csv"))
	if err != nil {
		return nil, nil, err
	}
	summary, err := timing.CreateCSV[timing.Summary](filepath.Join(dir, "summary.csv"))
	if err != nil {
		timings.Close() // the error that matters is CreateCSV's
		return nil, nil, err
	}
	return timings, summary, nil
}

func writeBenchCSVs(out, dims string, voxels int64, engineName string, runs []pipeline.BenchRun) error {
	timings, summary, err := createBenchCSVs(out)
	if err != nil {
		return err
	}
	msOf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	var offset time.Duration
	for i, r := range runs {
		name := fmt.Sprintf("bench-run-%02d", i)
		rows := make([]timing.Row, 0, len(r.Events)+1)
		for _, e := range r.Events {
			rows = append(rows, timing.Row{RunID: "bench", Volume: name, Stage: e.Stage, Slab: e.Slab, Device: engineName,
				StartMS: msOf(offset + e.Start), DurationMS: msOf(e.Duration), Bytes: e.Bytes, Voxels: e.Voxels})
		}
		rows = append(rows, timing.Row{RunID: "bench", Volume: name, Stage: stage.Segment, Slab: -1, Device: engineName,
			StartMS: msOf(offset), DurationMS: msOf(r.Wall), Voxels: voxels})
		// The files' errors are sticky: the first one is also Close's.
		if err = timings.Append(rows...); err != nil {
			break
		}
		if err = summary.Append(timing.Summary{RunID: "bench", Volume: name, Status: timing.StatusOK, Dims: dims, Voxels: voxels,
			Engine: engineName, SegmentMS: msOf(r.Wall), H2DMS: msOf(r.GPU.H2D), KernelsMS: msOf(r.GPU.Kernels),
			D2HMS: msOf(r.GPU.D2H), WallMS: msOf(r.Wall), MVoxPerS: float64(voxels) / 1e3 / msOf(r.Wall)}); err != nil {
			break
		}
		offset += r.Wall
	}
	if cerr := errors.Join(timings.Close(), summary.Close()); err == nil {
		err = cerr
	}
	return err
}

func int16Bytes(v []int16) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 2*len(v))
}

// benchReadOnly times the readers alone on a folder: the ceiling of a batch run's throughput.
func benchReadOnly(c *cli.Context, dir string) error {
	readers := c.Int("readers")
	if readers < 1 {
		return usageError{errors.New("bench: --readers must be >= 1")}
	}
	found, err := jobs.Discover([]string{dir}, false, c.String("output"), "{name}")
	if err != nil {
		return usageError{err}
	}
	batch := found.Jobs
	wall, voxels, err := pipeline.ReadAll(context.Background(), batch, readers, c.Int("slab"))
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "bench read-only %s: %d volumes, %d readers, %.2f s: %.2f volumes/s, %.0f Mvox/s\n",
		dir, len(batch), readers, wall.Seconds(), float64(len(batch))/wall.Seconds(), float64(voxels)/1e6/wall.Seconds())
	return nil
}

// benchSettings are bench's defaults for one kind of engine.
type benchSettings struct {
	dims                   string
	runs, warmup, fileRuns int
}

var (
	// gpuBenchDefaults time the volume of the latency targets (docs/perf.md).
	gpuBenchDefaults = benchSettings{dims: "512x512x1000", runs: 10, warmup: 2, fileRuns: 3}
	// cpuBenchDefaults: the CPU engine segments ~0.5-0.8 Mvox/s with the default model on two
	// cores, so 512x512x1000 would take 5-9 min a run and hours in all; 128x128x64 takes
	// 1.3-2 s a run there (~10 s for the whole bench).
	cpuBenchDefaults = benchSettings{dims: "128x128x64", runs: 3, warmup: 1, fileRuns: 1}
)

// benchSettingsFor returns the flags given on the command line, and the engine's defaults for
// those not given.
func benchSettingsFor(c *cli.Context, eng engine.Engine) benchSettings {
	set := gpuBenchDefaults
	if _, isCPU := eng.(*cpu.Engine); isCPU {
		set = cpuBenchDefaults
	}
	if c.IsSet("dims") {
		set.dims = c.String("dims")
	}
	if c.IsSet("runs") {
		set.runs = c.Int("runs")
	}
	if c.IsSet("warmup") {
		set.warmup = c.Int("warmup")
	}
	if c.IsSet("file-runs") {
		set.fileRuns = c.Int("file-runs")
	}
	return set
}
