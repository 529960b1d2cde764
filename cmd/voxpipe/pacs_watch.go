package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/urfave/cli/v2"

	"voxpipe/jobs"
	"voxpipe/pacs/dicomweb"
	"voxpipe/pacs/loop"
	"voxpipe/pipeline"
	"voxpipe/session"
	"voxpipe/telemetry/metrics"
	"voxpipe/telemetry/progress"
	"voxpipe/telemetry/timing"
)

func pacsWatchCommand() *cli.Command {
	return &cli.Command{
		Name:   "watch",
		Before: requireFlags("output", "url"),
		Usage:  "a service: search the PACS every --interval, and segment each new series once settled, store its SEG, with the engine kept open",
		Description: "A series is taken once its instance count has not changed for --settle across searches,\n" +
			"then claimed, retrieved, segmented and its SEG stored, exactly once as pacs sync does (the\n" +
			"two share WORKDIR's ledger and claims). A series re-sent to the PACS after it is done is not\n" +
			"done again. Under systemd (Type=notify) it reports READY, STOPPING and WATCHDOG. On SIGTERM\n" +
			"or SIGINT it searches no more, finishes the series in flight (storing their SEGs) within\n" +
			"--grace and exits 0; 143/130 when it had to abandon some.",
		Flags: append(append(append(pacsFlags(), engineFlags("all")...), workFlags(1)...),
			&cli.DurationFlag{Name: "interval", Value: 10 * time.Second, Usage: "search the PACS this often"},
			&cli.DurationFlag{Name: "settle", Value: 10 * time.Second, Usage: "take a series once its instance count has not changed this long"},
			&cli.DurationFlag{Name: "grace", Value: 30 * time.Second, Usage: "on SIGTERM, time to finish the series in flight"},
			&cli.BoolFlag{Name: "orthanc", Usage: "follow Orthanc's /changes feed (its REST API at --url's parent) and take each series at its StableSeries event, instead of searching with QIDO-RS; --settle does not apply"},
		),
		Action: pacsWatchAction,
	}
}

// pacsWatch is a running `pacs watch`: the searches hand jobs to one pipeline that runs for
// the service's life (engine open), and each series' outcome comes back to store its SEG.
type pacsWatch struct {
	sy       *loop.Sync
	settler  *loop.Settler
	log      *slog.Logger
	outDir   string
	runID    string
	maskName string // --mask-name
	jobs     chan jobs.Job
	ended    chan volumeEnd

	mu      sync.Mutex
	pending map[string]*inFlight // by SeriesInstanceUID
	failing map[string]failure   // series that failed, by SeriesInstanceUID
	feed    *orthancFeed         // with --orthanc
	metrics *metrics.Metrics     // nil without --metrics-addr
}

// failure is when a series failed, and what to search for to try it again.
type failure struct {
	at     time.Time
	series loop.Series
}

// retryFailed is how long a failed series waits before it is tried again (at least --settle).
const retryFailed = time.Minute

// keep takes a series once it has settled, and a failed one not before retryFailed.
func (w *pacsWatch) keep(s loop.Series) bool {
	w.mu.Lock()
	f, failed := w.failing[s.SeriesUID]
	w.mu.Unlock()
	if failed && time.Since(f.at) < max(retryFailed, w.settler.Settle) {
		return false
	}
	return w.settler.Ready(s)
}

// inFlight is a series handed to the pipeline: its claim, and the ends of its volumes.
type inFlight struct {
	item *loop.Item
	jobs int
	ends []volumeOutcome
}

type volumeEnd struct {
	job    jobs.Job
	status timing.Status
}

// VolumeDone hands each volume's end to the storing loop (pipeline.Progress).
func (w *pacsWatch) VolumeDone(job jobs.Job, status timing.Status) { w.ended <- volumeEnd{job, status} }
func (w *pacsWatch) Start(int)                                     {}
func (w *pacsWatch) VolumeStarted(jobs.Job, int)                   {}
func (w *pacsWatch) PlanesDone(jobs.Job, int)                      {}
func (w *pacsWatch) Close()                                        {}

func pacsWatchAction(c *cli.Context) error {
	ws, err := checkWorkFlags(c, "pacs watch")
	if err != nil {
		return err
	}
	if err := checkPACSOutputs(c, "pacs watch"); err != nil {
		return err
	}
	if c.Duration("interval") <= 0 || c.Duration("settle") < 0 || c.Duration("grace") < 0 {
		return usageError{errors.New("pacs watch: --interval must be positive, --settle and --grace not negative")}
	}
	if _, _, err := pacsClients(c, nil); err != nil { // usage errors before anything is opened
		return err
	}
	if err := checkWritable(ws.outDir); err != nil {
		return usageError{fmt.Errorf("pacs watch: %w", err)}
	}
	log := newLogger(c.App.ErrWriter, c.String("log-format"), c.Bool("quiet"))
	sd := session.Start(context.Background(), watchStages(c.Duration("grace"), log)) // as watch: from here on
	defer sd.Close()
	var cl closers
	defer cl.close()
	es, err := openSetup(c, log, &cl)
	if err != nil {
		return err
	}
	rec, claims, err := openServiceRecords(c, ws, &cl, "pacs watch")
	if err != nil {
		return err
	}
	es.metrics.EnablePACS()
	src, dst, err := pacsClients(c, func(r dicomweb.Request) {
		es.metrics.PACSRequest(string(r.Kind), r.Status, string(r.Class), r.Duration)
	})
	if err != nil {
		return err
	}
	w := &pacsWatch{metrics: es.metrics, maskName: ws.maskName, log: log, outDir: ws.outDir, runID: ws.runID, jobs: make(chan jobs.Job), ended: make(chan volumeEnd, 16),
		pending: map[string]*inFlight{}, failing: map[string]failure{}, settler: &loop.Settler{Settle: c.Duration("settle")}}
	w.sy = newPACSSync(c, ws.outDir, claims, log, src, dst)
	w.sy.Keep = w.keep
	if c.Bool("orthanc") { // Orthanc says when a series is stable
		w.settler.Settle = 0
		w.feed = &orthancFeed{client: src, modality: c.String("modality"), log: log, retry: w.retryDue,
			seqFile: filepath.Join(ws.outDir, "pacs", "orthanc-seq")}
		w.sy.Source = w.feed
	}
	cfg := workConfig(c, es, claims, rec, log)
	cfg.Input.Source, cfg.Workers.MaxMemory = w.jobs, ws.maxMemory
	cfg.Telemetry.Progress = es.withMetrics(progress.Multi(progressLog(c, log), w))

	log.Info("pacs watch", "run_id", ws.runID, "url", c.String("url"), "interval", c.Duration("interval").String(),
		"settle", c.Duration("settle").String(), "engines", engineNames(es.engines), "output", ws.outDir)
	daemon.SdNotify(false, daemon.SdNotifyReady)
	var runErr error
	cl.forced = sd.Wait(func() {
		stored := make(chan struct{})
		go func() { w.storeLoop(sd.Aborted()); close(stored) }()
		go w.searchLoop(sd.Drained(), c.Duration("interval"))
		_, runErr = pipeline.Run(sd.Aborted(), cfg)
		close(w.ended)
		<-stored
		w.abandonPending()
		if err := rec.Close(); err != nil && runErr == nil {
			runErr = err
		}
		updateTables(ws.outDir, log)
		log.Info("pacs watch finished", "records", rec.Dir)
	})
	if cl.forced {
		return forcedStop(claims, rec, sd.Signal())
	}
	switch sig := sd.Signal(); {
	case sig != nil && sd.WasAborted():
		return cli.Exit("stopped; series in flight were abandoned", session.ExitCode(sig))
	case sig != nil:
		return nil
	case runErr != nil:
		return cli.Exit(runErr.Error(), exitFailed)
	}
	return nil
}

// abandonPending lets go of the series whose volumes did not all end (the watch was stopped):
// the next sync or watch does them.
func (w *pacsWatch) abandonPending() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for uid, f := range w.pending {
		w.sy.Abandon(f.item)
		delete(w.pending, uid)
	}
}

// searchLoop searches every interval until ctx ends, then closes the jobs channel. systemd's
// watchdog is pinged on its own ticker: a search waits while the pipeline is busy.
func (w *pacsWatch) searchLoop(ctx context.Context, interval time.Duration) {
	defer close(w.jobs)
	go func() {
		ping, tick := watchdogPing(), time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			ping()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		w.search(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// search plans, retrieves the settled new series and hands their volumes to the pipeline.
func (w *pacsWatch) search(ctx context.Context) {
	plan, err := w.sy.Plan(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Error("pacs search", "err", err)
		}
		return
	}
	if len(plan.Todo) > 0 || plan.Waiting > 0 {
		w.log.Info("pacs search", "series", plan.Seen, "new", len(plan.Todo), "settling", plan.Waiting, "done", plan.Done, "busy", plan.Busy)
	}
	for _, it := range plan.Todo {
		if ctx.Err() != nil {
			w.sy.Abandon(it)
			continue
		}
		w.take(ctx, it)
	}
	w.mu.Lock()
	clean := len(w.failing) == 0 && len(plan.Todo) == 0 && plan.Waiting == 0
	w.mu.Unlock()
	if clean { // nothing failing, settling or taken: the search's window is covered
		if err := w.sy.Searched(plan); err != nil {
			w.log.Warn("remember the search", "err", err)
		}
		if w.feed != nil {
			w.feed.covered()
		}
	}
}

// take retrieves a series and hands its volumes to the pipeline.
func (w *pacsWatch) take(ctx context.Context, it *loop.Item) {
	uid := it.Series.SeriesUID
	t := time.Now()
	err := w.sy.Retrieve(ctx, it)
	if err == nil {
		w.log.Info("series retrieved", "series", it.Key, "files", len(it.Files), "retrieve_ms", ms(time.Since(t)))
	}
	var found *jobs.Discovery
	if err == nil {
		found, err = jobs.DiscoverDICOM([]string{it.Dir}, false, w.outDir, w.maskName, "%h")
	}
	if err == nil && len(found.Jobs) == 0 {
		err = errors.New("no DICOM series in what the PACS sent")
	}
	if err != nil {
		w.fail(it, err)
		return
	}
	w.mu.Lock()
	w.pending[uid] = &inFlight{item: it, jobs: len(found.Jobs)}
	w.mu.Unlock()
	now := time.Now()
	for _, j := range found.Jobs {
		j.Arrived = now
		select {
		case w.jobs <- j:
		case <-ctx.Done(): // stopping: the volumes not handed in never end; abandon the series
			w.mu.Lock()
			delete(w.pending, uid)
			w.mu.Unlock()
			w.sy.Abandon(it)
			return
		}
	}
}

// storeLoop stores the SEGs of series whose volumes have all ended, until the pipeline is done.
func (w *pacsWatch) storeLoop(ctx context.Context) {
	for e := range w.ended {
		if e.job.Series == nil {
			continue
		}
		w.mu.Lock()
		f := w.pending[e.job.Series.UID]
		if f == nil {
			w.mu.Unlock()
			continue
		}
		f.ends = append(f.ends, volumeOutcome{e.status, e.job.Output})
		finished := len(f.ends) == f.jobs
		if finished {
			delete(w.pending, e.job.Series.UID)
		}
		w.mu.Unlock()
		if finished {
			w.finish(ctx, f)
		}
	}
}

// finish stores a series' SEGs and records it done, or lets it go for a later search.
func (w *pacsWatch) finish(ctx context.Context, f *inFlight) {
	segs, masks, err := seriesSEGs(f.ends)
	if err != nil {
		w.fail(f.item, err)
		return
	}
	uid := f.item.Series.SeriesUID
	t := time.Now()
	if err := w.sy.Finish(ctx, f.item, segs, masks, w.runID); err != nil {
		w.failed(f.item.Series)
		w.log.Error("series failed", "series", f.item.Key, "err", err)
		return
	}
	w.settler.Forget(uid)
	w.mu.Lock()
	delete(w.failing, uid)
	w.mu.Unlock()
	w.metrics.PACSSeries("stored")
	w.log.Info("series done: SEG stored", "series", f.item.Key, "segs", len(segs), "store_ms", ms(time.Since(t)))
}

// fail lets a series go without storing: a later search takes it again.
func (w *pacsWatch) fail(it *loop.Item, err error) {
	w.sy.Abandon(it)
	w.failed(it.Series)
	w.log.Error("series failed", "series", it.Key, "err", err)
}

// failed notes a series' failure: it settles again, not before retryFailed.
func (w *pacsWatch) failed(s loop.Series) {
	uid := s.SeriesUID
	w.settler.Forget(uid)
	w.mu.Lock()
	w.failing[uid] = failure{time.Now(), s}
	w.mu.Unlock()
	w.metrics.PACSSeries("failed")
}

// retryDue lists the failed series due for another try (the --orthanc feed reports a series
// once; a QIDO search lists it again by itself).
func (w *pacsWatch) retryDue() []loop.Series {
	w.mu.Lock()
	defer w.mu.Unlock()
	var due []loop.Series
	for _, f := range w.failing {
		if time.Since(f.at) >= retryFailed {
			due = append(due, f.series)
		}
	}
	return due
}
