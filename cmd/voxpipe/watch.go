package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
	"voxpipe/engine/engine"
	"voxpipe/session"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/urfave/cli/v2"

	"voxpipe/inbox"
	"voxpipe/io/dicom"
	"voxpipe/jobs"
	"voxpipe/pipeline"
	"voxpipe/store/claim"
	"voxpipe/store/records"
	"voxpipe/telemetry/progress"
	"voxpipe/telemetry/timing"
)

func init() {
	commandMakers = append(commandMakers, func() *cli.Command {
		return &cli.Command{
			Name:      "watch",
			Before:    requireFlags("output"),
			Usage:     "a service: segment every volume and DICOM series that arrives in the inbox folders, with the engine kept open",
			ArgsUsage: "INBOX...",
			Description: "A volume is taken when it is complete: moved in by rename (complete when first seen), marked\n" +
				"by a <name>.ready file, or unchanged in size and mtime for --settle. Other files are read as\n" +
				"DICOM and grouped by series; a series is taken once none of its files has been new or changed\n" +
				"for --settle, and taken again, with a warning, if it grows afterwards. It uses run's claims,\n" +
				"records (one run folder for the service's life) and provenance, so watchers and runs can\n" +
				"share an output folder. Under systemd (Type=notify) it reports READY, STOPPING and WATCHDOG.\n" +
				"On SIGTERM or SIGINT it takes no new volume, finishes those in flight within --grace,\n" +
				"releases its claims and exits 0; 143/130 when it had to abandon volumes at the grace's end.",
			Flags: append(append(engineFlags("all"), workFlags(1)...),
				&cli.DurationFlag{Name: "settle", Value: inbox.DefaultSettle, Usage: "a file unchanged in size and mtime this long is taken as complete; so is a DICOM series none of whose files is new or changed this long"},
				&cli.DurationFlag{Name: "rescan", Value: inbox.DefaultRescan, Usage: "rescan the inboxes this often (network file systems send no events)"},
				&cli.StringFlag{Name: "ready-suffix", Value: inbox.DefaultReadySuffix, Usage: "a file <volume><suffix> marks the volume complete"},
				&cli.DurationFlag{Name: "grace", Value: 30 * time.Second, Usage: "on SIGTERM, time to finish the volumes in flight"},
			),
			Action: watchAction,
		}
	})
}

// volumesRefresh is how often, at most, a watch regenerates volumes.csv as volumes finish.
const volumesRefresh = 5 * time.Second

func watchAction(c *cli.Context) error {
	ws, err := checkWatchFlags(c)
	if err != nil {
		return err
	}
	log := newLogger(c.App.ErrWriter, c.String("log-format"), c.Bool("quiet"))
	// SIGTERM/SIGINT: stop taking volumes at once, abandon those in flight after --grace, and
	// end by force if even that does not end the work (as run does). Handled from here on, so
	// that a signal while the engine opens ends the watch cleanly too (exit 0, nothing done).
	sd := session.Start(context.Background(), watchStages(c.Duration("grace"), log))
	defer sd.Close()
	var cl closers
	defer cl.close()
	es, err := openSetup(c, log, &cl)
	if err != nil {
		return err
	}
	box, err := openInbox(c, ws, es, log)
	if err != nil {
		return err
	}
	rec, claims, err := openServiceRecords(c, ws, &cl, "watch")
	if err != nil {
		return err
	}

	refresh := newVolumesRefresher(ws.outDir, log)
	cl.add(refresh.stop)
	cfg := watchConfig(c, ws, es, box, claims, rec, log, refresh)

	intake, stopIntake := context.WithCancel(sd.Drained())
	defer stopIntake()
	inboxDone := make(chan error, 1)
	go func() { inboxDone <- box.Run(intake, watchdogPing()) }()
	log.Info("watch", "run_id", ws.runID, "inboxes", c.Args().Slice(), "engines", engineNames(es.engines), "model", es.modelName,
		"output", ws.outDir, "records", rec.Dir, "settle", c.Duration("settle").String())
	daemon.SdNotify(false, daemon.SdNotifyReady)

	var res pipeline.Result
	var runErr error
	cl.forced = sd.Wait(func() {
		res, runErr = pipeline.Run(sd.Aborted(), cfg)
		stopIntake()
		if err := <-inboxDone; err != nil && runErr == nil {
			runErr = err
		}
		if err := rec.Close(); err != nil && runErr == nil {
			runErr = err
		}
		refresh.stop()
		updateTables(ws.outDir, log)
		log.Info("watch finished", "ok", res.OK, "skipped", res.Skipped, "busy", res.Busy, "conflict", res.Conflict,
			"failed", res.Failed, "records", rec.Dir)
	})
	if cl.forced {
		return forcedStop(claims, rec, sd.Signal())
	}
	switch sig := sd.Signal(); {
	case sig != nil && sd.WasAborted():
		return cli.Exit("stopped; volumes in flight were abandoned", session.ExitCode(sig))
	case sig != nil:
		return nil // stopped as asked, nothing abandoned
	case runErr != nil:
		return cli.Exit(runErr.Error(), exitFailed)
	}
	return nil
}

// openServiceRecords creates a service's records (one run folder for its life) and starts its
// claims' heartbeat; cl closes both.
func openServiceRecords(c *cli.Context, ws workSettings, cl *closers, cmd string) (*records.Run, *claim.Manager, error) {
	rec, err := records.Create(ws.outDir, ws.runID)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("%s: %w", cmd, err)}
	}
	cl.add(func() { rec.Close() })
	claims, stopClaims, err := startClaims(ws.outDir, ws.runID, c.Duration("claim-timeout"))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", cmd, err)
	}
	cl.add(stopClaims)
	return rec, claims, nil
}

// checkWatchFlags checks the arguments and flags of watch (usage errors).
func checkWatchFlags(c *cli.Context) (workSettings, error) {
	if c.NArg() == 0 {
		return workSettings{}, usageError{errors.New("watch: give at least one inbox folder")}
	}
	ws, err := checkWorkFlags(c, "watch")
	if err != nil {
		return ws, err
	}
	if c.Duration("settle") <= 0 || c.Duration("rescan") <= 0 || c.Duration("grace") < 0 {
		return ws, usageError{errors.New("watch: --settle and --rescan must be positive, --grace not negative")}
	}
	if err := dicom.CheckName(c.String("dicom-name")); err != nil {
		return ws, usageError{fmt.Errorf("watch: --dicom-name: %w", err)}
	}
	for _, in := range c.Args().Slice() {
		if st, err := os.Stat(in); err != nil {
			return ws, usageError{fmt.Errorf("watch: inbox: %w", err)}
		} else if !st.IsDir() {
			return ws, usageError{fmt.Errorf("watch: inbox %s is not a folder", in)}
		}
	}
	return ws, nil
}

// openInbox checks the output folder, opens the inboxes, and waits for the engines to be
// open: nothing is announced as ready before.
func openInbox(c *cli.Context, ws workSettings, es *setup, log *slog.Logger) (*inbox.Inbox, error) {
	// Usage errors are all found; now the output folder.
	if err := checkWritable(ws.outDir); err != nil {
		return nil, usageError{fmt.Errorf("watch: %w", err)}
	}
	box, err := inbox.New(inbox.Options{Folders: c.Args().Slice(), Recursive: c.Bool("recursive"),
		OutDir: ws.outDir, MaskName: ws.maskName, DICOMName: c.String("dicom-name"), Settle: c.Duration("settle"), Rescan: c.Duration("rescan"),
		ReadySuffix: c.String("ready-suffix"), Log: log})
	if err != nil {
		return nil, usageError{fmt.Errorf("watch: %w", err)}
	}
	for _, e := range es.engines {
		if o, ok := e.(engine.BackgroundOpener); ok {
			if err := o.Ready(); err != nil {
				return nil, fmt.Errorf("watch: %w", err)
			}
		}
	}
	noteKernels(es.engines, log, nil)
	return box, nil
}

// watchConfig is the pipeline configuration of a watch: run's, fed by the inboxes, with the
// tables refreshed as volumes finish.
func watchConfig(c *cli.Context, ws workSettings, es *setup, box *inbox.Inbox, claims *claim.Manager, rec *records.Run,
	log *slog.Logger, refresh *volumesRefresher) pipeline.Config {
	cfg := workConfig(c, es, claims, rec, log)
	cfg.Input.Source, cfg.Workers.MaxMemory = box.Jobs(), ws.maxMemory
	cfg.Telemetry.Progress = es.withMetrics(progress.Multi(refresh, progressLog(c, log)))
	if es.metrics != nil {
		es.metrics.SetQueueDepth(func() float64 { return float64(box.Pending()) })
	}
	// Claimed by a live process (another watcher, a run, or this one's previous version of
	// the file or series): looked at again later, in case its holder fails or dies.
	retry := max(c.Duration("settle"), c.Duration("claim-timeout")/4)
	cfg.Output.OnBusy = func(j jobs.Job) { box.Defer(j, retry) }
	return cfg
}

// watchStages are the stages of a watch's shutdown: the first signal stops the intake (and
// tells systemd); a second signal, or grace later, abandons the volumes in flight; signalGrace
// after that the stop is forced.
func watchStages(grace time.Duration, log *slog.Logger) session.Stages {
	var first os.Signal
	return session.Stages{
		Grace: grace,
		Hard:  signalGrace,
		Draining: func(s os.Signal) {
			first = s
			daemon.SdNotify(false, daemon.SdNotifyStopping)
			log.Warn("stopping: no new volumes; finishing those in flight", "signal", s.String(), "grace", grace.String())
		},
		Aborting: func(os.Signal) {
			log.Error("abandoning the volumes in flight", "signal", first.String())
		},
	}
}

// watchdogPing is the inbox's tick: it pings systemd's watchdog, when enabled, at half its
// interval.
func watchdogPing() func() {
	watchdog, _ := daemon.SdWatchdogEnabled(false)
	lastPing := time.Now()
	return func() {
		if watchdog > 0 && time.Since(lastPing) >= watchdog/2 {
			daemon.SdNotify(false, daemon.SdNotifyWatchdog)
			lastPing = time.Now()
		}
	}
}

func engineNames(engines []engine.Engine) []string {
	names := make([]string, len(engines))
	for i, e := range engines {
		names[i] = e.Name()
	}
	return names
}

// volumesRefresher regenerates volumes.csv (and statistics.csv) as volumes finish, at most every volumesRefresh.
// It is the watch's pipeline.Progress.
type volumesRefresher struct {
	out  string
	log  *slog.Logger
	kick chan struct{}
	done chan struct{}
	once sync.Once
}

func newVolumesRefresher(out string, log *slog.Logger) *volumesRefresher {
	v := &volumesRefresher{out: out, log: log, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go v.loop()
	return v
}

func (v *volumesRefresher) loop() {
	var last time.Time
	for {
		select {
		case <-v.done:
			return
		case <-v.kick:
		}
		if wait := volumesRefresh - time.Since(last); wait > 0 {
			select {
			case <-v.done:
				return
			case <-time.After(wait):
			}
		}
		last = time.Now()
		updateTables(v.out, v.log)
	}
}

func (v *volumesRefresher) stop() { v.once.Do(func() { close(v.done) }) }

func (v *volumesRefresher) Start(int)                   {}
func (v *volumesRefresher) VolumeStarted(jobs.Job, int) {}
func (v *volumesRefresher) PlanesDone(jobs.Job, int)    {}
func (v *volumesRefresher) Close()                      {}
func (v *volumesRefresher) VolumeDone(jobs.Job, timing.Status) {
	select {
	case v.kick <- struct{}{}:
	default:
	}
}
