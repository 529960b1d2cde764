package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sync/errgroup"

	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/store/claim"
	"voxpipe/store/provenance"
	"voxpipe/store/records"
	"voxpipe/telemetry/timing"
)

// The producer stage: one goroutine that decides, job by job and in order, what to do with
// each before any of its data is read (take), and hands the volumes to do to the readers.

// producer is the producer stage.
type producer struct {
	*services
}

// startProducer starts the producer on g; it closes the readers' queue when it returns, and
// first (see work) once it has taken the first job.
func startProducer(ctx context.Context, g *errgroup.Group, sv *services, next *readers, first chan<- *nifti.Header) {
	p := &producer{services: sv}
	g.Go(func() error {
		defer next.close()
		return p.work(ctx, next, first)
	})
}

// work is the producer's loop: it takes each job in turn and hands the volumes to do to next.
// The header it read for the first of Config.Jobs, when that one is to be done, goes to first
// too (mask prewarming, memory.prewarmMask), so that no one reads it again.
func (p *producer) work(ctx context.Context, next *readers, first chan<- *nifti.Header) error {
	defer close(first)
	pending := p.nextJob(ctx)
	for i := 0; ; i++ {
		job, ok := pending()
		if !ok {
			return ctx.Err()
		}
		w := p.take(ctx, job)
		if i == 0 && w != nil && p.cfg.Input.Source == nil {
			select {
			case first <- w.src.hdr: // buffered for it: never waits
			case <-ctx.Done():
			}
		}
		if w == nil {
			continue
		}
		if err := next.put(ctx, w); err != nil {
			return err
		}
	}
}

// nextJob returns the next job of Config.Jobs or Config.Source, false when there are no more or
// ctx is done.
func (r *producer) nextJob(ctx context.Context) func() (jobs.Job, bool) {
	i := 0
	return func() (jobs.Job, bool) {
		if ctx.Err() != nil {
			return jobs.Job{}, false
		}
		if r.cfg.Input.Source == nil {
			if i >= len(r.cfg.Input.Jobs) {
				return jobs.Job{}, false
			}
			i++
			return r.cfg.Input.Jobs[i-1], true
		}
		select {
		case job, ok := <-r.cfg.Input.Source:
			return job, ok
		case <-ctx.Done():
			return jobs.Job{}, false
		}
	}
}

// take decides what to do with a job before any of its data is read: fail it (refused at
// discovery, input unreadable), report it busy (claimed by a live process), skipped (its mask
// is up to date) or a conflict (a file voxpipe did not write is at its mask's path), or return
// it as work to do, claimed, with the reason.
func (r *producer) take(ctx context.Context, job jobs.Job) *work {
	w := &work{job: job}
	w.rec.sum = timing.Summary{RunID: r.cfg.Telemetry.RunID, Volume: job.Name, Output: job.ShownOutput(), Shard: r.cfg.Telemetry.Shard}
	if job.Err != nil {
		r.end.fail(w, job.Err)
		return nil
	}
	if r.cfg.Output.Claims != nil {
		// The claim lives beside the mask: its folder (a sub-folder of -r, or of a --mask-name
		// template) must exist first.
		if err := os.MkdirAll(filepath.Dir(job.Output), 0o755); err != nil {
			r.end.fail(w, fmt.Errorf("create the mask's folder: %w", err))
			return nil
		}
		c, err := r.cfg.Output.Claims.Acquire(job.Output)
		var busy *claim.BusyError
		if errors.As(err, &busy) {
			if r.cfg.Output.OnBusy != nil {
				r.log.Info("busy: deferred", "volume", job.Name, "reason", busy.Error())
				r.cfg.Output.OnBusy(job)
				return nil
			}
			r.end.conclude(w, timing.StatusBusy, busy.Error())
			return nil
		}
		if err != nil {
			r.end.fail(w, err)
			return nil
		}
		w.claim = c
		if c.TookOver != nil {
			r.log.Warn("took over the claim of a dead process", "volume", job.Name, "holder", c.TookOver.String())
		}
		r.removeStaleTemps(w)
	}
	var err error
	if w.src.input, w.src.files, err = job.Stat(); err != nil {
		r.end.fail(w, fmt.Errorf("read %s: %w", job.Input, err))
		return nil
	}
	w.src.input.Volume = r.cfg.Input.Volume
	if w.src.hdr, err = job.Header(); err != nil {
		r.end.fail(w, err)
		return nil
	}
	dims := [3]int{w.src.hdr.NX(), w.src.hdr.NY(), w.src.hdr.NZ()}
	opt := provenance.Options{VerifyHash: r.cfg.Output.VerifyInputs}
	w.prep.plan, w.prep.planErr = r.cfg.Prepare.planFor(w.src.hdr) // a plan that cannot be made fails the volume in prepare
	if w.prep.planErr == nil {
		opt.Grid, opt.AsStored = w.prep.plan.String(), w.prep.plan.identity()
	}
	verdict, why := provenance.Check(ctx, job.Output, dims, w.src.input, w.src.files, r.cfg.Output.Provenance.Model, opt)
	if verdict == provenance.UpToDate {
		if missing := r.missingAnalyses(job); missing != "" {
			// Asked for now, absent: the volume is done again to make them (the same mask).
			verdict, why = provenance.Redo, "mask up to date, but its "+missing+" missing"
		}
	}
	switch {
	case verdict == provenance.UpToDate && !r.cfg.Output.Overwrite:
		r.end.conclude(w, timing.StatusSkipped, why)
		return nil
	case verdict == provenance.Conflict && (!r.cfg.Output.Overwrite || !replaceable(job.Output)):
		r.end.conclude(w, timing.StatusConflict, why)
		return nil
	case verdict != provenance.Redo:
		why = "--overwrite: " + why
	}
	if r.segInTheWay(job) && !r.cfg.Output.Overwrite {
		r.end.conclude(w, timing.StatusConflict, "a file voxpipe did not write is where the mask's DICOM SEG goes (the mask's name with .seg.dcm; kept: --overwrite replaces it)")
		return nil
	}
	w.src.reason = why
	w.rec.sum.Reason = why
	if why != "new" {
		r.log.Info("redo", "volume", job.Name, "reason", why)
	}
	return w
}

// replaceable reports whether a rename can put a mask at path: not over a folder.
func replaceable(path string) bool {
	st, err := os.Lstat(path)
	return err != nil || !st.IsDir()
}

// removeStaleTemps removes what dead processes left for a volume this run has just claimed:
// mask temporaries (only a claim's holder writes them, so they are not a live process's) and
// temporary claim files.
func (r *producer) removeStaleTemps(w *work) {
	removed := w.claim.RemoveStaleTemps()
	if tmps, err := filepath.Glob(nifti.TempPattern(w.job.Output)); err == nil {
		for _, t := range tmps {
			if os.Remove(t) == nil {
				removed = append(removed, t)
			}
		}
	}
	if len(removed) > 0 {
		r.log.Info("removed temporaries left by a dead process", "volume", w.job.Name, "files", removed)
	}
}

// missingAnalyses names what the analyser is asked for that a volume's up-to-date mask lacks
// (Analyser.Missing), or is empty.
func (r *producer) missingAnalyses(job jobs.Job) string {
	if r.wantsSEG(job) {
		if _, err := os.Stat(records.SEGPath(job.Output)); err != nil {
			return "DICOM SEG"
		}
	}
	if r.cfg.Output.Analyser == nil {
		return ""
	}
	return r.cfg.Output.Analyser.Missing(job.Name)
}
