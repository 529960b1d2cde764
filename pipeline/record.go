package pipeline

import (
	"context"
	"sync"
	"time"

	"voxpipe/internal/spans"
	"voxpipe/stage"
	"voxpipe/telemetry/timing"
)

// span is one timed piece of a volume's work in a stage: a row of timings.csv and an event
// of the trace.
type span struct {
	stage      stage.Stage
	slab       int    // -1 for the whole volume
	device     string // stage.Host, or the engine's name; also the trace's process
	track      string // the trace's track within the process: "reader 0", "engine 1"...
	start, end time.Time
	bytes      int64 // bytes read or written, if any
	voxels     int64
}

// recorder is where the run's records go: timings.csv, the trace and the observer (a volume's
// summary row goes through the concluder). The first failure to write them stops the run.
type recorder struct {
	tel  Telemetry
	t0   time.Time // the run's start: rows' times are counted from it
	stop context.CancelCauseFunc

	mu     sync.Mutex
	outErr error // first error writing the CSVs
}

func newRecorder(tel Telemetry, stop context.CancelCauseFunc) *recorder {
	return &recorder{tel: tel, t0: time.Now(), stop: stop}
}

// err is the first error writing the records.
func (r *recorder) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outErr
}

// span records a stage event and adds it to the volume's stage totals.
func (r *recorder) span(w *work, s span) {
	r.record(w, timing.Span{Process: s.device, Track: s.track, Row: timing.Row{
		Stage: s.stage, Slab: s.slab, Device: s.device,
		StartMS: ms(s.start.Sub(r.t0)), DurationMS: ms(s.end.Sub(s.start)), Bytes: s.bytes, Voxels: s.voxels,
	}})
}

func (r *recorder) record(w *work, s timing.Span) {
	w.rec.mu.Lock()
	switch s.Stage {
	case stage.Read:
		w.rec.sum.ReadMS += s.DurationMS
	case stage.Stats:
		w.rec.sum.StatsMS += s.DurationMS
	case stage.Write:
		w.rec.sum.WriteMS += s.DurationMS
	case stage.H2D:
		w.rec.sum.H2DMS += s.DurationMS
	case stage.D2H:
		w.rec.sum.D2HMS += s.DurationMS
	case stage.Segment:
		// the summary's segment time is the engine call's wall time, set by segment()
	case stage.Prepare, stage.Restore, stage.Analyse, stage.SEG:
		// in timings.csv only
	default: // kernels, or finer kernel groups
		// Time with a kernel running: the CUDA fp16 engine's kernels of consecutive slabs
		// overlap (two streams); engines report them in order.
		w.rec.sum.KernelsMS += spans.BusyAdded(&w.rec.kernelsEnd, s.StartMS, s.DurationMS)
	}
	w.rec.mu.Unlock()
	r.emit(w, s)
}

func (r *recorder) emit(w *work, s timing.Span) {
	s.RunID, s.Volume = r.tel.RunID, w.job.Name
	if r.tel.Timings != nil {
		r.noteOutErr(r.tel.Timings.Append(s.Row))
	}
	if r.tel.Trace != nil {
		r.tel.Trace.Add(s)
	}
	if r.tel.Observer != nil {
		r.tel.Observer.Row(s.Row)
	}
}

// noteOutErr keeps the first failure to write the CSVs; the run then stops, since a batch
// whose results cannot be recorded should not go on silently.
func (r *recorder) noteOutErr(err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	first := r.outErr == nil
	if first {
		r.outErr = err
	}
	r.mu.Unlock()
	if first {
		r.stop(err)
	}
}

func (r *recorder) progress() Progress { return r.tel.Progress }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }
