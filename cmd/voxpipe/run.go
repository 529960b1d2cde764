package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"voxpipe/engine/engine"
	"voxpipe/io/dicom"
	"voxpipe/jobs"
	"voxpipe/pipeline"
	"voxpipe/session"
	"voxpipe/store/records"
	"voxpipe/telemetry/progress"
	"voxpipe/telemetry/timing"
)

func init() {
	commandMakers = append(commandMakers, func() *cli.Command {
		return &cli.Command{
			Name:      "run",
			Before:    requireFlags("output"),
			Usage:     "segment every NIfTI volume and DICOM series in the inputs (files or folders) and write masks and timing CSVs",
			ArgsUsage: "INPUT...",
			Description: "Safe to run unattended and concurrently on one output folder: each volume is claimed\n" +
				"before it is worked on, inputs are never written, and each run keeps its own records\n" +
				"under OUT/runs/<run id>/ (README: Running unattended).\n" +
				"Exit codes: 0 every volume ok, skipped (up to date) or busy (claimed by another live process);\n" +
				"1 a volume failed or is in conflict; 2 usage; 130/143 stopped by SIGINT/SIGTERM.",
			Flags: append(append(engineFlags("all"), workFlags(2)...),
				&cli.BoolFlag{Name: "overwrite", Usage: "redo every volume, replacing up-to-date masks and files voxpipe did not write (default: skip up-to-date masks, report other files as conflicts)"},
				&cli.BoolFlag{Name: "fail-fast", Usage: "stop at the first failed volume (default: go on)"},
				&cli.StringFlag{Name: "shard", Usage: "do one part of the batch: i/n, or auto (a Slurm array task, or a Kubernetes Indexed Job pod with --shard-count); volumes are split by a stable hash of their names"},
				&cli.IntFlag{Name: "shard-count", DefaultText: "$" + jobs.EnvShardCount, Usage: "the number of shards for --shard auto under a Kubernetes Indexed Job (default $" + jobs.EnvShardCount + ")"},
				&cli.StringFlag{Name: "timings", Usage: "timings CSV (default OUT/runs/<run id>/timings.csv); must not exist"},
				&cli.StringFlag{Name: "summary", Usage: "summary CSV (default OUT/runs/<run id>/summary.csv); must not exist; elsewhere, the run is not in OUT/volumes.csv"},
				&cli.StringFlag{Name: "trace", Usage: "write a Chrome/Perfetto trace (JSON) of every stage and slab"},
			),
			Action: runAction,
		}
	})
}

func runAction(c *cli.Context) error {
	if c.NArg() == 0 {
		return usageError{errors.New("run: give at least one input file or folder")}
	}
	// Every usage error is found before anything is written.
	ws, shard, err := checkRunFlags(c)
	if err != nil {
		return err
	}
	return runBatch(c, ws, shard, batchInput{inputs: c.Args().Slice(), dicomName: c.String("dicom-name")})
}

// batchInput is what a batch is made of besides the flags: `run`'s arguments, or the series
// `pacs sync` retrieved (named by their IDs, each volume's end seen by observe).
type batchInput struct {
	inputs    []string
	dicomName string
	observe   pipeline.Progress // nil: none
}

// runBatch is `run` once its flags are checked: it discovers the inputs' volumes, segments
// them and returns the run's exit.
func runBatch(c *cli.Context, ws workSettings, shard jobs.Shard, in batchInput) error {
	// Bars on a terminal, log lines otherwise; logs print above the bars.
	logOut := &switchWriter{w: c.App.ErrWriter}
	log := newLogger(logOut, c.String("log-format"), c.Bool("quiet"))
	found, batch, err := findBatch(c, in, ws.outDir, ws.maskName, shard, log)
	if err != nil || len(batch) == 0 {
		return err
	}
	var cl closers
	defer cl.close()
	es, err := openSetup(c, log, &cl)
	if err != nil {
		return err
	}
	// Now the run's outputs: the folder, the trace, the records.
	if err := prepareOutputs(c, ws.outDir, batch, log); err != nil {
		return err
	}
	rec, defaultRecords, err := createRecords(c, ws, found, log)
	if err != nil {
		return err
	}
	cl.add(func() { rec.Close() })
	claims, stopClaims, err := startClaims(ws.outDir, ws.runID, c.Duration("claim-timeout"))
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	cl.add(stopClaims)

	cfg := workConfig(c, es, claims, rec, log)
	reporter, restoreLog := runProgress(c, log, logOut)
	cl.add(restoreLog) // the bars are gone once the run returns
	cfg.Input.Jobs, cfg.Telemetry.Shard, cfg.Telemetry.Progress = batch, shard.String(), es.withMetrics(reporter)
	if in.observe != nil {
		cfg.Telemetry.Progress = progress.Multi(cfg.Telemetry.Progress, in.observe)
	}
	cfg.Output.Overwrite, cfg.FailFast = c.Bool("overwrite"), c.Bool("fail-fast")
	cfg.Workers.MaxMemory = ws.maxMemory
	if c.String("trace") != "" {
		cfg.Telemetry.Trace = &timing.Trace{}
	}
	log.Info("run", "run_id", cfg.Telemetry.RunID, "volumes", len(batch), "shard", cfg.Telemetry.Shard, "engines", engineNames(es.engines), "model", es.modelName,
		"output", ws.outDir, "records", rec.Dir, "max_memory_bytes", ws.maxMemory)

	// A signal stops the run; if it has not stopped within signalGrace, what it holds is
	// cleaned up and the run ends anyway, with the signal's exit code.
	sd := session.Start(context.Background(), runStages(log))
	defer sd.Close()
	fin := runFinish{c: c, log: log, logOut: logOut, engines: es.engines, trace: cfg.Telemetry.Trace, rec: rec,
		defaultRecords: defaultRecords, volumes: jobNames(batch), outDir: ws.outDir, sd: sd}
	var exit error
	if cl.forced = sd.Wait(func() { exit = fin.finish(pipeline.Run(sd.Drained(), cfg)) }); cl.forced {
		return forcedStop(claims, rec, sd.Signal())
	}
	return exit
}

// runFinish is what a run does once the pipeline returned: the trace, the records and tables,
// and the exit code. It runs under the shutdown's bound too: a second signal, or a hung file
// system past the grace, still ends the run.
type runFinish struct {
	c              *cli.Context
	log            *slog.Logger
	logOut         *switchWriter
	engines        []engine.Engine
	trace          *timing.Trace
	rec            *records.Run
	defaultRecords bool
	volumes        []string // the batch's volume names
	outDir         string
	sd             *session.Shutdown
}

func (f runFinish) finish(res pipeline.Result, runErr error) error {
	f.logOut.set(f.c.App.ErrWriter)
	noteKernels(f.engines, f.log, f.trace)
	writeTrace(f.c.String("trace"), f.trace, f.log)
	if err := f.rec.Close(); err != nil && runErr == nil {
		runErr = err
	}
	if f.defaultRecords && runErr == nil && f.sd.Signal() == nil && res.Skipped == len(f.volumes) && records.Settled(f.outDir, f.volumes) {
		// Every mask was up to date, and volumes.csv has nothing the skipped rows would change:
		// a scheduled tick over a finished folder leaves nothing. (Where a volume is missing
		// from the table or busy there, they stay and correct it.)
		if err := os.RemoveAll(f.rec.Dir); err != nil {
			f.log.Warn("remove the records of a run with nothing to do", "err", err)
		}
		f.log.Info("nothing to do: every mask is up to date", "volumes", len(f.volumes))
		return nil
	}
	updateTables(f.outDir, f.log)
	f.log.Info("run finished", "ok", res.OK, "skipped", res.Skipped, "busy", res.Busy, "conflict", res.Conflict,
		"failed", res.Failed, "records", f.rec.Dir)
	return runExit(f.sd.Signal(), runErr, res, len(f.volumes), f.rec.Dir)
}

// checkRunFlags checks the flags of run (usage errors).
func checkRunFlags(c *cli.Context) (workSettings, jobs.Shard, error) {
	ws, err := checkWorkFlags(c, "run")
	if err != nil {
		return ws, jobs.Shard{}, err
	}
	shard, err := jobs.ParseShard(c.String("shard"), c.Int("shard-count"), os.Getenv)
	if err != nil {
		return ws, shard, usageError{fmt.Errorf("run: --shard: %w", err)}
	}
	if err := dicom.CheckName(c.String("dicom-name")); err != nil {
		return ws, shard, usageError{fmt.Errorf("run: --dicom-name: %w", err)}
	}
	for _, f := range []string{"timings", "summary", "trace"} {
		if err := checkNewFile(c.String(f), f == "trace"); err != nil {
			return ws, shard, usageError{fmt.Errorf("run: --%s: %w", f, err)}
		}
	}
	return ws, shard, nil
}

// findBatch discovers the volumes of the inputs and keeps this shard's; an empty batch with
// no error is nothing to do (logged).
func findBatch(c *cli.Context, in batchInput, outDir, maskName string, shard jobs.Shard, log *slog.Logger) (*jobs.Discovery, []jobs.Job, error) {
	found, err := jobs.DiscoverDICOM(in.inputs, c.Bool("recursive"), outDir, maskName, in.dicomName)
	if errors.Is(err, jobs.ErrNoInputs) {
		noteDiscovery(log, found)
		log.Info("nothing to do: no NIfTI volumes or DICOM series in the inputs", "inputs", in.inputs)
		return found, nil, nil
	}
	if err != nil {
		return nil, nil, usageError{err}
	}
	noteDiscovery(log, found)
	batch := found.Jobs
	if err := jobs.CheckOutputs(batch); err != nil {
		return nil, nil, usageError{err}
	}
	if batch = shard.Filter(batch); len(batch) == 0 {
		log.Info("nothing to do: no volume falls in this shard", "shard", shard.String(), "volumes", len(found.Jobs))
	}
	return found, batch, nil
}

// prepareOutputs checks that the output folder can be written, creates the trace file (so
// that it is known to be writable before the work), and warns when the masks may not fit.
func prepareOutputs(c *cli.Context, outDir string, batch []jobs.Job, log *slog.Logger) error {
	if err := checkWritable(outDir); err != nil {
		return usageError{fmt.Errorf("run: %w", err)}
	}
	if path := c.String("trace"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return usageError{fmt.Errorf("run: --trace: %w", err)}
		}
		f.Close()
	}
	if need := maskBytesEstimate(batch); need > 0 {
		if free, err := freeBytes(outDir); err == nil && free < need {
			log.Warn("the output folder's file system may be too full for the masks", "free_bytes", free, "estimated_bytes", need)
		}
	}
	return nil
}

// createRecords creates the run's records: in OUT/runs/<run id>/ (defaultRecords), listing
// the files discovery left out, or at --timings and --summary.
func createRecords(c *cli.Context, ws workSettings, found *jobs.Discovery, log *slog.Logger) (rec *records.Run, defaultRecords bool, err error) {
	defaultRecords = c.String("timings") == "" && c.String("summary") == ""
	if !defaultRecords {
		rec, err = records.CreateAt(ws.runID,
			orDefault(c.String("timings"), filepath.Join(records.RunDir(ws.outDir, ws.runID), records.TimingsName)),
			orDefault(c.String("summary"), filepath.Join(records.RunDir(ws.outDir, ws.runID), records.SummaryName)))
	} else {
		rec, err = records.Create(ws.outDir, ws.runID)
	}
	if err != nil {
		return nil, false, usageError{fmt.Errorf("run: %w", err)}
	}
	if defaultRecords {
		if err := writeIgnored(rec, found); err != nil {
			log.Warn("record the files left out", "err", err)
		}
	}
	return rec, defaultRecords, nil
}

// runProgress is the run's progress: bars on a terminal (the log then prints above them until
// restore), log lines otherwise, or none.
func runProgress(c *cli.Context, log *slog.Logger, logOut *switchWriter) (reporter pipeline.Progress, restore func()) {
	if f, ok := c.App.ErrWriter.(*os.File); ok && !c.Bool("quiet") && term.IsTerminal(int(f.Fd())) {
		bars := progress.NewBars(f)
		logOut.set(bars.Writer())
		return bars, func() { logOut.set(f) }
	}
	if p := progressLog(c, log); p != nil {
		return p, func() {}
	}
	return nil, func() {}
}

// writeTrace writes the run's trace, when asked, and logs how much of the copies the kernels
// hid.
func writeTrace(path string, trace *timing.Trace, log *slog.Logger) {
	if trace == nil {
		return
	}
	if err := trace.WriteFile(path); err != nil {
		log.Error("trace", "err", err)
	}
	for dev, o := range trace.CopyOverlap() {
		log.Info("copies under kernels", "device", dev, "copy_ms", o.Copy, "hidden_pct", 100*o.Fraction())
	}
}

// runExit is how a finished run ends: the signal that stopped it, its error, or its failed
// and conflicting volumes.
func runExit(sig os.Signal, runErr error, res pipeline.Result, volumes int, recDir string) error {
	switch {
	case sig == syscall.SIGINT:
		return cli.Exit("interrupted", exitSIGINT)
	case sig == syscall.SIGTERM:
		return cli.Exit("terminated", exitSIGTERM)
	case runErr != nil:
		return cli.Exit(runErr.Error(), exitFailed)
	case res.Failed > 0 || res.Conflict > 0:
		return cli.Exit(fmt.Sprintf("%d of %d volumes failed, %d in conflict (see %s)", res.Failed, volumes, res.Conflict, recDir), exitFailed)
	}
	return nil
}

// jobNames lists the names of the batch's volumes.
func jobNames(batch []jobs.Job) []string {
	names := make([]string, len(batch))
	for i, j := range batch {
		names[i] = j.Name
	}
	return names
}
