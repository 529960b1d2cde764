package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"voxpipe/model"
	"voxpipe/store/records"
	"voxpipe/telemetry/timing"
)

// conclude records a volume that is not processed (skipped, busy, conflict) and why.
func (r *runner) conclude(w *work, status timing.Status, why string) {
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
func (r *runner) fail(w *work, err error) {
	if w.mem.in != nil {
		r.putBack(r.inputs, w.mem.in)
		w.mem.in = nil
	}
	if w.mem.mask != nil {
		r.putBack(r.masks, w.mem.mask)
		w.mem.mask = nil
	}
	r.dropModel(w)
	r.releaseReservation(w)
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
	if r.cfg.FailFast && !errors.Is(err, ErrStoppedEarly) {
		r.stop(ErrStoppedEarly)
	}
	r.finish(w)
}

// finish records the volume's summary row, then releases its claim: a process killed between
// the two leaves a claim that the next run takes over, never a mask without its row while the
// claim is free.
func (r *runner) finish(w *work) {
	w.rec.mu.Lock()
	w.rec.sum.FinishedAt = records.Stamp(time.Now())
	w.rec.sum.Host = r.cfg.Telemetry.Host
	sum := w.rec.sum
	w.rec.mu.Unlock()
	if sum.Status == timing.StatusOK {
		r.log.Info("volume done", "volume", sum.Volume, "dims", sum.Dims, "engine", sum.Engine,
			"wall_ms", round3(sum.WallMS), "mvox_per_s", round3(sum.MVoxPerS), "mask", sum.Output,
			"domain", string(model.ParseVerdictLevel(sum.Domain)))
	}
	r.progress().VolumeDone(w.job, sum.Status)
	r.summarise(sum)
	if w.claim != nil {
		if err := w.claim.Release(); err != nil {
			r.log.Warn("release claim", "volume", w.job.Name, "err", err)
		}
	}
}

func (r *runner) summarise(sum timing.Summary) {
	r.mu.Lock()
	switch sum.Status {
	case timing.StatusOK:
		r.result.OK++
	case timing.StatusSkipped:
		r.result.Skipped++
	case timing.StatusBusy:
		r.result.Busy++
	case timing.StatusConflict:
		r.result.Conflict++
	default:
		r.result.Failed++
	}
	r.mu.Unlock()
	if r.cfg.Telemetry.Summary != nil {
		r.noteOutErr(r.cfg.Telemetry.Summary.Append(sum))
	}
	if r.cfg.Telemetry.Observer != nil {
		r.cfg.Telemetry.Observer.Summary(sum)
	}
}
