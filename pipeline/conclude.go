package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"voxpipe/model"
	"voxpipe/store/records"
	"voxpipe/telemetry/timing"
)

// concluder ends volumes: each gets its summary row exactly once (ok, failed, skipped, busy or
// conflict), gives back what it holds and releases its claim; it counts the run's Result,
// and with FailFast the first failure stops the batch.
type concluder struct {
	failFast bool
	host     string // summary.csv's host column
	log      *slog.Logger
	mem      *memory
	rec      *recorder
	stop     context.CancelCauseFunc

	mu  sync.Mutex
	res Result
}

func newConcluder(cfg Config, log *slog.Logger, mem *memory, rec *recorder, stop context.CancelCauseFunc) *concluder {
	return &concluder{failFast: cfg.FailFast, host: cfg.Telemetry.Host, log: log, mem: mem, rec: rec, stop: stop}
}

// result is the count of the volumes concluded so far.
func (r *concluder) result() Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.res
}

// conclude records a volume that is not processed (skipped, busy, conflict) and why.
func (r *concluder) conclude(w *work, status timing.Status, why string) {
	level := slog.LevelInfo
	if status == timing.StatusConflict {
		level = slog.LevelError // the run exits 1 for it
	}
	r.log.Log(context.Background(), level, string(status), "volume", w.job.Name, "mask", w.job.ShownOutput(), "reason", why)
	w.rec.sum.Status, w.rec.sum.Reason = status, why
	if status != timing.StatusSkipped {
		w.rec.sum.Output = ""
	}
	r.finish(w)
}

// fail records a failed volume and gives back whatever buffers it holds.
func (r *concluder) fail(w *work, err error) {
	if w.mem.in != nil {
		r.mem.putBack(r.mem.inputs, w.mem.in)
		w.mem.in = nil
	}
	if w.mem.mask != nil {
		r.mem.putBack(r.mem.masks, w.mem.mask)
		w.mem.mask = nil
	}
	r.mem.dropModel(w)
	r.mem.releaseReservation(w)
	if err == nil {
		err = errors.New("unknown error")
	}
	if errors.Is(err, context.Canceled) {
		err = fmt.Errorf("interrupted: %w", err)
	}
	w.rec.mu.Lock()
	w.rec.sum.Status = timing.StatusFailed
	w.rec.sum.Error = err.Error()
	w.rec.sum.Output = ""
	if !w.rec.start.IsZero() {
		w.rec.sum.WallMS = ms(time.Since(w.rec.start))
		w.rec.sum.QueueMS = w.queueMS()
	}
	w.rec.mu.Unlock()
	r.log.Error("volume failed", "volume", w.job.Name, "input", w.job.Input, "err", err)
	if r.failFast && !errors.Is(err, ErrStoppedEarly) {
		r.stop(ErrStoppedEarly)
	}
	r.finish(w)
}

// finish records the volume's summary row, then releases its claim: a process killed between
// the two leaves a claim that the next run takes over, never a mask without its row while the
// claim is free.
func (r *concluder) finish(w *work) {
	w.rec.mu.Lock()
	w.rec.sum.FinishedAt = records.Stamp(time.Now())
	w.rec.sum.Host = r.host
	sum := w.rec.sum
	w.rec.mu.Unlock()
	if sum.Status == timing.StatusOK {
		r.log.Info("volume done", "volume", sum.Volume, "dims", sum.Dims, "engine", sum.Engine,
			"wall_ms", round3(sum.WallMS), "mvox_per_s", round3(sum.MVoxPerS), "mask", sum.Output,
			"domain", string(model.ParseVerdictLevel(sum.Domain)))
	}
	r.rec.progress().VolumeDone(w.job, sum.Status)
	r.summarise(sum)
	if w.claim != nil {
		if err := w.claim.Release(); err != nil {
			r.log.Warn("release claim", "volume", w.job.Name, "err", err)
		}
	}
}

func (r *concluder) summarise(sum timing.Summary) {
	r.mu.Lock()
	switch sum.Status {
	case timing.StatusOK:
		r.res.OK++
	case timing.StatusSkipped:
		r.res.Skipped++
	case timing.StatusBusy:
		r.res.Busy++
	case timing.StatusConflict:
		r.res.Conflict++
	default:
		r.res.Failed++
	}
	r.mu.Unlock()
	if r.rec.tel.Summary != nil {
		r.rec.noteOutErr(r.rec.tel.Summary.Append(sum))
	}
	if r.rec.tel.Observer != nil {
		r.rec.tel.Observer.Summary(sum)
	}
}

// release lets go of a volume held by its engine worker and its writer; the last one to let go
// concludes it: failed with its first error, or ok once committed.
func (r *concluder) release(w *work) {
	if w.seg.holders.Add(-1) > 0 {
		return
	}
	w.rec.mu.Lock()
	err := w.rec.err
	w.rec.mu.Unlock()
	if err != nil {
		r.fail(w, err)
		return
	}
	r.mem.putBack(r.mem.masks, w.mem.mask)
	w.mem.mask = nil
	w.rec.mu.Lock()
	w.rec.sum.Status = timing.StatusOK
	w.rec.sum.WallMS = ms(w.rec.committed.Sub(w.rec.start))
	w.rec.sum.QueueMS = w.queueMS()
	if w.rec.sum.WallMS > 0 {
		w.rec.sum.MVoxPerS = float64(w.rec.sum.Voxels) / 1e3 / w.rec.sum.WallMS
	}
	w.rec.mu.Unlock()
	r.finish(w)
}
