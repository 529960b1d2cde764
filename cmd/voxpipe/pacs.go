package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"voxpipe/jobs"
	"voxpipe/pacs/dicomweb"
	"voxpipe/pacs/loop"
	"voxpipe/pipeline"
	"voxpipe/session"
	"voxpipe/store/claim"
	"voxpipe/store/records"
	"voxpipe/telemetry/timing"
)

// EnvPACSPassword holds the PACS password where --password-file is not given.
const EnvPACSPassword = "VOXPIPE_PACS_PASSWORD"

func init() {
	commandMakers = append(commandMakers, func() *cli.Command {
		return &cli.Command{
			Name:  "pacs",
			Usage: "the hospital loop over DICOMweb: new series from a PACS segmented, their DICOM SEGs stored back",
			Subcommands: []*cli.Command{{
				Name:   "sync",
				Before: requireFlags("output", "url"),
				Usage:  "one pass: search the PACS (QIDO-RS) for new series, retrieve them (WADO-RS), segment them into WORKDIR as run does, store each SEG (STOW-RS), exactly once",
				Description: "For cron, systemd timers and Slurm: any number of syncs may share WORKDIR; each series is\n" +
					"claimed, and recorded done (WORKDIR/pacs/done) only once its SEG is stored. Masks and SEGs\n" +
					"are named by the series ID (no patient data). Series of modality SEG are left alone.\n" +
					"Exit codes: 0 every new series done (or busy with another sync); 1 a series failed (the\n" +
					"others are done), the PACS refused the credentials or could not be reached; 2 usage;\n" +
					"130/143 stopped by SIGINT/SIGTERM.",
				Flags:  append(append(pacsFlags(), engineFlags("all")...), workFlags(2)...),
				Action: pacsSyncAction,
			}, pacsWatchCommand()},
		}
	})
}

// pacsFlags are the flags of the PACS commands: where, what, and how to log in.
func pacsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "url", Usage: "DICOMweb root of the PACS, e.g. http://pacs:8042/dicom-web (required)"},
		&cli.StringFlag{Name: "store-url", Usage: "DICOMweb root the SEGs are stored to (default: --url)"},
		&cli.StringFlag{Name: "modality", Value: "MR", Usage: "modality of the series to segment"},
		&cli.StringSliceFlag{Name: "study", Usage: "only series of these StudyInstanceUIDs (repeat or comma-separate; default: series new since the last sync)"},
		&cli.BoolFlag{Name: "all", Usage: "search every series of the modality, not only those new since the last sync"},
		&cli.StringFlag{Name: "user", Usage: "HTTP Basic user; the password from --password-file or $" + EnvPACSPassword},
		&cli.StringFlag{Name: "password-file", Usage: "file holding the Basic password (a trailing newline is ignored)"},
		&cli.StringFlag{Name: "token-file", Usage: "file holding a Bearer token (a trailing newline is ignored)"},
		&cli.StringFlag{Name: "ca-file", Usage: "PEM certificates trusted for https (default: the system's)"},
		&cli.DurationFlag{Name: "timeout", Value: dicomweb.DefaultTimeout, Usage: "per request: the longest wait for an answer, and the longest an answer may stall"},
		&cli.IntFlag{Name: "retries", Value: dicomweb.DefaultRetries, Usage: "further attempts on 5xx, 429 and connection errors (never on other 4xx)"},
	}
}

// pacsClients checks the PACS flags and makes the clients to search and to store with
// (usage errors: nothing is contacted yet).
func pacsClients(c *cli.Context, observe func(dicomweb.Request)) (src, dst *dicomweb.Client, err error) {
	auth, err := pacsAuth(c)
	if err != nil {
		return nil, nil, err
	}
	if c.Int("retries") < 0 || c.Duration("timeout") <= 0 {
		return nil, nil, usageError{errors.New("pacs: --retries must be 0 or more and --timeout positive")}
	}
	opts := dicomweb.Options{URL: c.String("url"), Auth: auth, CAFile: c.String("ca-file"), Timeout: c.Duration("timeout"), Retries: c.Int("retries"), Observe: observe}
	if opts.Retries == 0 {
		opts.Retries = -1 // the flag's 0 is none; the client's 0 is its default
	}
	if src, err = dicomweb.New(opts); err != nil {
		return nil, nil, usageError{fmt.Errorf("pacs: --url: %w", err)}
	}
	dst = src
	if u := c.String("store-url"); u != "" {
		opts.URL = u
		if dst, err = dicomweb.New(opts); err != nil {
			return nil, nil, usageError{fmt.Errorf("pacs: --store-url: %w", err)}
		}
	}
	return src, dst, nil
}

// pacsAuth reads the credentials: --user with a password (file or environment), or a token.
func pacsAuth(c *cli.Context) (dicomweb.Auth, error) {
	var a dicomweb.Auth
	user, pwFile, tokFile := c.String("user"), c.String("password-file"), c.String("token-file")
	switch {
	case tokFile != "" && (user != "" || pwFile != ""):
		return a, usageError{errors.New("pacs: give --user (with a password) or --token-file, not both")}
	case pwFile != "" && user == "":
		return a, usageError{errors.New("pacs: --password-file needs --user")}
	case tokFile != "":
		tok, err := readSecret(tokFile)
		if err != nil {
			return a, usageError{fmt.Errorf("pacs: --token-file: %w", err)}
		}
		a.Token = tok
	case user != "":
		a.User = user
		if pwFile != "" {
			pw, err := readSecret(pwFile)
			if err != nil {
				return a, usageError{fmt.Errorf("pacs: --password-file: %w", err)}
			}
			a.Password = pw
		} else if a.Password = os.Getenv(EnvPACSPassword); a.Password == "" {
			return a, usageError{fmt.Errorf("pacs: --user needs a password: --password-file or $%s", EnvPACSPassword)}
		}
	}
	return a, nil
}

// readSecret reads a secret file, its trailing newline (and carriage return) dropped; an
// empty secret is refused. The secret is never printed.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

// pacsSource searches and retrieves through a DICOMweb client.
type pacsSource struct {
	client   *dicomweb.Client
	modality string
	studies  []string
	all      bool
}

func (p pacsSource) Search(ctx context.Context, since time.Time) ([]loop.Series, error) {
	if p.all {
		since = time.Time{}
	}
	var found []dicomweb.Series
	queries := []dicomweb.SeriesQuery{{Modality: p.modality, Since: since}}
	if len(p.studies) > 0 {
		queries = queries[:0]
		for _, st := range p.studies {
			queries = append(queries, dicomweb.SeriesQuery{Modality: p.modality, StudyUID: st})
		}
	}
	for _, q := range queries {
		s, err := p.client.SearchSeries(ctx, q)
		if err != nil {
			return nil, err
		}
		found = append(found, s...)
	}
	out := make([]loop.Series, len(found))
	for i, s := range found {
		out[i] = loop.Series{StudyUID: s.StudyUID, SeriesUID: s.SeriesUID, Modality: s.Modality, Instances: s.Instances}
	}
	return out, nil
}

func (p pacsSource) Retrieve(ctx context.Context, s loop.Series, dir string) ([]string, error) {
	return p.client.RetrieveSeries(ctx, s.StudyUID, s.SeriesUID, dir)
}

// pacsStore stores through a DICOMweb client.
type pacsStore struct{ client *dicomweb.Client }

func (p pacsStore) Store(ctx context.Context, files ...string) ([]string, error) {
	res, err := p.client.Store(ctx, files...)
	if err != nil {
		return nil, err
	}
	if len(res.Referenced) != len(files) {
		return nil, fmt.Errorf("the PACS answered %d stored instances for %d files sent", len(res.Referenced), len(files))
	}
	uids := make([]string, len(res.Referenced))
	for i, r := range res.Referenced {
		uids[i] = r.InstanceUID
	}
	return uids, nil
}

// seriesOutcomes collects the end of every volume of a batch by SeriesInstanceUID.
type seriesOutcomes struct {
	mu  sync.Mutex
	out map[string][]volumeOutcome
}

type volumeOutcome struct {
	status timing.Status
	mask   string
}

func (o *seriesOutcomes) Start(int)                   {}
func (o *seriesOutcomes) VolumeStarted(jobs.Job, int) {}
func (o *seriesOutcomes) PlanesDone(jobs.Job, int)    {}
func (o *seriesOutcomes) Close()                      {}

func (o *seriesOutcomes) VolumeDone(job jobs.Job, status timing.Status) {
	if job.Series == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.out == nil {
		o.out = map[string][]volumeOutcome{}
	}
	o.out[job.Series.UID] = append(o.out[job.Series.UID], volumeOutcome{status, job.Output})
}

// segs are the SEGs of the series uid (seriesSEGs).
func (o *seriesOutcomes) segs(uid string) (segs, masks []string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return seriesSEGs(o.out[uid])
}

// seriesSEGs are the SEGs of a series whose every volume is ok or up to date, and its masks.
func seriesSEGs(vols []volumeOutcome) (segs, masks []string, err error) {
	if len(vols) == 0 {
		return nil, nil, errors.New("no volume of it was segmented (see the run's records)")
	}
	for _, v := range vols {
		if v.status != timing.StatusOK && v.status != timing.StatusSkipped {
			return nil, nil, fmt.Errorf("its volume %s is %s (see the run's records)", v.mask, v.status)
		}
		seg := records.SEGPath(v.mask)
		if _, err := os.Stat(seg); err != nil {
			return nil, nil, fmt.Errorf("its SEG: %w", err)
		}
		segs, masks = append(segs, seg), append(masks, v.mask)
	}
	return segs, masks, nil
}

// pacsSyncAction is `voxpipe pacs sync`.
func pacsSyncAction(c *cli.Context) error {
	ws, err := checkWorkFlags(c, "pacs sync")
	if err != nil {
		return err
	}
	if err := checkPACSOutputs(c, "pacs sync"); err != nil {
		return err
	}
	src, dst, err := pacsClients(c, nil)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(ws.outDir, 0o755); err != nil {
		return usageError{fmt.Errorf("pacs sync: %w", err)}
	}
	log := newLogger(c.App.ErrWriter, c.String("log-format"), c.Bool("quiet"))
	claims, stopClaims, err := startClaims(ws.outDir, ws.runID, c.Duration("claim-timeout"))
	if err != nil {
		return fmt.Errorf("pacs sync: %w", err)
	}
	defer stopClaims()
	sd := session.Start(context.Background(), runStages(log))
	defer sd.Close()
	return syncOnce(c, sd, newPACSSync(c, ws.outDir, claims, log, src, dst), ws, log)
}

// checkPACSOutputs refuses the work flags the PACS commands do not take (usage errors).
func checkPACSOutputs(c *cli.Context, cmd string) error {
	if c.IsSet("dicom-name") || !c.Bool("seg") {
		return usageError{fmt.Errorf("%s: masks are named by the series ID and every series gets its SEG: --dicom-name and --seg=false do not apply", cmd)}
	}
	return nil
}

// newPACSSync is the loop over the work folder dir: searched and retrieved through src, the
// SEGs stored through dst.
func newPACSSync(c *cli.Context, dir string, claims *claim.Manager, log *slog.Logger, src, dst *dicomweb.Client) *loop.Sync {
	return &loop.Sync{Dir: dir, Claims: claims, Log: log, StoreURL: orDefault(c.String("store-url"), c.String("url")),
		Source: pacsSource{client: src, modality: c.String("modality"), studies: c.StringSlice("study"), all: c.Bool("all")},
		Store:  pacsStore{client: dst}}
}

// syncOnce searches, retrieves, segments and stores, and says how it went.
func syncOnce(c *cli.Context, sd *session.Shutdown, sy *loop.Sync, ws workSettings, log *slog.Logger) error {
	ctx := sd.Drained()
	plan, err := sy.Plan(ctx)
	if err != nil {
		return cli.Exit(fmt.Sprintf("pacs sync: %v", err), exitFailed)
	}
	log.Info("pacs search", "series", plan.Seen, "new", len(plan.Todo), "done", plan.Done, "busy", plan.Busy, "seg_series", plan.SEGs)
	failed := 0
	var got []*loop.Item
	for _, it := range plan.Todo {
		t := time.Now()
		if err := sy.Retrieve(ctx, it); err != nil {
			log.Error("series failed", "series", it.Key, "err", err)
			sy.Abandon(it)
			failed++
			continue
		}
		log.Info("series retrieved", "series", it.Key, "files", len(it.Files), "retrieve_ms", ms(time.Since(t)))
		got = append(got, it)
	}
	outcomes := &seriesOutcomes{}
	var runErr error
	if len(got) > 0 && ctx.Err() == nil {
		dirs := make([]string, len(got))
		for i, it := range got {
			dirs[i] = it.Dir
		}
		runErr = runBatch(c, ws, jobs.Shard{}, batchInput{inputs: dirs, dicomName: "%h", observe: outcomes})
	}
	stored := 0
	for _, it := range got {
		segs, masks, err := outcomes.segs(it.Series.SeriesUID)
		if err == nil && ctx.Err() != nil {
			err = fmt.Errorf("stopped before its SEG was stored: %w", context.Cause(ctx))
		}
		t := time.Now()
		if err == nil {
			err = sy.Finish(ctx, it, segs, masks, ws.runID)
		} else {
			sy.Abandon(it)
		}
		if err != nil {
			log.Error("series failed", "series", it.Key, "err", err)
			failed++
			continue
		}
		stored++
		log.Info("series done: SEG stored", "series", it.Key, "segs", len(segs), "store_ms", ms(time.Since(t)))
	}
	if sig := sd.Signal(); sig != nil {
		return runExit(sig, nil, pipeline.Result{}, 0, "")
	}
	if failed == 0 && runErr == nil && plan.Busy == 0 { // a busy series may yet fail: search it again
		if err := sy.Searched(plan); err != nil {
			log.Warn("remember the search", "err", err)
		}
	}
	log.Info("pacs sync finished", "stored", stored, "failed", failed, "done_before", plan.Done, "busy", plan.Busy)
	if failed > 0 {
		return cli.Exit(fmt.Sprintf("pacs sync: %d of %d new series failed (the others are done)", failed, len(plan.Todo)), exitFailed)
	}
	return nil
}

// ms is a duration in milliseconds, for logs.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
