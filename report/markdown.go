package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"voxpipe/stage"
	"voxpipe/telemetry/timing"
)

// WriteMarkdown writes the summary: gate verdict, latency table, throughput, volumes that are
// not ok, and how the numbers were computed.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# voxpipe latency report\n\n")
	for _, batch := range []*Batch{r.A, r.B} {
		fmt.Fprintf(&b, "- **%s** (%s): %s\n", batch.Label, sideRole(batch.Label), batch.Describe())
	}
	b.WriteString("\n")

	if r.Gate != nil {
		fmt.Fprintf(&b, "**Gate %s**: %s.\n\n", r.Gate.Verdict(), r.Gate.Detail())
	}

	r.markdownLatency(&b)
	r.markdownThroughput(&b)
	r.markdownNotOK(&b)
	if r.Timeline != nil {
		fmt.Fprintf(&b, "Slab timeline (report.html): volume %s of run %s of A.\n\n", r.Timeline.Volume, r.Timeline.RunID)
	} else {
		b.WriteString("Slab timeline: none, A has no timings.csv.\n\n")
	}
	r.markdownMethod(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// markdownLatency writes the latency table: per stage, A's and B's stats and the speedup.
func (r *Report) markdownLatency(b *strings.Builder) {
	b.WriteString("## Latency per volume (ms)\n\n")
	b.WriteString("| stage | side | n | mean | p50 | p90 | p95 | p99 | max | vol/min | Mvox/s | speedup A vs B [95% CI] |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, row := range r.Rows {
		stage := string(row.Stage)
		if note := stageNote(row.Stage); note != "" {
			stage = "**" + stage + "** (" + note + ")"
		}
		for i, side := range []struct {
			label string
			st    *Stats
		}{{"A", row.A}, {"B", row.B}} {
			cells := []string{stage, side.label}
			if i == 1 {
				cells[0] = ""
			}
			cells = append(cells, statsCells(side.st)...)
			if i == 0 {
				cells = append(cells, speedupText(row.Speedup))
			} else {
				cells = append(cells, "")
			}
			b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
		}
	}
	b.WriteString("\n")
	if r.anyTooFew() {
		fmt.Fprintf(b, "Speedups marked *too few volumes* rest on fewer than %d volumes on a side: their intervals are shown, but are no evidence of a difference (see Method).\n\n", r.MinVolumes)
	}
}

// markdownThroughput writes the throughput table of both sides.
func (r *Report) markdownThroughput(b *strings.Builder) {
	b.WriteString("## Throughput\n\n")
	b.WriteString("| side | ok volumes | Mvox | span (ms) | span measured as | vol/min | Mvox/s |\n")
	b.WriteString("|---|--:|--:|--:|---|--:|--:|\n")
	for _, side := range []struct {
		batch *Batch
		tp    Throughput
	}{{r.A, r.ThroughputA}, {r.B, r.ThroughputB}} {
		tp := side.tp
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %s |\n", side.batch.Label, tp.Volumes,
			num(float64(tp.Voxels)/1e6, 3), num(tp.SpanMS, 1), spanText(side.batch, tp), num(tp.VolPerMin, 1), num(tp.MVoxPerS, 2))
	}
	b.WriteString("\n")
}

// markdownNotOK lists the volumes that are not counted.
func (r *Report) markdownNotOK(b *strings.Builder) {
	var notOK []*Volume
	for _, batch := range []*Batch{r.A, r.B} {
		notOK = append(notOK, batch.notOK()...)
	}
	b.WriteString("## Volumes not counted (not ok)\n\n")
	if len(notOK) == 0 {
		b.WriteString("None: every volume is ok.\n\n")
	} else {
		for _, batch := range []*Batch{r.A, r.B} {
			fmt.Fprintf(b, "- %s: %s\n", batch.Label, statusCounts(batch))
		}
		b.WriteString("\n| side | run | volume | status | error |\n|---|---|---|---|---|\n")
		for _, batch := range []*Batch{r.A, r.B} {
			for _, v := range batch.notOK() {
				fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", batch.Label, mdCell(v.RunID), mdCell(v.Name), v.Status, mdCell(v.Error))
			}
		}
		b.WriteString("\n")
	}
}

// markdownMethod writes how the numbers were computed.
func (r *Report) markdownMethod(b *strings.Builder) {
	b.WriteString("## Method\n\n")
	for _, batch := range []*Batch{r.A, r.B} {
		fmt.Fprintf(b, "- %s: %s\n", batch.Label, batch.latencySources())
	}
	b.WriteString("- Only volumes with status ok count; skipped, failed and unlisted volumes are counted apart above.\n")
	b.WriteString("- Percentiles interpolate linearly between closest ranks (numpy's default): p-th = x[k] + f·(x[k+1] − x[k]), h = (n−1)·p/100, k = ⌊h⌋, f = h − k.\n")
	b.WriteString("- end_to_end is the turnaround (sojourn) time: summary.csv's wall_ms, from the start of the volume's read (under voxpipe watch, its arrival) to its mask's rename, the time it waited (for an input buffer, memory or an engine) included: what one waits for a volume, which grows with the queue in front of it. service is the time the volume was worked on: wall_ms − queue_ms per volume; where queue_ms is missing (older runs, the PyTorch baseline) the wait counts as 0 and service equals turnaround.\n")
	b.WriteString("- vol/min and Mvox/s: stage rows and service use their busy time (n / sum of their latencies); end_to_end uses the batch's span (Throughput table). Shards of a batch are taken to run side by side: the span is the longest run's.\n")
	fmt.Fprintf(b, "- Speedup > 1 means A is faster. Paired (volumes matched by name, when at least 2 match and at least half of the smaller side): median of per-volume ratios B/A, bootstrap resampling the ratios. Unpaired: median(B)/median(A), bootstrap resampling each side. %d resamples, seed %d, percentile interval.\n", r.Resamples, r.Seed)
	fmt.Fprintf(b, "- Too few volumes: a speedup drawn from fewer than %d volumes on either side (pairs when paired; --min-volumes sets the limit) is flagged too few volumes: with so few volumes the bootstrap interval is too narrow (it never reaches past the ratios observed), so two identical runs can look significantly different. The gate is not evaluated on such a comparison (it neither passes nor fails).\n", r.MinVolumes)
}

func sideRole(label string) string {
	if label == "A" {
		return "run"
	}
	return "baseline"
}

// Describe lists the batch's runs and files in one line.
func (b *Batch) Describe() string {
	runs := make([]string, len(b.Spans))
	for i, s := range b.Spans {
		runs[i] = s.RunID
		if runs[i] == "" {
			runs[i] = `""`
		}
	}
	return fmt.Sprintf("%d run(s) %s; files: %s", len(runs), strings.Join(runs, ", "), strings.Join(b.Files, ", "))
}

// latencySources says where the batch's per-volume latencies come from.
func (b *Batch) latencySources() string {
	var timed, fromSummaryCols, e2eSummary, e2eTimings, queued int
	for _, v := range b.okVolumes() {
		if v.QueueKnown {
			queued++
		}
		if len(v.Events) > 0 {
			timed++
		} else if len(v.StageMS) > 0 {
			fromSummaryCols++
		}
		switch v.EndToEndFrom {
		case FromSummary:
			e2eSummary++
		case FromTimings:
			e2eTimings++
		}
	}
	var parts []string
	if timed > 0 {
		parts = append(parts, fmt.Sprintf("stage latencies of %d volume(s) from timings.csv (per stage, the time it was running: the union of its spans)", timed))
	}
	if fromSummaryCols > 0 {
		parts = append(parts, fmt.Sprintf("stage latencies of %d volume(s) from summary.csv's <stage>_ms columns (no timings.csv)", fromSummaryCols))
	}
	if e2eSummary > 0 {
		parts = append(parts, fmt.Sprintf("end_to_end of %d from summary.csv wall_ms", e2eSummary))
	}
	if e2eTimings > 0 {
		parts = append(parts, fmt.Sprintf("end_to_end of %d from timings.csv, first start to last end (no summary.csv)", e2eTimings))
	}
	if len(parts) == 0 {
		return "no ok volume"
	}
	switch ok := len(b.okVolumes()); {
	case queued == ok:
		parts = append(parts, fmt.Sprintf("service of %d from wall_ms − queue_ms", queued))
	case queued > 0:
		parts = append(parts, fmt.Sprintf("service of %d from wall_ms − queue_ms, of %d equal to end_to_end (no queue_ms)", queued, ok-queued))
	default:
		parts = append(parts, "service equal to end_to_end (no queue_ms)")
	}
	return strings.Join(parts, "; ")
}

func spanText(b *Batch, tp Throughput) string {
	var how []string
	for _, from := range strings.Split(tp.SpanFrom, " and ") {
		switch from {
		case FromTimings:
			how = append(how, "timings.csv, first start to last end")
		case FromSummary:
			how = append(how, "sum of summary.csv wall_ms")
		}
	}
	text := strings.Join(how, " / ")
	if len(b.Spans) > 1 {
		text += fmt.Sprintf("; longest of %d runs", len(b.Spans))
	}
	return text
}

func statusCounts(b *Batch) string {
	counts := map[timing.Status]int{}
	for _, v := range b.Volumes {
		counts[v.Status]++
	}
	var parts []string
	// ok, skipped and failed always; the other statuses when some volume has them.
	for _, s := range append(slices.Clone(timing.Statuses), StatusNoSummaryRow) {
		if counts[s] > 0 || s == timing.StatusOK || s == timing.StatusSkipped || s == timing.StatusFailed {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	return strings.Join(parts, ", ")
}

func statsCells(st *Stats) []string {
	if st == nil {
		return slices.Repeat([]string{"-"}, 9)
	}
	return []string{fmt.Sprint(st.Count), num(st.Mean, 1), num(st.P50, 1), num(st.P90, 1), num(st.P95, 1),
		num(st.P99, 1), num(st.Max, 1), num(st.VolPerMin, 1), num(st.MVoxPerS, 2)}
}

func speedupText(sp *Speedup) string {
	if sp == nil {
		return "-"
	}
	how := fmt.Sprintf("paired, %d volumes", sp.N)
	if !sp.Paired {
		how = fmt.Sprintf("unpaired, %d vs %d volumes", sp.N, sp.NB)
	}
	if math.IsNaN(sp.Low) {
		return fmt.Sprintf("%.2fx (no CI: too few volumes; %s)", sp.Value, how)
	}
	text := fmt.Sprintf("%.2fx [%.2f, %.2f] (%s)", sp.Value, sp.Low, sp.High, how)
	if sp.TooFew {
		text += fmt.Sprintf(": too few volumes (< %d)", sp.MinVolumes)
	}
	return text
}

// stageNote says what the report's own rows measure; "" for stages.
func stageNote(stage stage.Stage) string {
	switch stage {
	case EndToEnd:
		return "turnaround / sojourn: queueing included"
	case Service:
		return "wall_ms − queue_ms: queueing excluded"
	}
	return ""
}

// anyTooFew says whether some row's speedup is flagged too few volumes.
func (r *Report) anyTooFew() bool {
	for _, row := range r.Rows {
		if row.Speedup != nil && row.Speedup.TooFew {
			return true
		}
	}
	return false
}

// num formats v with prec decimals; "-" for NaN (unknown) and infinities.
func num(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}
