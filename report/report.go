// Package report compares the latencies of two batches of voxpipe (or PyTorch baseline) runs,
// A and B, read from their timings.csv and summary.csv (schemas in telemetry/timing), and
// writes the comparison as Markdown, CSV and a self-contained HTML page with charts. An
// optional gate fails when A is slower than B by more than a given percentage.
package report

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"voxpipe/stage"
	"voxpipe/telemetry/timing"
)

// The report's own rows, after the stages. EndToEnd is the turnaround (sojourn time):
// summary.csv's wall_ms per volume, from its read (under watch, its arrival) to its mask's
// rename, the time it waited for an engine included. Service is the time it was worked on:
// wall_ms - queue_ms (wall_ms where queue_ms is unknown).
const (
	EndToEnd stage.Stage = "end_to_end"
	Service  stage.Stage = "service"
)

// DefaultMinVolumes is the fewest volumes on each side of a comparison (pairs when paired)
// for its speedup's bootstrap interval to be taken as evidence, and for the gate to decide.
// With fewer, the percentile bootstrap's interval spans little more than the few observed
// ratios, so two identical runs can look significantly different.
const DefaultMinVolumes = 10

// stageOrder is the pipeline's order; other stages follow alphabetically.
var stageOrder = []stage.Stage{stage.Read, stage.Stats, stage.H2D, stage.Kernels,
	stage.Segment, stage.D2H, stage.Write}

// Exit codes of the report subcommand.
const (
	ExitOK         = 0
	ExitFailed     = 1 // an operational error, such as an unwritable output folder
	ExitBadInput   = 2
	ExitGateFailed = 3
)

// Options tune the comparison.
type Options struct {
	Gate           *GateOptions // nil: no gate
	TimelineVolume string       // volume of A for the slab timeline; "" picks A's slowest
	Resamples      int          // bootstrap resamples; 0 means DefaultResamples
	Seed           uint64       // bootstrap seed: the same inputs and seed give the same report
	// MinVolumes: speedups over fewer volumes on a side are flagged too few, and the gate is
	// not evaluated on them; 0 means DefaultMinVolumes.
	MinVolumes int
}

// GateOptions: fail when A's p50 of Stage is more than MaxSlowerPct percent above B's.
type GateOptions struct {
	Stage        stage.Stage // EndToEnd, Service or a stage name
	MaxSlowerPct float64
}

// GateResult is the gate's verdict. SlowerPct = (A p50 / B p50 - 1) * 100, negative when A is
// faster; the gate fails when SlowerPct > MaxSlowerPct. With fewer than MinVolumes volumes on
// a side (N, the smaller side's: pairs when paired) it neither passes nor fails: NotEvaluated.
type GateResult struct {
	GateOptions
	AP50, BP50   float64
	SlowerPct    float64
	Failed       bool
	NotEvaluated bool
	N            int // volumes compared, on the smaller side
	MinVolumes   int
}

// Verdict is "passed", "FAILED" or "not evaluated".
func (g *GateResult) Verdict() string {
	switch {
	case g.NotEvaluated:
		return "not evaluated"
	case g.Failed:
		return "FAILED"
	}
	return "passed"
}

// Detail says what the gate compared and why it decided so, in one line.
func (g *GateResult) Detail() string {
	rel := fmt.Sprintf("A is %.1f%% slower than B", g.SlowerPct)
	if g.SlowerPct < 0 {
		rel = fmt.Sprintf("A is %.1f%% faster than B", -g.SlowerPct)
	}
	cmpText := fmt.Sprintf("%s p50 A %.1f ms vs B %.1f ms", g.Stage, g.AP50, g.BP50)
	if g.NotEvaluated {
		return fmt.Sprintf("too few volumes (n=%d < %d): %s; --min-volumes N lowers the limit", g.N, g.MinVolumes, cmpText)
	}
	return fmt.Sprintf("%s: %s (limit: slower by at most %g%%)", cmpText, rel, g.MaxSlowerPct)
}

// Message is the gate's verdict and detail in one line.
func (g *GateResult) Message() string {
	return "gate " + g.Verdict() + ": " + g.Detail()
}

// Row is one line of the comparison table: one stage, Service or EndToEnd. A or B is nil when
// that side has no volume with the stage; Speedup is nil unless both have it.
type Row struct {
	Stage   stage.Stage
	A, B    *Stats
	Speedup *Speedup
}

// Throughput of a batch over its span: ok volumes per minute and megavoxels per second.
type Throughput struct {
	Volumes   int
	Voxels    int64
	SpanMS    float64
	SpanFrom  string // FromTimings ("first start to last end") and/or FromSummary ("sum of wall_ms")
	VolPerMin float64
	MVoxPerS  float64
}

// Timeline is the slab Gantt chart's data: one volume's timings.csv events, with times
// relative to its first event.
type Timeline struct {
	RunID, Volume string
	Stages        []stage.Stage // rows, in pipeline order
	Bars          []TimelineBar
}

// TimelineBar is one event.
type TimelineBar struct {
	Stage          stage.Stage
	Slab           int
	StartMS, EndMS float64
}

// Report is the comparison of batch A against baseline B.
type Report struct {
	A, B        *Batch
	Rows        []Row // stages in pipeline order, then Service and EndToEnd
	ThroughputA Throughput
	ThroughputB Throughput
	Gate        *GateResult // nil without a gate
	Timeline    *Timeline   // nil when A has no timings.csv
	Resamples   int
	Seed        uint64
	MinVolumes  int
	latenciesA  map[stage.Stage][]sample
	latenciesB  map[stage.Stage][]sample
}

// sample is one volume's latency in one stage.
type sample struct {
	name   string
	ms     float64
	voxels int64
}

// Generate loads both batches and compares them.
func Generate(runs, baselines []string, opts Options) (*Report, error) {
	a, err := LoadBatch("A", runs)
	if err != nil {
		return nil, err
	}
	b, err := LoadBatch("B", baselines)
	if err != nil {
		return nil, err
	}
	return Compare(a, b, opts)
}

// Compare builds the report of a against b.
func Compare(a, b *Batch, opts Options) (*Report, error) {
	if opts.MinVolumes < 0 {
		return nil, inputError(fmt.Errorf("the fewest volumes for a comparison must be at least 1, not %d", opts.MinVolumes))
	}
	r := &Report{A: a, B: b, Resamples: cmp.Or(opts.Resamples, DefaultResamples), Seed: opts.Seed,
		MinVolumes: cmp.Or(opts.MinVolumes, DefaultMinVolumes), latenciesA: latencies(a), latenciesB: latencies(b)}
	r.ThroughputA, r.ThroughputB = throughput(a), throughput(b)

	stages := map[stage.Stage]bool{}
	for s := range r.latenciesA {
		stages[s] = true
	}
	for s := range r.latenciesB {
		stages[s] = true
	}
	delete(stages, EndToEnd)
	delete(stages, Service)
	for _, stage := range append(orderStages(slices.Collect(maps.Keys(stages))), Service, EndToEnd) {
		row := Row{Stage: stage}
		sa, sb := r.latenciesA[stage], r.latenciesB[stage]
		if len(sa) > 0 {
			row.A = stageStats(sa)
		}
		if len(sb) > 0 {
			row.B = stageStats(sb)
		}
		if stage == EndToEnd { // over the span, not the busy time: stages overlap
			if row.A != nil {
				row.A.VolPerMin, row.A.MVoxPerS = r.ThroughputA.VolPerMin, r.ThroughputA.MVoxPerS
			}
			if row.B != nil {
				row.B.VolPerMin, row.B.MVoxPerS = r.ThroughputB.VolPerMin, r.ThroughputB.MVoxPerS
			}
		}
		if row.A != nil && row.B != nil {
			row.Speedup = speedup(sa, sb, r.Resamples, r.Seed)
			if sp := row.Speedup; sp != nil {
				sp.MinVolumes = r.MinVolumes
				sp.TooFew = sp.Volumes() < r.MinVolumes
			}
		}
		r.Rows = append(r.Rows, row)
	}

	if opts.Gate != nil {
		g, err := r.gate(*opts.Gate)
		if err != nil {
			return nil, err
		}
		r.Gate = g
	}
	tl, err := timeline(a, opts.TimelineVolume)
	if err != nil {
		return nil, err
	}
	r.Timeline = tl
	return r, nil
}

// orderStages sorts stage names in pipeline order, unknown ones last, alphabetically.
func orderStages(stages []stage.Stage) []stage.Stage {
	rank := func(s stage.Stage) int {
		if i := slices.Index(stageOrder, s); i >= 0 {
			return i
		}
		return len(stageOrder)
	}
	slices.SortFunc(stages, func(x, y stage.Stage) int { return cmp.Or(cmp.Compare(rank(x), rank(y)), cmp.Compare(x, y)) })
	return stages
}

// latencies gathers per-volume latencies of the ok volumes, per stage, Service and EndToEnd.
func latencies(b *Batch) map[stage.Stage][]sample {
	out := map[stage.Stage][]sample{}
	for _, v := range b.okVolumes() {
		out[EndToEnd] = append(out[EndToEnd], sample{v.Name, v.EndToEndMS, v.Voxels})
		out[Service] = append(out[Service], sample{v.Name, v.ServiceMS(), v.Voxels})
		for stage, ms := range v.StageMS {
			out[stage] = append(out[stage], sample{v.Name, ms, v.Voxels})
		}
	}
	return out
}

func stageStats(samples []sample) *Stats {
	values := make([]float64, len(samples))
	var busy float64
	var voxels int64
	for i, s := range samples {
		values[i] = s.ms
		busy += s.ms
		voxels += s.voxels
	}
	st := summarize(values)
	st.VolPerMin, st.MVoxPerS = rates(len(samples), voxels, busy)
	return &st
}

func throughput(b *Batch) Throughput {
	t := Throughput{}
	for _, v := range b.okVolumes() {
		t.Volumes++
		t.Voxels += v.Voxels
	}
	t.SpanMS, t.SpanFrom = b.span()
	t.VolPerMin, t.MVoxPerS = rates(t.Volumes, t.Voxels, t.SpanMS)
	return t
}

// rates converts volumes and voxels done in ms into volumes/min and Mvox/s; NaN where unknown
// (no time, or no voxel counts in the CSVs).
func rates(volumes int, voxels int64, ms float64) (volPerMin, mvoxPerS float64) {
	if ms <= 0 {
		return math.NaN(), math.NaN()
	}
	volPerMin = float64(volumes) * 60000 / ms
	mvoxPerS = math.NaN()
	if voxels > 0 {
		mvoxPerS = float64(voxels) / 1e6 / (ms / 1000)
	}
	return volPerMin, mvoxPerS
}

// speedup pairs volumes by name when enough of them match: at least 2, and at least half of
// the smaller side. A name that occurs in several runs of one side (repeated runs) pairs
// through the median of its latencies.
func speedup(a, b []sample, resamples int, seed uint64) *Speedup {
	byName := func(ss []sample) map[string][]float64 {
		m := map[string][]float64{}
		for _, s := range ss {
			m[s.name] = append(m[s.name], s.ms)
		}
		return m
	}
	na, nb := byName(a), byName(b)
	var pa, pb []float64
	for _, name := range slices.Sorted(maps.Keys(na)) {
		if lb, ok := nb[name]; ok {
			pa = append(pa, median(na[name]))
			pb = append(pb, median(lb))
		}
	}
	if len(pa) >= 2 && 2*len(pa) >= min(len(na), len(nb)) {
		if sp := pairedSpeedup(pa, pb, resamples, seed); sp != nil {
			return sp
		}
	}
	return unpairedSpeedup(values(a), values(b), resamples, seed)
}

func values(ss []sample) []float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = s.ms
	}
	return v
}

// row returns the row of stage, or nil.
func (r *Report) row(stage stage.Stage) *Row {
	for i := range r.Rows {
		if r.Rows[i].Stage == stage {
			return &r.Rows[i]
		}
	}
	return nil
}

func (r *Report) stageNames() []string {
	names := make([]string, len(r.Rows))
	for i, row := range r.Rows {
		names[i] = string(row.Stage)
	}
	return names
}

func (r *Report) gate(opts GateOptions) (*GateResult, error) {
	opts.Stage = cmp.Or(opts.Stage, EndToEnd)
	if opts.MaxSlowerPct < 0 || math.IsNaN(opts.MaxSlowerPct) {
		return nil, inputError(fmt.Errorf("gate: the allowed slowdown must be a percentage >= 0, not %g", opts.MaxSlowerPct))
	}
	row := r.row(opts.Stage)
	if row == nil || row.A == nil || row.B == nil {
		return nil, inputError(fmt.Errorf("gate stage %q: not measured in both A and B (stages: %s)",
			opts.Stage, strings.Join(r.stageNames(), ", ")))
	}
	g := &GateResult{GateOptions: opts, AP50: row.A.P50, BP50: row.B.P50, MinVolumes: r.MinVolumes}
	switch {
	case g.BP50 > 0:
		g.SlowerPct = (g.AP50/g.BP50 - 1) * 100
	case g.AP50 > 0:
		g.SlowerPct = math.Inf(1)
	}
	// The volumes the comparison rests on: those the speedup used (pairs when paired), else
	// each side's count.
	g.N = min(row.A.Count, row.B.Count)
	if row.Speedup != nil {
		g.N = row.Speedup.Volumes()
	}
	g.NotEvaluated = g.N < r.MinVolumes
	g.Failed = !g.NotEvaluated && g.SlowerPct > opts.MaxSlowerPct
	return g, nil
}

// timeline picks the named volume of A, or A's slowest ok volume with timings, and lays out
// its events.
func timeline(a *Batch, name string) (*Timeline, error) {
	var pick *Volume
	for _, v := range a.Volumes {
		if len(v.Events) == 0 {
			continue
		}
		if name != "" {
			if v.Name == name && (pick == nil || v.EndToEndMS > pick.EndToEndMS) {
				pick = v
			}
			continue
		}
		if v.Status == timing.StatusOK && (pick == nil || v.EndToEndMS > pick.EndToEndMS) {
			pick = v
		}
	}
	if pick == nil {
		if name != "" {
			return nil, inputError(fmt.Errorf("timeline volume %q: A has no timings.csv rows for it", name))
		}
		return nil, nil
	}
	t0 := math.Inf(1)
	stages := map[stage.Stage]bool{}
	for _, e := range pick.Events {
		t0 = min(t0, e.StartMS)
		stages[e.Stage] = true
	}
	tl := &Timeline{RunID: pick.RunID, Volume: pick.Name, Stages: orderStages(slices.Collect(maps.Keys(stages)))}
	for _, e := range pick.Events {
		tl.Bars = append(tl.Bars, TimelineBar{Stage: e.Stage, Slab: e.Slab, StartMS: e.StartMS - t0, EndMS: e.StartMS + e.DurationMS - t0})
	}
	return tl, nil
}

// ExitCode maps Generate's outcome to the subcommand's exit code: 2 for bad input, 1 for
// other errors, 3 when the gate failed, else 0 (a gate not evaluated included: it neither
// passed nor failed, and its message says so).
func ExitCode(r *Report, err error) int {
	switch {
	case errors.Is(err, ErrInput):
		return ExitBadInput
	case err != nil:
		return ExitFailed
	case r != nil && r.Gate != nil && r.Gate.Failed:
		return ExitGateFailed
	}
	return ExitOK
}
