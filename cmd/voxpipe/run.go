package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"voxpipe/io/dicom"
	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/pipeline"
	"voxpipe/store/claim"
	"voxpipe/store/records"
	"voxpipe/telemetry/progress"
	"voxpipe/telemetry/timing"
)

func init() {
	commands = append(commands, &cli.Command{
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
	})
}

// Exit codes of an interrupted run, as shells report a death by that signal.
const (
	exitSIGINT  = 130
	exitSIGTERM = 143
)

// signalGrace is how long a signalled run may take to stop cleanly before it removes its
// temporaries, releases its claims and exits anyway (a CPU slab, a hung file system).
var signalGrace = 1500 * time.Millisecond

// forceCleanup bounds the clean-up of a run ended by force.
const forceCleanup = 300 * time.Millisecond

func runAction(c *cli.Context) error {
	if c.NArg() == 0 {
		return usageError{errors.New("run: give at least one input file or folder")}
	}
	// Every usage error is found before anything is written.
	ws, err := checkWorkFlags(c, "run")
	if err != nil {
		return err
	}
	outDir, maskName, runID, maxMemory := ws.outDir, ws.maskName, ws.runID, ws.maxMemory
	shard, err := jobs.ParseShard(c.String("shard"), c.Int("shard-count"), os.Getenv)
	if err != nil {
		return usageError{fmt.Errorf("run: --shard: %w", err)}
	}
	if err := dicom.CheckName(c.String("dicom-name")); err != nil {
		return usageError{fmt.Errorf("run: --dicom-name: %w", err)}
	}
	for _, f := range []string{"timings", "summary", "trace"} {
		if err := checkNewFile(c.String(f), f == "trace"); err != nil {
			return usageError{fmt.Errorf("run: --%s: %w", f, err)}
		}
	}

	// Bars on a terminal, log lines otherwise; logs print above the bars.
	logOut := &switchWriter{w: os.Stderr}
	quiet := c.Bool("quiet")
	log := newLogger(logOut, c.String("log-format"), quiet)

	found, err := jobs.DiscoverDICOM(c.Args().Slice(), c.Bool("recursive"), outDir, maskName, c.String("dicom-name"))
	if errors.Is(err, jobs.ErrNoInputs) {
		noteDiscovery(log, found)
		log.Info("nothing to do: no NIfTI volumes or DICOM series in the inputs", "inputs", c.Args().Slice())
		return nil
	}
	if err != nil {
		return usageError{err}
	}
	noteDiscovery(log, found)
	batch := found.Jobs
	if err := jobs.CheckOutputs(batch); err != nil {
		return usageError{err}
	}
	if batch = shard.Filter(batch); len(batch) == 0 {
		log.Info("nothing to do: no volume falls in this shard", "shard", shard.String(), "volumes", len(found.Jobs))
		return nil
	}
	es, closeSetup, err := openSetup(c, log)
	if err != nil {
		return err
	}
	defer closeSetup()

	// Now the run's outputs: the folder, the trace, the records.
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

	var rec *records.Run
	defaultRecords := c.String("timings") == "" && c.String("summary") == ""
	if !defaultRecords {
		rec, err = records.CreateAt(runID,
			orDefault(c.String("timings"), filepath.Join(records.RunDir(outDir, runID), records.TimingsName)),
			orDefault(c.String("summary"), filepath.Join(records.RunDir(outDir, runID), records.SummaryName)))
	} else {
		rec, err = records.Create(outDir, runID)
	}
	if err != nil {
		return usageError{fmt.Errorf("run: %w", err)}
	}
	defer rec.Close()
	if defaultRecords {
		if err := writeIgnored(rec, found); err != nil {
			log.Warn("record the files left out", "err", err)
		}
	}
	claims, stopClaims, err := startClaims(outDir, runID, c.Duration("claim-timeout"))
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer stopClaims()

	var reporter pipeline.Progress
	if !quiet && term.IsTerminal(int(os.Stderr.Fd())) {
		bars := progress.NewBars(os.Stderr)
		reporter = bars
		logOut.set(bars.Writer())
		defer logOut.set(os.Stderr) // the bars are gone once the run returns
	} else if p := progressLog(c, log); p != nil {
		reporter = p
	}
	cfg := workConfig(c, es, claims, rec, log)
	cfg.Input.Jobs, cfg.Telemetry.Shard, cfg.Telemetry.Progress = batch, shard.String(), es.withMetrics(reporter)
	cfg.Output.Overwrite, cfg.FailFast = c.Bool("overwrite"), c.Bool("fail-fast")
	cfg.Workers.MaxMemory = maxMemory

	if c.String("trace") != "" {
		cfg.Telemetry.Trace = &timing.Trace{}
	}
	log.Info("run", "run_id", cfg.Telemetry.RunID, "volumes", len(batch), "shard", cfg.Telemetry.Shard, "engines", engineNames(es.engines), "model", es.modelName,
		"output", outDir, "records", rec.Dir, "max_memory_bytes", maxMemory)

	// A signal stops the run; if it has not stopped within signalGrace, what it holds is
	// cleaned up and the process exits anyway.
	ctx, sig := signalContext(context.Background(), log, func(code int) { forceExit(claims, rec, code) })
	defer sig.stop()
	res, runErr := pipeline.Run(ctx, cfg)
	logOut.set(os.Stderr)
	noteKernels(es.engines, log, cfg.Telemetry.Trace)
	if cfg.Telemetry.Trace != nil {
		if err := cfg.Telemetry.Trace.WriteFile(c.String("trace")); err != nil {
			log.Error("trace", "err", err)
		}
		for dev, o := range cfg.Telemetry.Trace.CopyOverlap() {
			log.Info("copies under kernels", "device", dev, "copy_ms", o.Copy, "hidden_pct", 100*o.Fraction())
		}
	}
	if err := rec.Close(); err != nil && runErr == nil {
		runErr = err
	}
	switch {
	case defaultRecords && runErr == nil && sig.received() == nil && res.Skipped == len(batch):
		// Every mask was up to date: a scheduled tick over a finished folder leaves nothing.
		if err := os.RemoveAll(rec.Dir); err != nil {
			log.Warn("remove the records of a run with nothing to do", "err", err)
		}
		log.Info("nothing to do: every mask is up to date", "volumes", len(batch))
		return nil
	default:
		updateTables(outDir, log)
	}
	log.Info("run finished", "ok", res.OK, "skipped", res.Skipped, "busy", res.Busy, "conflict", res.Conflict,
		"failed", res.Failed, "records", rec.Dir)
	switch {
	case sig.received() == syscall.SIGINT:
		return cli.Exit("interrupted", exitSIGINT)
	case sig.received() == syscall.SIGTERM:
		return cli.Exit("terminated", exitSIGTERM)
	case runErr != nil:
		return cli.Exit(runErr.Error(), exitFailed)
	case res.Failed > 0 || res.Conflict > 0:
		return cli.Exit(fmt.Sprintf("%d of %d volumes failed, %d in conflict (see %s)", res.Failed, len(batch), res.Conflict, rec.Dir), exitFailed)
	}
	return nil
}

// forceExit ends a run or watch that did not stop in time: it removes the temporaries of its
// claimed volumes, releases the claims, closes the records, and exits with code. The clean-up
// is bounded too: a lock held by a stopped process or a hung file system must not keep the
// process alive.
func forceExit(claims *claim.Manager, rec *records.Run, code int) {
	done := make(chan struct{})
	go func() {
		removeClaimed(claims)
		rec.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(forceCleanup):
	}
	os.Exit(code)
}

// removeClaimed removes the temporaries of the volumes this process has claimed and releases
// the claims: what a run stopped by force leaves behind otherwise.
func removeClaimed(m *claim.Manager) {
	for _, c := range m.Held() {
		if tmps, err := filepath.Glob(nifti.TempPattern(c.Mask())); err == nil {
			for _, t := range tmps {
				os.Remove(t)
			}
		}
		c.Release()
	}
}

// signals cancels a context on the first SIGINT/SIGTERM. If the run has not returned
// signalGrace later, or on a second signal, it calls force with the exit code, which must
// clean up and exit.
type signals struct {
	ch     chan os.Signal
	got    chan os.Signal
	cancel context.CancelFunc
}

func signalContext(parent context.Context, log *slog.Logger, force func(code int)) (context.Context, *signals) {
	ctx, cancel := context.WithCancel(parent)
	s := &signals{ch: make(chan os.Signal, 2), got: make(chan os.Signal, 1), cancel: cancel}
	signal.Notify(s.ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		first, ok := <-s.ch
		if !ok {
			return
		}
		s.got <- first
		code := exitSIGINT
		if first == syscall.SIGTERM {
			code = exitSIGTERM
		}
		log.Warn("stopping: removing temporaries and releasing claims (signal again to exit at once)", "signal", first.String())
		cancel()
		select {
		case second, ok := <-s.ch:
			if !ok {
				return
			}
			log.Error("exiting at once", "signal", second.String())
		case <-time.After(signalGrace):
			log.Error("the run did not stop in time; exiting", "grace", signalGrace.String())
		}
		force(code)
	}()
	return ctx, s
}

func (s *signals) received() os.Signal {
	select {
	case sig := <-s.got:
		s.got <- sig
		return sig
	default:
		return nil
	}
}

func (s *signals) stop() {
	signal.Stop(s.ch)
	close(s.ch)
	s.cancel()
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
