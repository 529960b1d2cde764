package report

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"voxpipe/internal/spans"
	"voxpipe/stage"
	"voxpipe/store/records"
	"voxpipe/telemetry/timing"
)

// StatusNoSummaryRow is the status of a volume that has timings.csv rows but no summary.csv
// row although its run has a summary.csv: it is listed apart, like failed volumes.
const StatusNoSummaryRow timing.Status = "no summary row"

// Sources of a volume's end-to-end latency and of a run's span.
const (
	FromSummary = "summary.csv"
	FromTimings = "timings.csv"
)

// Volume is one volume of one run.
type Volume struct {
	RunID  string
	Name   string
	Status timing.Status // a timing.Status, or StatusNoSummaryRow
	Error  string
	Dims   string
	Engine string
	Voxels int64 // from summary.csv, else inferred from timings.csv (0 when unknown)
	// FinishedAt is summary.csv's finished_at (empty in older files, or without a row).
	FinishedAt string

	// EndToEndMS is summary.csv's wall_ms, or first start to last end of the volume's
	// timings.csv rows when its run has no summary.csv (EndToEndFrom says which).
	EndToEndMS   float64
	EndToEndFrom string
	// QueueMS is summary.csv's queue_ms: the part of EndToEndMS the volume waited rather than
	// being worked on. 0 when unknown (QueueKnown false): files written before the column,
	// the PyTorch baseline's, or no summary.csv.
	QueueMS    float64
	QueueKnown bool

	// StageMS is the volume's latency per stage: the sum of the stage's durations in
	// timings.csv (slab rows summed), or summary.csv's <stage>_ms columns (those > 0) when
	// its run has no timings.csv.
	StageMS map[stage.Stage]float64

	Events []timing.Row // timings.csv rows, by start time
}

// RunSpan is the wall-clock span of one run: first start to last end in its timings.csv, or
// the sum of its summary.csv wall_ms when it has no timings.csv.
type RunSpan struct {
	RunID  string
	SpanMS float64
	From   string // FromTimings or FromSummary
}

// Batch is one side of the comparison: the merged runs (shards) read from the --run or
// --baseline paths.
type Batch struct {
	Label   string   // "A" or "B"
	Files   []string // the CSVs read
	Volumes []*Volume
	Spans   []RunSpan // one per run ID
}

// LoadBatch reads the timings and summary CSVs found at paths (files or folders) and merges
// them into one batch.
func LoadBatch(label string, paths []string) (*Batch, error) {
	if len(paths) == 0 {
		return nil, inputError(fmt.Errorf("no input for %s", label))
	}
	files, err := discover(paths)
	if err != nil {
		return nil, err
	}
	b := &Batch{Label: label}
	var timings []timing.Row
	var summaries []summaryAt
	runOut := map[string]string{} // run id -> the output folder whose runs/ recorded it
	for _, f := range files {
		t, err := readTable(f.path)
		if err != nil {
			return nil, err
		}
		kind := f.kind
		if kind == 0 {
			if kind, err = t.kindFromHeader(); err != nil {
				return nil, err
			}
		}
		b.Files = append(b.Files, f.path)
		switch kind {
		case kindTimings:
			rows, err := readTimings(t)
			if err != nil {
				return nil, err
			}
			timings = append(timings, rows...)
			for _, r := range rows {
				if f.outDir != "" {
					runOut[r.RunID] = f.outDir
				}
			}
		case kindSummary:
			rows, err := readSummaries(t)
			if err != nil {
				return nil, err
			}
			for i, r := range rows {
				summaries = append(summaries, summaryAt{r, t.path, t.lines[i][t.col["volume"]], t.queueKnown(i)})
				if f.outDir != "" {
					runOut[r.RunID] = f.outDir
				}
			}
		}
	}
	if err := b.merge(timings, summaries); err != nil {
		return nil, err
	}
	b.keepLatest(runOut)
	b.spans()
	if len(b.Volumes) == 0 {
		return nil, inputError(fmt.Errorf("%s (%s): the CSVs list no volumes", label, strings.Join(paths, ", ")))
	}
	return b, nil
}

// summaryAt is a summary row and where it was read, to point at duplicates.
type summaryAt struct {
	timing.Summary
	file       string
	line       int
	queueKnown bool // the row gives queue_ms
}

type volumeKey struct{ run, name string }

func (b *Batch) merge(timings []timing.Row, summaries []summaryAt) error {
	bySummary := map[volumeKey]summaryAt{}
	runsWithSummary := map[string]bool{}
	for _, s := range summaries {
		k := volumeKey{s.RunID, s.Volume}
		if prev, dup := bySummary[k]; dup {
			return &CSVError{File: s.file, Line: s.line, Field: "volume",
				Err: fmt.Errorf("%w: volume %q of run %q is already listed at %s line %d", errDuplicate, s.Volume, s.RunID, prev.file, prev.line)}
		}
		bySummary[k] = s
		runsWithSummary[s.RunID] = true
	}
	events := map[volumeKey][]timing.Row{}
	for _, r := range timings {
		k := volumeKey{r.RunID, r.Volume}
		events[k] = append(events[k], r)
	}

	keys := map[volumeKey]bool{}
	for k := range bySummary {
		keys[k] = true
	}
	for k := range events {
		keys[k] = true
	}
	for k := range keys {
		v := &Volume{RunID: k.run, Name: k.name, Events: events[k], StageMS: map[stage.Stage]float64{}}
		slices.SortStableFunc(v.Events, func(x, y timing.Row) int {
			return cmp.Or(cmp.Compare(x.StartMS, y.StartMS), cmp.Compare(x.Stage, y.Stage), cmp.Compare(x.Slab, y.Slab))
		})
		// A stage's latency is the time it was running: the union of its spans (the CUDA fp16
		// engine's kernels of consecutive slabs overlap, as do parallel read chunks).
		ends := map[stage.Stage]float64{}
		for _, e := range v.Events {
			end, seen := ends[e.Stage]
			if !seen {
				end = e.StartMS
			}
			v.StageMS[e.Stage] += spans.BusyAdded(&end, e.StartMS, e.DurationMS)
			ends[e.Stage] = end
		}
		s, listed := bySummary[k]
		switch {
		case listed:
			v.Status, v.Error, v.Dims, v.Engine, v.Voxels = s.Status, s.Error, s.Dims, s.Engine, s.Voxels
			v.FinishedAt = s.FinishedAt
			v.EndToEndMS, v.EndToEndFrom = s.WallMS, FromSummary
			v.QueueMS, v.QueueKnown = s.QueueMS, s.queueKnown
			if len(v.Events) == 0 {
				for _, c := range summaryStageColumns {
					if ms := c.value(&s.Summary); ms > 0 {
						v.StageMS[c.stage] = ms
					}
				}
			}
		case runsWithSummary[k.run]:
			v.Status = StatusNoSummaryRow
		default:
			v.Status = timing.StatusOK
			v.EndToEndMS, v.EndToEndFrom = eventSpan(v.Events), FromTimings
		}
		if v.Voxels == 0 {
			v.Voxels = inferVoxels(v.Events)
		}
		b.Volumes = append(b.Volumes, v)
	}
	slices.SortFunc(b.Volumes, func(x, y *Volume) int {
		return cmp.Or(cmp.Compare(x.RunID, y.RunID), cmp.Compare(x.Name, y.Name))
	})
	return nil
}

// keepLatest reduces the volumes of the runs recorded in each voxpipe output folder (runOut:
// run id -> folder) to one per volume name, its latest outcome (records.Latest): merged runs of
// one folder are the folder's state, not repeated samples. Other inputs are kept as they are.
func (b *Batch) keepLatest(runOut map[string]string) {
	type key struct{ out, name string }
	groups := map[key][]timing.Summary{}
	for _, v := range b.Volumes {
		if out, ok := runOut[v.RunID]; ok {
			k := key{out, v.Name}
			groups[k] = append(groups[k], timing.Summary{RunID: v.RunID, Volume: v.Name, Status: v.Status, FinishedAt: v.FinishedAt})
		}
	}
	keep := map[volumeKey]bool{}
	for _, rows := range groups {
		latest := records.Latest(rows)[0]
		keep[volumeKey{latest.RunID, latest.Volume}] = true
	}
	b.Volumes = slices.DeleteFunc(b.Volumes, func(v *Volume) bool {
		_, grouped := runOut[v.RunID]
		return grouped && !keep[volumeKey{v.RunID, v.Name}]
	})
}

// spans computes each run's span from its volumes.
func (b *Batch) spans() {
	b.Spans = nil
	runs := map[string]bool{}
	for _, v := range b.Volumes {
		runs[v.RunID] = true
	}
	for _, run := range slices.Sorted(maps.Keys(runs)) {
		var runEvents []timing.Row
		var wallSum float64
		for _, v := range b.Volumes {
			if v.RunID == run {
				runEvents = append(runEvents, v.Events...)
				if v.EndToEndFrom == FromSummary {
					wallSum += v.EndToEndMS
				}
			}
		}
		if len(runEvents) > 0 {
			b.Spans = append(b.Spans, RunSpan{RunID: run, SpanMS: eventSpan(runEvents), From: FromTimings})
		} else {
			b.Spans = append(b.Spans, RunSpan{RunID: run, SpanMS: wallSum, From: FromSummary})
		}
	}
}

var errDuplicate = errors.New("duplicate volume")

// eventSpan is first start to last end of events.
func eventSpan(events []timing.Row) float64 {
	if len(events) == 0 {
		return 0
	}
	first, last := math.Inf(1), math.Inf(-1)
	for _, e := range events {
		first = min(first, e.StartMS)
		last = max(last, e.StartMS+e.DurationMS)
	}
	return last - first
}

// inferVoxels guesses a volume's size from its timings when summary.csv does not give it:
// the largest whole-volume row, or the largest per-stage sum over slab rows.
func inferVoxels(events []timing.Row) int64 {
	var best int64
	slabSums := map[stage.Stage]int64{}
	for _, e := range events {
		if e.Slab < 0 {
			best = max(best, e.Voxels)
		} else {
			slabSums[e.Stage] += e.Voxels
		}
	}
	for _, s := range slabSums {
		best = max(best, s)
	}
	return best
}

// ServiceMS is the volume's service time: its turnaround (EndToEndMS) less the time it
// waited (QueueMS).
func (v *Volume) ServiceMS() float64 { return v.EndToEndMS - v.QueueMS }

// waited says whether some ok volume of the batch waited (queue_ms > 0), so that its service
// latencies differ from its turnaround.
func (b *Batch) waited() bool {
	return slices.ContainsFunc(b.okVolumes(), func(v *Volume) bool { return v.QueueMS > 0 })
}

// okVolumes are the volumes whose latencies count.
func (b *Batch) okVolumes() []*Volume {
	var ok []*Volume
	for _, v := range b.Volumes {
		if v.Status == timing.StatusOK {
			ok = append(ok, v)
		}
	}
	return ok
}

// notOK lists the volumes whose status is not ok.
func (b *Batch) notOK() []*Volume {
	var out []*Volume
	for _, v := range b.Volumes {
		if v.Status != timing.StatusOK {
			out = append(out, v)
		}
	}
	return out
}

// span is the batch's span: the longest of its runs', since shards of one batch run side by
// side, each timed from its own start.
func (b *Batch) span() (ms float64, from string) {
	froms := map[string]bool{}
	for _, s := range b.Spans {
		ms = max(ms, s.SpanMS)
		froms[s.From] = true
	}
	return ms, strings.Join(slices.Sorted(maps.Keys(froms)), " and ")
}
