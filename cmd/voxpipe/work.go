package main

// What run and watch share: their flags and the checks of them, the setup they open (metrics,
// model, engines), the claims, and the pipeline configuration.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"voxpipe/analysis"
	"voxpipe/engine/engine"

	"github.com/urfave/cli/v2"

	"voxpipe/io/dicom"
	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/model"
	"voxpipe/pipeline"
	"voxpipe/store/claim"
	"voxpipe/store/provenance"
	"voxpipe/store/records"
	"voxpipe/telemetry/metrics"
	"voxpipe/telemetry/progress"
)

// workFlags are the flags that run and watch share (readers: --readers' default).
func workFlags(readers int) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "output folder for masks and records (required)"},
		&cli.BoolFlag{Name: "recursive", Aliases: []string{"r"}, Usage: "search input folders recursively (masks mirror the sub-folders)"},
		&cli.IntFlag{Name: "slab", Value: 32, Usage: "z-slices per slab"},
		&cli.IntFlag{Name: "readers", Value: readers, Usage: "volumes read in parallel"},
		&cli.IntFlag{Name: "writers", Value: 1, Usage: "masks written in parallel"},
		&cli.StringFlag{Name: "mask-name", Value: "{name}_mask.nii.gz", Usage: "mask file name; {name} is the volume's name; .nii for uncompressed"},
		&cli.StringFlag{Name: "dicom-name", Value: dicom.DefaultName, Usage: "{name} of a DICOM series' mask: %i PatientID, %t StudyDate, %s SeriesNumber, %d SeriesDescription, %p ProtocolName, %m Modality, %e echo, %j/%k series/study UID, %h series ID (README: DICOM input)"},
		&cli.IntFlag{Name: "compression", Value: -1, Usage: "gzip level of .nii.gz masks: 0 (store) to 9, -1 default"},
		&cli.IntFlag{Name: "volume", DefaultText: "none", Usage: "segment volume `N` (0-based) of 4D inputs (default: a 4D input fails; 3D inputs take 0)"},
		&cli.BoolFlag{Name: "verify-inputs", Usage: "before skipping a volume, also re-hash its input (default: size and mtime must match)"},
		&cli.StringFlag{Name: "resample", Value: resampleAuto, Usage: "auto: a volume whose voxel size differs from the model card's by more than 10 % is resampled to it for the model, labels brought back to its grid; off: only reoriented"},
		&cli.BoolFlag{Name: "strict-domain", Usage: "fail volumes the domain check judges out-of-domain (field of view, spacing or intensity unlike the model's training, a constant volume, the model's confidence or label proportions unlike training), their masks not written; warnings never fail a volume"},
		&cli.BoolFlag{Name: "statistics", Usage: "write per-label statistics: OUT/statistics/<volume>.json and .csv, merged into OUT/statistics.csv"},
		&cli.BoolFlag{Name: "seg", Value: true, Usage: "write a DICOM SEG beside the mask of each DICOM series (<mask>.seg.dcm, in the series' study; --seg=false: none)"},
		&cli.BoolFlag{Name: "seg-empty-frames", Usage: "in the DICOM SEG, also write the frames of slices where a segment has no voxels"},
		&cli.BoolFlag{Name: "preview", Usage: "write a preview PNG per volume (three planes, labels overlaid): OUT/previews/<volume>.png"},
		&cli.StringFlag{Name: "max-memory", Value: defaultMaxMemory, Usage: "bound on host buffer memory: a size (8G, 512M), a percentage of RAM (or of the cgroup limit), or 0 for none; a volume that needs more fails alone"},
		&cli.DurationFlag{Name: "claim-timeout", Value: claim.DefaultTimeout, Usage: "a claim whose heartbeat is older than this, held by another host, is taken over"},
		&cli.StringFlag{Name: "run-id", Usage: "run id in the records (default: UTC time and random suffix); must be new to OUT"},
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "only errors on stderr, no progress bar"},
		&cli.DurationFlag{Name: "progress-interval", Value: 30 * time.Second, Usage: "when stderr is not a terminal, log a progress line this often (volumes done, planes in flight, rate, ETA)"},
		&cli.StringFlag{Name: "metrics-addr", Usage: "serve Prometheus metrics (/metrics, /healthz) on this host:port"},
	}
}

// startMetrics serves the Prometheus metrics of --metrics-addr, or does nothing (nil, a no-op
// stop) without it. An address that cannot be listened on is a usage error.
func startMetrics(c *cli.Context, log *slog.Logger) (*metrics.Metrics, func(), error) {
	addr := c.String("metrics-addr")
	if addr == "" {
		return nil, func() {}, nil
	}
	reg := metrics.NewRegistry()
	m := metrics.New(reg)
	stop, err := metrics.Serve(context.Background(), addr, reg, log)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("--metrics-addr: %w", err)}
	}
	return m, func() {
		if err := stop(); err != nil {
			log.Warn("metrics", "err", err)
		}
	}, nil
}

// withMetrics adds the metrics (when served) to a progress.
func (es *setup) withMetrics(p pipeline.Progress) pipeline.Progress {
	if es.metrics == nil {
		return p
	}
	return progress.Multi(p, es.metrics)
}

// progressLog is the progress lines of a run or watch whose stderr is not a terminal, or nil
// when --quiet or --progress-interval 0.
func progressLog(c *cli.Context, log *slog.Logger) pipeline.Progress {
	if c.Bool("quiet") || c.Duration("progress-interval") <= 0 {
		return nil
	}
	return progress.NewLog(log, c.Duration("progress-interval"))
}

// --resample values.
const (
	resampleAuto = "auto"
	resampleOff  = "off"
)

// workSettings are the checked values of workFlags.
type workSettings struct {
	outDir, maskName, runID string
	maxMemory               int64
}

// checkWorkFlags checks workFlags' values (usage errors), the output folder included.
func checkWorkFlags(c *cli.Context, cmd string) (workSettings, error) {
	ws := workSettings{outDir: c.String("output"), maskName: c.String("mask-name"), runID: orDefault(c.String("run-id"), newRunID())}
	if f := c.String("log-format"); f != "text" && f != "json" {
		return ws, usageError{fmt.Errorf("%s: --log-format must be text or json, not %q", cmd, f)}
	}
	if level := c.Int("compression"); level < -1 || level > 9 {
		return ws, usageError{fmt.Errorf("%s: --compression must be -1..9, not %d", cmd, level)}
	}
	for _, f := range []string{"slab", "readers", "writers"} {
		if c.Int(f) < 1 {
			return ws, usageError{fmt.Errorf("%s: --%s must be at least 1, not %d", cmd, f, c.Int(f))}
		}
	}
	if r := c.String("resample"); r != resampleAuto && r != resampleOff {
		return ws, usageError{fmt.Errorf("%s: --resample must be %s or %s, not %q", cmd, resampleAuto, resampleOff, r)}
	}
	if c.IsSet("volume") && c.Int("volume") < 0 {
		return ws, usageError{fmt.Errorf("%s: --volume must be 0 or more, not %d", cmd, c.Int("volume"))}
	}
	if err := checkMaskName(ws.maskName); err != nil {
		return ws, usageError{fmt.Errorf("%s: %w", cmd, err)}
	}
	var err error
	if ws.maxMemory, err = parseMemory(c.String("max-memory")); err != nil {
		return ws, usageError{fmt.Errorf("%s: %w", cmd, err)}
	}
	if c.Duration("claim-timeout") < time.Second {
		return ws, usageError{fmt.Errorf("%s: --claim-timeout %v is too short", cmd, c.Duration("claim-timeout"))}
	}
	if c.Duration("progress-interval") < 0 {
		return ws, usageError{fmt.Errorf("%s: --progress-interval must be 0 (no progress lines) or more, not %v", cmd, c.Duration("progress-interval"))}
	}
	if err := records.CheckNew(ws.outDir, ws.runID); err != nil {
		return ws, usageError{fmt.Errorf("%s: --run-id: %w", cmd, err)}
	}
	if err := checkEngineFlags(c, cmd); err != nil {
		return ws, err
	}
	return ws, nil
}

// checkNewFile checks, without writing, that a file can be created at path (empty: nothing
// asked): its folder exists, and unless mayExist, nothing is there yet.
func checkNewFile(path string, mayExist bool) error {
	if path == "" {
		return nil
	}
	if st, err := os.Lstat(path); err == nil && (!mayExist || st.IsDir()) {
		return fmt.Errorf("%s exists (a run's records are never overwritten)", path)
	}
	st, err := os.Stat(filepath.Dir(path))
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a folder", filepath.Dir(path))
	}
	return nil
}

// startClaims makes the claim manager of a run or watch on outDir and starts its heartbeat;
// stop ends the heartbeat.
func startClaims(outDir, runID string, timeout time.Duration) (*claim.Manager, func(), error) {
	claims, err := claim.NewManager(outDir, claim.Options{RunID: runID, Timeout: timeout})
	if err != nil {
		return nil, nil, err
	}
	stop := make(chan struct{})
	go claims.Heartbeat(stop)
	return claims, func() { close(stop) }, nil
}

// setup is what run and watch open before the work: the metrics server (when asked), the
// model and its engines.
type setup struct {
	metrics   *metrics.Metrics // nil without --metrics-addr
	model     *model.Model
	modelName string
	modelID   provenance.Model
	engines   []engine.Engine
}

// openSetup opens the metrics server, the model and the engines, and adds their closing to cl.
func openSetup(c *cli.Context, log *slog.Logger, cl *closers) (*setup, error) {
	es := &setup{}
	m, stopMetrics, err := startMetrics(c, log)
	if err != nil {
		return nil, err
	}
	es.metrics = m
	if es.model, es.modelName, es.modelID, es.engines, err = openModelAndEngines(c); err != nil {
		stopMetrics()
		return nil, err
	}
	cl.add(func() {
		closeEngines(es.engines)
		stopMetrics()
	})
	return es, nil
}

// workConfig is the pipeline configuration that run and watch share: the engines, the flags
// of the stages, claims, records, provenance and the metrics.
func workConfig(c *cli.Context, es *setup, claims *claim.Manager, rec *records.Run, log *slog.Logger) pipeline.Config {
	engines := es.engines
	kind, _, _ := strings.Cut(engines[0].Name(), ":")
	precision := engine.PrecisionFP32
	if kind != "cpu" {
		precision = c.String("precision")
	}
	host, _ := os.Hostname()
	cfg := pipeline.Config{
		Engines: engines,
		Prepare: pipeline.Prepare{
			Card:         es.model.Card,
			Resample:     c.String("resample") == resampleAuto,
			StrictDomain: c.Bool("strict-domain"),
		},
		Workers: pipeline.Workers{
			Slab:         c.Int("slab"),
			Readers:      c.Int("readers"),
			Writers:      c.Int("writers"),
			LeaveBuffers: true, // the process exits after the run: its exit frees them sooner
		},
		Output: pipeline.Output{
			Classes:      es.model.Classes,
			Descrip:      fmt.Sprintf("%s model %s", versionString(), es.modelName),
			Write:        nifti.WriteOptions{Level: c.Int("compression")},
			Claims:       claims,
			Provenance:   provenance.Record{Version: versionString(), Model: es.modelID, Engine: kind, Precision: precision},
			VerifyInputs: c.Bool("verify-inputs"),
			Analyser: &analysis.Outputs{Dir: c.String("output"), Statistics: c.Bool("statistics"), Preview: c.Bool("preview"),
				Labels: es.model.Labels()},
		},
		Telemetry: pipeline.Telemetry{
			Host:    host,
			RunID:   rec.ID,
			Timings: rec.Timings,
			Summary: rec.Summary,
			Log:     log,
		},
	}
	if c.Bool("seg") {
		cfg.Output.SEG = segOptions(es.model, es.modelName, es.modelID.SHA256, c.Bool("seg-empty-frames"))
	}
	if es.metrics != nil {
		cfg.Telemetry.Observer = es.metrics
	}
	if c.IsSet("volume") {
		v := c.Int("volume")
		cfg.Input.Volume = &v
	}
	return cfg
}

// updateTables regenerates the output folder's tables derived from every run: volumes.csv and,
// when volumes have statistics, statistics.csv.
func updateTables(out string, log *slog.Logger) {
	if err := records.UpdateVolumes(out); err != nil {
		log.Warn("volumes.csv", "err", err)
	}
	if err := analysis.MergeStatistics(out); err != nil {
		log.Warn(records.StatisticsName, "err", err)
	}
}

// noteDiscovery says once what discovery left out.
func noteDiscovery(log *slog.Logger, d *jobs.Discovery) {
	if d == nil {
		return
	}
	if n := len(d.OwnOutputs); n > 0 {
		log.Info("left out voxpipe masks found among the inputs", "count", n, "first", d.OwnOutputs[0])
	}
	for _, f := range d.SkippedFolders {
		log.Info("left out the output folder found inside an input folder", "folder", f)
	}
	if n := len(d.NotSearched); n > 0 {
		log.Info("left out sub-folders (-r searches them)", "count", n, "first", d.NotSearched[0])
	}
	if left := d.LeftOut(); len(left) > 0 {
		const shown = 5
		var files []string
		for _, l := range left[:min(shown, len(left))] {
			files = append(files, l.Path+" ("+l.Reason+")")
		}
		log.Info("left out input files that are not volumes", "count", len(left), "files", files,
			"all", "listed in the run's "+records.IgnoredName)
	}
}

// writeIgnored lists the input files the run left out in its folder's ignored.csv.
func writeIgnored(rec *records.Run, d *jobs.Discovery) error {
	left := d.LeftOut()
	if len(left) == 0 {
		return nil
	}
	rows := make([]records.Ignored, len(left))
	for i, l := range left {
		rows[i] = records.Ignored{RunID: rec.ID, Path: l.Path, Reason: l.Reason}
	}
	return records.WriteIgnored(rec.Dir, rows)
}
func newLogger(w io.Writer, format string, quiet bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if quiet {
		opts.Level = slog.LevelError
	}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func newRunID() string {
	var b [3]byte
	rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// switchWriter lets the logger move from above the progress bars back to stderr.
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
