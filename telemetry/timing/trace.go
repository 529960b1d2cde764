package timing

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
)

// Span is one timed piece of work for the trace: a Row plus the track it ran on. Host stages
// run on "host" with one track per worker ("reader 0", "writer 1"); GPU work on the device's
// name ("cuda:0") with one track per stream ("h2d", "kernels", "d2h").
type Span struct {
	Row
	Process string
	Track   string
}

// Trace collects spans and writes them in the Chrome/Perfetto JSON trace event format
// (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU): load the
// file in ui.perfetto.dev or chrome://tracing to see the stages overlap.
type Trace struct {
	mu    sync.Mutex
	spans []Span
	meta  map[string]string
}

// Note adds key: value to the trace's metadata ("otherData"), e.g. the kernels an engine ran.
func (t *Trace) Note(key, value string) {
	t.mu.Lock()
	if t.meta == nil {
		t.meta = map[string]string{}
	}
	t.meta[key] = value
	t.mu.Unlock()
}

// Add records a span.
func (t *Trace) Add(s Span) {
	t.mu.Lock()
	t.spans = append(t.spans, s)
	t.mu.Unlock()
}

// CopyOverlap measures each process's (device's) copies against the union of its kernel spans
// (see RowsCopyOverlap).
func (t *Trace) CopyOverlap() map[string]CopyOverlap[float64] {
	t.mu.Lock()
	rows := make([]Row, len(t.spans))
	for i, s := range t.spans {
		rows[i] = s.Row
		rows[i].Device = s.Process // the trace groups by process; the runner sets both alike
	}
	t.mu.Unlock()
	return RowsCopyOverlap(rows)
}

type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"` // microseconds
	Dur  float64        `json:"dur,omitempty"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// WriteFile writes the trace to path (not atomically: it is a diagnostic).
func (t *Trace) WriteFile(path string) error {
	t.mu.Lock()
	spans := append([]Span(nil), t.spans...)
	t.mu.Unlock()
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].StartMS < spans[j].StartMS })

	pids := map[string]int{}
	tids := map[[2]string]int{}
	var events []traceEvent
	for _, s := range spans {
		pid, ok := pids[s.Process]
		if !ok {
			pid = len(pids) + 1
			pids[s.Process] = pid
			events = append(events, traceEvent{Name: "process_name", Ph: "M", PID: pid, Args: map[string]any{"name": s.Process}})
		}
		key := [2]string{s.Process, s.Track}
		tid, ok := tids[key]
		if !ok {
			tid = len(tids) + 1
			tids[key] = tid
			events = append(events, traceEvent{Name: "thread_name", Ph: "M", PID: pid, TID: tid, Args: map[string]any{"name": s.Track}})
		}
		name := string(s.Stage) + " " + s.Volume
		if s.Slab >= 0 {
			name = fmt.Sprintf("%s %s slab %d", s.Stage, s.Volume, s.Slab)
		}
		events = append(events, traceEvent{
			Name: name, Cat: string(s.Stage), Ph: "X", PID: pid, TID: tid,
			TS: s.StartMS * 1000, Dur: s.DurationMS * 1000,
			Args: map[string]any{"volume": s.Volume, "slab": s.Slab, "bytes": s.Bytes, "voxels": s.Voxels},
		})
	}
	// Copy overlap per device, from the union of its kernel spans: trace viewers show it under
	// the trace's metadata ("otherData").
	other := map[string]string{}
	t.mu.Lock()
	for k, v := range t.meta {
		other[k] = v
	}
	t.mu.Unlock()
	for dev, o := range t.CopyOverlap() {
		other[dev+" copies hidden"] = fmt.Sprintf("%.1f %% of %.3f ms (h2d and d2h under the union of kernel spans)", 100*o.Fraction(), o.Copy)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("timing: trace: %w", err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	err = enc.Encode(struct {
		TraceEvents     []traceEvent      `json:"traceEvents"`
		DisplayTimeUnit string            `json:"displayTimeUnit"`
		OtherData       map[string]string `json:"otherData,omitempty"`
	}{events, "ms", other})
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("timing: write trace %s: %w", path, err)
	}
	return nil
}
