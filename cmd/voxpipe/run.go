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

	"voxpipe/io/nifti"
	"voxpipe/pipeline"
	"voxpipe/pipeline/timing"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:      "run",
		Usage:     "segment every NIfTI volume in the inputs (files or folders) and write masks and timing CSVs",
		ArgsUsage: "INPUT...",
		Flags: append(engineFlags("all"),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Required: true, Usage: "output folder for masks and CSVs"},
			&cli.BoolFlag{Name: "recursive", Aliases: []string{"r"}, Usage: "search input folders recursively (masks mirror the sub-folders)"},
			&cli.IntFlag{Name: "slab", Value: 32, Usage: "z-slices per slab"},
			&cli.IntFlag{Name: "readers", Value: 2, Usage: "volumes read in parallel"},
			&cli.IntFlag{Name: "writers", Value: 1, Usage: "masks written in parallel"},
			&cli.StringFlag{Name: "mask-name", Value: "{name}_mask.nii.gz", Usage: "mask file name; {name} is the volume's name; .nii for uncompressed"},
			&cli.IntFlag{Name: "compression", Value: -1, Usage: "gzip level of .nii.gz masks: 0 (store) to 9, -1 default"},
			&cli.BoolFlag{Name: "overwrite", Usage: "redo volumes whose mask exists (default: skip them)"},
			&cli.BoolFlag{Name: "fail-fast", Usage: "stop at the first failed volume (default: go on)"},
			&cli.StringFlag{Name: "timings", Usage: "timings CSV (default OUT/timings.csv)"},
			&cli.StringFlag{Name: "summary", Usage: "summary CSV (default OUT/summary.csv)"},
			&cli.StringFlag{Name: "trace", Usage: "write a Chrome/Perfetto trace (JSON) of every stage and slab"},
			&cli.StringFlag{Name: "run-id", Usage: "run id in the CSVs (default: time and random suffix)"},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "only errors on stderr, no progress bar"},
		),
		Action: runAction,
	})
}

// Exit codes of an interrupted run, as shells report a death by that signal.
const (
	exitSIGINT  = 130
	exitSIGTERM = 143
)

func runAction(c *cli.Context) error {
	if c.NArg() == 0 {
		return usageError{errors.New("run: give at least one input file or folder")}
	}
	outDir := c.String("output")
	logFormat := c.String("log-format")
	if logFormat != "text" && logFormat != "json" {
		return usageError{fmt.Errorf("run: --log-format must be text or json, not %q", logFormat)}
	}
	level := c.Int("compression")
	if level < -1 || level > 9 {
		return usageError{fmt.Errorf("run: --compression must be -1..9, not %d", level)}
	}
	jobs, err := pipeline.Discover(c.Args().Slice(), c.Bool("recursive"), outDir, c.String("mask-name"))
	if err != nil {
		return usageError{err}
	}
	model, modelName, engines, err := openModelAndEngines(c)
	if err != nil {
		return err
	}
	defer closeEngines(engines)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	timingsPath := orDefault(c.String("timings"), filepath.Join(outDir, "timings.csv"))
	summaryPath := orDefault(c.String("summary"), filepath.Join(outDir, "summary.csv"))
	timings, err := timing.CreateCSV[timing.Row](timingsPath)
	if err != nil {
		return err
	}
	defer timings.Close()
	summary, err := timing.CreateCSV[timing.Summary](summaryPath)
	if err != nil {
		return err
	}
	defer summary.Close()

	// Bars on a terminal, log lines otherwise; logs print above the bars.
	logOut := &switchWriter{w: os.Stderr}
	var progress pipeline.Progress
	quiet := c.Bool("quiet")
	if !quiet && term.IsTerminal(int(os.Stderr.Fd())) {
		bars := pipeline.NewBars(os.Stderr)
		progress = bars
		logOut.set(bars.Writer())
		defer logOut.set(os.Stderr) // the bars are gone once the run returns
	}
	log := newLogger(logOut, logFormat, quiet)

	cfg := pipeline.Config{
		Jobs: jobs, Engines: engines, Classes: model.Classes,
		Descrip: "voxpipe " + modelName,
		Slab:    c.Int("slab"), Readers: c.Int("readers"), Writers: c.Int("writers"),
		Write:     nifti.WriteOptions{Level: level},
		Overwrite: c.Bool("overwrite"), FailFast: c.Bool("fail-fast"),
		LeaveBuffers: true, // the process exits after the run: its exit frees them sooner
		RunID:        orDefault(c.String("run-id"), newRunID()),
		Timings:      timings, Summary: summary, Log: log, Progress: progress,
	}
	if c.String("trace") != "" {
		cfg.Trace = &timing.Trace{}
	}
	names := make([]string, len(engines))
	for i, e := range engines {
		names[i] = e.Name()
	}
	log.Info("run", "run_id", cfg.RunID, "volumes", len(jobs), "engines", names, "model", modelName, "output", outDir)

	ctx, sig := signalContext(context.Background(), log)
	defer sig.stop()
	res, runErr := pipeline.Run(ctx, cfg)
	logOut.set(os.Stderr)
	if cfg.Trace != nil {
		if err := cfg.Trace.WriteFile(c.String("trace")); err != nil {
			log.Error("trace", "err", err)
		}
	}
	for _, f := range []interface{ Close() error }{timings, summary} {
		if err := f.Close(); err != nil && runErr == nil {
			runErr = err
		}
	}
	log.Info("run finished", "ok", res.OK, "skipped", res.Skipped, "failed", res.Failed,
		"timings", timingsPath, "summary", summaryPath)
	switch {
	case sig.received() == syscall.SIGINT:
		return cli.Exit("interrupted", exitSIGINT)
	case sig.received() == syscall.SIGTERM:
		return cli.Exit("terminated", exitSIGTERM)
	case runErr != nil:
		return cli.Exit(runErr.Error(), exitFailed)
	case res.Failed > 0:
		return cli.Exit(fmt.Sprintf("%d of %d volumes failed (see %s)", res.Failed, len(jobs), summaryPath), exitFailed)
	}
	return nil
}

// signals cancels a context on the first SIGINT/SIGTERM; a second one exits at once.
type signals struct {
	ch     chan os.Signal
	got    chan os.Signal
	cancel context.CancelFunc
}

func signalContext(parent context.Context, log *slog.Logger) (context.Context, *signals) {
	ctx, cancel := context.WithCancel(parent)
	s := &signals{ch: make(chan os.Signal, 2), got: make(chan os.Signal, 1), cancel: cancel}
	signal.Notify(s.ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		first, ok := <-s.ch
		if !ok {
			return
		}
		s.got <- first
		log.Warn("stopping: removing temporaries and flushing CSVs (signal again to exit at once)", "signal", first.String())
		cancel()
		if second, ok := <-s.ch; ok {
			log.Error("exiting at once", "signal", second.String())
			os.Exit(exitSIGINT)
		}
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
