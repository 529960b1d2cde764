package report

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"voxpipe/stage"
	"voxpipe/telemetry/timing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// The sample batches in testdata (every number below is computed by hand from them):
//
// A: a GPU-like run in two shards (A/shard-0: run a-0, A/shard-1: run a-1). Volumes v1..v4 are
// ok and scaled copies of one timeline (multipliers 1, 1.2, 1.4, 2): per slab h2d, kernels
// and d2h overlap, plus whole-volume read, stats, segment (the engine call) and write. v5
// failed after its read, v6 was skipped. Per-stage latency of v1 (the base): read 20, stats
// 5, segment 62, h2d 8+8 = 16, kernels 25+25 = 50, d2h 4+4 = 8, write 13; wall 100.
// Voxels: v1..v3 1e6, v4 2e6. Spans: a-0 0..210, a-1 0..330.
//
// For any A stage with base x, the sorted values are x*[1, 1.2, 1.4, 2] (n = 4):
// mean = 5.6x/4 = 1.4x; p50: h = 1.5 -> 1.3x; p90: h = 2.7 -> 1.4x + 0.7*0.6x = 1.82x;
// p95: h = 2.85 -> 1.91x; p99: h = 2.97 -> 1.982x; max 2x.
//
// B: a CPU-like run (b-0), sequential volumes v1..v5, segment per slab. Walls 300 260 400 500
// 350 (span 0..1810); segment per volume 220 200 300 380 260; read 40 30 50 60 40. Voxels:
// v4 2e6, the others 1e6.
//
// C: a PyTorch-like baseline with only summary.csv: case01..03, walls 250 300 450, read_ms 50
// 60 80, segment_ms 170 200 310, 1e6 voxels each.
//
// A, B and C have no queue_ms column (older runs): their service latency is their wall_ms.
//
// Q: the four identical fixtures through one CPU engine, summary.csv only, with
// queue_ms: fix1..fix4 walls 5600 11300 16000 15700 (turnaround), queue_ms 0 5600 10500 10100,
// so service 5600 5700 5500 5600; 1e6 voxels each; fix5 failed (empty queue_ms).
// P: a PyTorch-like baseline of the same fixtures without queue_ms: walls 6000 6200 5800 6100.

func loadSample(t *testing.T, runs, baselines []string, opts Options) *Report {
	t.Helper()
	r, err := Generate(runs, baselines, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type wantStats struct {
	count                         int
	mean, p50, p90, p95, p99, max float64
	volPerMin, mvoxPerS           float64
}

func checkStats(t *testing.T, what string, got *Stats, want wantStats) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: no stats", what)
	}
	if got.Count != want.count {
		t.Errorf("%s count = %d, want %d", what, got.Count, want.count)
	}
	approx(t, what+" mean", got.Mean, want.mean)
	approx(t, what+" p50", got.P50, want.p50)
	approx(t, what+" p90", got.P90, want.p90)
	approx(t, what+" p95", got.P95, want.p95)
	approx(t, what+" p99", got.P99, want.p99)
	approx(t, what+" max", got.Max, want.max)
	approx(t, what+" vol/min", got.VolPerMin, want.volPerMin)
	approx(t, what+" Mvox/s", got.MVoxPerS, want.mvoxPerS)
}

func TestSampleAgainstBaseline(t *testing.T) {
	r := loadSample(t, []string{"testdata/A"}, []string{"testdata/B"}, Options{Seed: 1})

	wantStages := []string{"read", "stats", "h2d", "kernels", "segment", "d2h", "write", string(Service), string(EndToEnd)}
	if got := r.stageNames(); strings.Join(got, " ") != strings.Join(wantStages, " ") {
		t.Fatalf("stages %v, want %v", got, wantStages)
	}

	// End to end, A: walls 100 120 140 200 (base 100). Throughput over the longest shard's
	// span, 330 ms: 4 volumes * 60000/330 = 727.2727 vol/min; 5e6 voxels / 0.33 s = 15.1515 Mvox/s.
	e2e := r.row(EndToEnd)
	checkStats(t, "A end_to_end", e2e.A, wantStats{4, 140, 130, 182, 191, 198.2, 200, 4 * 60000.0 / 330, 5 / 0.33})
	// B: sorted 260 300 350 400 500: mean 362, p50 350, p90 460, p95 480, p99 496, max 500.
	// Span 1810 ms: 5*60000/1810 = 165.746 vol/min; 6e6 voxels / 1.81 s = 3.315 Mvox/s.
	checkStats(t, "B end_to_end", e2e.B, wantStats{5, 362, 350, 460, 480, 496, 500, 5 * 60000.0 / 1810, 6 / 1.81})

	// No queue_ms in A or B: service is wall_ms, the same latencies, but its throughput is over
	// the busy time like a stage's: A 4*60000/560 = 428.57 vol/min, 5e6/0.56 s = 8.93 Mvox/s;
	// B 5*60000/1810, 6e6/1.81 s (B's volumes ran one after another: busy time = span).
	svc := r.row(Service)
	checkStats(t, "A service", svc.A, wantStats{4, 140, 130, 182, 191, 198.2, 200, 4 * 60000.0 / 560, 5 / 0.56})
	checkStats(t, "B service", svc.B, wantStats{5, 362, 350, 460, 480, 496, 500, 5 * 60000.0 / 1810, 6 / 1.81})

	// Kernels, A only (base 50): 70 65 91 95.5 99.1 100. Busy throughput: sum 50*5.6 = 280 ms,
	// 4*60000/280 = 857.14 vol/min; 5e6 voxels / 0.28 s = 17.857 Mvox/s.
	kernels := r.row("kernels")
	checkStats(t, "A kernels", kernels.A, wantStats{4, 70, 65, 91, 95.5, 99.1, 100, 4 * 60000.0 / 280, 5 / 0.28})
	if kernels.B != nil || kernels.Speedup != nil {
		t.Errorf("kernels: B has no kernels, got B %+v speedup %+v", kernels.B, kernels.Speedup)
	}
	// h2d sums the two slab rows: base 8+8 = 16, so p50 = 1.3*16 = 20.8.
	approx(t, "A h2d p50", r.row("h2d").A.P50, 20.8)

	// Segment, B: sorted 200 220 260 300 380: mean 272, p50 260, p90 300+0.6*80 = 348,
	// p95 300+0.8*80 = 364, p99 300+0.96*80 = 376.8, max 380; busy sum 1360 ms:
	// 5*60000/1360 = 220.588 vol/min, 6e6/1.36 s = 4.4118 Mvox/s.
	seg := r.row("segment")
	checkStats(t, "B segment", seg.B, wantStats{5, 272, 260, 348, 364, 376.8, 380, 5 * 60000.0 / 1360, 6 / 1.36})
	// Segment, A (base 62): 86.8 80.6 112.84 118.42 122.884 124; busy sum 62*5.6 = 347.2 ms.
	checkStats(t, "A segment", seg.A, wantStats{4, 86.8, 80.6, 112.84, 118.42, 122.884, 124, 4 * 60000.0 / 347.2, 5 / 0.3472})

	// Speedups, paired on v1..v4 (4 of min(4, 5) volumes match).
	// end_to_end ratios B/A: 3, 260/120, 400/140, 2.5 -> median (2.5 + 400/140)/2.
	// segment: 220/62, 200/74.4, 300/86.8, 380/124 -> sorted 2.688 3.065 3.456 3.548 ->
	// median (380/124 + 300/86.8)/2.
	// read: 40/20, 30/24, 50/28, 60/40 = 2, 1.25, 1.786, 1.5 -> median (1.5 + 50/28)/2.
	for _, c := range []struct {
		stage          stage.Stage
		want, lo, high float64
	}{
		{EndToEnd, (2.5 + 400.0/140) / 2, 260.0 / 120, 3},
		{Service, (2.5 + 400.0/140) / 2, 260.0 / 120, 3},
		{"segment", (380.0/124 + 300/86.8) / 2, 200 / 74.4, 220.0 / 62},
		{"read", (1.5 + 50.0/28) / 2, 1.25, 2},
	} {
		sp := r.row(c.stage).Speedup
		if sp == nil || !sp.Paired || sp.N != 4 {
			t.Fatalf("%s speedup %+v, want paired over 4 volumes", c.stage, sp)
		}
		approx(t, string(c.stage)+" speedup", sp.Value, c.want)
		// With 4 pairs the bootstrap interval is [smallest ratio, largest ratio] (see
		// TestPairedSpeedup for why).
		approx(t, string(c.stage)+" CI low", sp.Low, c.lo)
		approx(t, string(c.stage)+" CI high", sp.High, c.high)
		// 4 pairs < DefaultMinVolumes: an interval that excludes 1, but from too few volumes.
		if !sp.TooFew || sp.MinVolumes != DefaultMinVolumes {
			t.Errorf("%s speedup %+v: want flagged too few volumes (4 < %d)", c.stage, sp, DefaultMinVolumes)
		}
	}

	// Throughput tables.
	if tp := r.ThroughputA; tp.Volumes != 4 || tp.Voxels != 5_000_000 || tp.SpanMS != 330 || tp.SpanFrom != FromTimings {
		t.Errorf("throughput A %+v, want 4 volumes, 5e6 voxels, span 330 from timings", tp)
	}
	if tp := r.ThroughputB; tp.Volumes != 5 || tp.SpanMS != 1810 {
		t.Errorf("throughput B %+v, want 5 volumes, span 1810", tp)
	}

	// Volumes not ok, listed apart.
	var notOK []string
	for _, v := range r.A.notOK() {
		notOK = append(notOK, v.Name+":"+string(v.Status))
	}
	if got := strings.Join(notOK, " "); got != "v5:failed v6:skipped" {
		t.Errorf("A not ok: %s, want v5:failed v6:skipped", got)
	}
	if len(r.B.notOK()) != 0 {
		t.Errorf("B not ok: %v", r.B.notOK())
	}

	// Timeline: A's slowest ok volume is v4 (wall 200), run a-1; its events start at 130.
	tl := r.Timeline
	if tl == nil || tl.Volume != "v4" || tl.RunID != "a-1" {
		t.Fatalf("timeline %+v, want v4 of a-1", tl)
	}
	if got := fmt.Sprint(tl.Stages); got != "[read stats h2d kernels segment d2h write]" {
		t.Errorf("timeline rows %s", got)
	}
	if len(tl.Bars) != 10 {
		t.Errorf("timeline has %d bars, want 10 (v4's timings rows)", len(tl.Bars))
	}
	// h2d of slab 1 (196..212 in the run, 66..82 here) overlaps kernels of slab 0 (66..116).
	var h2d1, k0 TimelineBar
	for _, b := range tl.Bars {
		switch {
		case b.Stage == "h2d" && b.Slab == 1:
			h2d1 = b
		case b.Stage == "kernels" && b.Slab == 0:
			k0 = b
		}
	}
	if h2d1.StartMS != 66 || h2d1.EndMS != 82 || k0.StartMS != 66 || k0.EndMS != 116 {
		t.Errorf("h2d s1 %+v, kernels s0 %+v: want 66..82 and 66..116", h2d1, k0)
	}
}

func TestShardsAsRepeatedPathsOrFiles(t *testing.T) {
	folder := loadSample(t, []string{"testdata/A"}, []string{"testdata/B"}, Options{})
	flags := loadSample(t, []string{"testdata/A/shard-0", "testdata/A/shard-1"}, []string{"testdata/B"}, Options{})
	files := loadSample(t, []string{"testdata/A/shard-1/summary.csv", "testdata/A/shard-0/timings.csv",
		"testdata/A/shard-0/summary.csv", "testdata/A/shard-1/timings.csv", "testdata/A/shard-0"}, // a folder repeating files: read once
		[]string{"testdata/B/timings.csv", "testdata/B/summary.csv"}, Options{})
	var want bytes.Buffer
	if err := folder.WriteCSV(&want); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*Report{"repeated flags": flags, "files": files} {
		var got bytes.Buffer
		if err := r.WriteCSV(&got); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%s: report.csv differs from the folder's:\n%s\nwant\n%s", name, got.String(), want.String())
		}
	}
}

func TestSummaryOnlyBaselineIsUnpaired(t *testing.T) {
	r := loadSample(t, []string{"testdata/A"}, []string{"testdata/C"}, Options{Seed: 1})
	e2e := r.row(EndToEnd)
	// C walls 250 300 450: mean 1000/3, p50 300, p90: h = 1.8 -> 300 + 0.8*150 = 420,
	// p95: h = 1.9 -> 435, p99: h = 1.98 -> 447, max 450. No timings: the span is the sum of
	// wall_ms, 1000 ms: 3*60000/1000 = 180 vol/min, 3e6 voxels / 1 s = 3 Mvox/s.
	checkStats(t, "C end_to_end", e2e.B, wantStats{3, 1000.0 / 3, 300, 420, 435, 447, 450, 180, 3})
	if tp := r.ThroughputB; tp.SpanFrom != FromSummary || tp.SpanMS != 1000 {
		t.Errorf("C throughput %+v, want span 1000 from the summary", tp)
	}
	// No volume names match: median(C)/median(A) = 300/130.
	sp := e2e.Speedup
	if sp == nil || sp.Paired || sp.N != 4 || sp.NB != 3 {
		t.Fatalf("speedup %+v, want unpaired 4 vs 3", sp)
	}
	approx(t, "speedup", sp.Value, 300.0/130)
	// Stage latencies come from summary.csv's columns: segment_ms 170 200 310 -> p50 200;
	// h2d_ms is 0 everywhere, so C has no h2d.
	approx(t, "C segment p50", r.row("segment").B.P50, 200)
	if r.row("h2d").B != nil {
		t.Error("C should have no h2d stage (all h2d_ms are 0)")
	}
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"sum of summary.csv wall_ms", "summary.csv's <stage>_ms columns", "unpaired, 4 vs 3 volumes"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
}

func TestTimingsOnlyAndUnlistedVolumes(t *testing.T) {
	// Without summary.csv, end to end is first start to last end of a volume's rows, and every
	// volume counts as ok (v5's lone read row included: 10 ms).
	b, err := LoadBatch("A", []string{"testdata/A/shard-0/timings.csv", "testdata/A/shard-1/timings.csv"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, v := range b.okVolumes() {
		got[v.Name] = v.EndToEndMS
		if v.EndToEndFrom != FromTimings {
			t.Errorf("%s: end to end from %s", v.Name, v.EndToEndFrom)
		}
	}
	want := map[string]float64{"v1": 100, "v2": 120, "v3": 140, "v4": 200, "v5": 10}
	if len(got) != len(want) {
		t.Fatalf("ok volumes %v, want %v", got, want)
	}
	for name, ms := range want {
		approx(t, name+" end to end", got[name], ms)
	}
	// Voxels inferred from the whole-volume rows: v4 2e6.
	for _, v := range b.Volumes {
		if v.Name == "v4" && v.Voxels != 2_000_000 {
			t.Errorf("v4 voxels %d, want 2000000", v.Voxels)
		}
	}

	// A summary for run a-0 that lists only v1: v2 and v5 are set apart.
	b, err = LoadBatch("A", []string{"testdata/A/shard-0/timings.csv", "testdata/partial_summary.csv"})
	if err != nil {
		t.Fatal(err)
	}
	var apart []string
	for _, v := range b.notOK() {
		if v.Status != StatusNoSummaryRow {
			t.Errorf("%s: status %q", v.Name, v.Status)
		}
		apart = append(apart, v.Name)
	}
	if strings.Join(apart, " ") != "v2 v5" || len(b.okVolumes()) != 1 {
		t.Errorf("set apart %v and %d ok, want v2 v5 and 1 ok", apart, len(b.okVolumes()))
	}
}

func TestGate(t *testing.T) {
	const a, b = "testdata/A", "testdata/B"
	for _, tc := range []struct {
		name      string
		run, base string
		stage     stage.Stage
		pct       float64
		wantCode  int
		slowerPct float64 // checked when the gate ran
	}{
		// (130/350 - 1)*100 = -62.857: A faster, pass.
		{"A faster passes", a, b, EndToEnd, 10, ExitOK, (130.0/350 - 1) * 100},
		// (350/130 - 1)*100 = 169.23 > 10.
		{"B as run is slower", b, a, EndToEnd, 10, ExitGateFailed, (350.0/130 - 1) * 100},
		{"within a wide limit", b, a, EndToEnd, 200, ExitOK, (350.0/130 - 1) * 100},
		// segment p50: B 260 vs A 80.6: (260/80.6 - 1)*100 = 222.58 > 200.
		{"gate on a stage", b, a, "segment", 200, ExitGateFailed, (260/80.6 - 1) * 100},
		// Equal p50s: 0% slower is not more than 0%.
		{"equal passes a zero limit", a, a, EndToEnd, 0, ExitOK, 0},
		// Without queue_ms the service p50s are the walls': the same verdict as end_to_end.
		{"gate on service", b, a, Service, 10, ExitGateFailed, (350.0/130 - 1) * 100},
		{"stage missing in B", a, b, "h2d", 10, ExitBadInput, 0},
		{"unknown stage", a, b, "nope", 10, ExitBadInput, 0},
		{"negative limit", a, b, EndToEnd, -5, ExitBadInput, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A and B pair on 4 volumes: the gate decides only once the limit allows 4.
			r, err := Generate([]string{tc.run}, []string{tc.base}, Options{MinVolumes: 4, Gate: &GateOptions{Stage: tc.stage, MaxSlowerPct: tc.pct}})
			if code := ExitCode(r, err); code != tc.wantCode {
				t.Fatalf("exit code %d (err %v), want %d", code, err, tc.wantCode)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "gate") {
					t.Errorf("error %q does not mention the gate", err)
				}
				return
			}
			approx(t, "slower %", r.Gate.SlowerPct, tc.slowerPct)
			if r.Gate.NotEvaluated || r.Gate.N != 4 {
				t.Errorf("gate %+v: want evaluated over 4 volumes", r.Gate)
			}
			var md bytes.Buffer
			if err := r.WriteMarkdown(&md); err != nil {
				t.Fatal(err)
			}
			word := "passed"
			if tc.wantCode == ExitGateFailed {
				word = "FAILED"
			}
			if want := "**Gate " + word + "**: " + string(tc.stage) + " p50"; !strings.Contains(md.String(), want) {
				t.Errorf("Markdown lacks %q:\n%s", want, md.String())
			}
		})
	}
	// No gate: exit 0 even though B is slower.
	r, err := Generate([]string{b}, []string{a}, Options{})
	if code := ExitCode(r, err); code != ExitOK || r.Gate != nil {
		t.Errorf("without a gate: exit %d, gate %+v", code, r.Gate)
	}
}

func TestBadInput(t *testing.T) {
	const bad = "testdata/bad/"
	for _, tc := range []struct {
		name string
		path string
		want string // the error's text, from the file name on
	}{
		{"float", bad + "bad_float_timings.csv", `bad_float_timings.csv: line 4, column 7 (duration_ms): strconv.ParseFloat: parsing "2x.5": invalid syntax`},
		{"short record", bad + "short_row_timings.csv", `short_row_timings.csv: line 3, column 9 (voxels): record has 8 fields, the header has 9`},
		{"negative duration after a blank line", bad + "negative_duration_timings.csv", `negative_duration_timings.csv: line 4, column 7 (duration_ms): "-3" is not a finite non-negative number`},
		{"fractional slab", bad + "bad_int_timings.csv", `bad_int_timings.csv: line 3, column 4 (slab): not an integer: "1.5"`},
		{"bare quote", bad + "bare_quote_timings.csv", `bare_quote_timings.csv: line 3: byte 32: extraneous or missing " in quoted-field`},
		{"missing column", bad + "missing_column_summary.csv", `missing_column_summary.csv: line 1: missing column(s) wall_ms`},
		// Line 4, not record 3: the first record's error field spans lines 2-3.
		{"status after a multi-line field", bad + "bad_status_summary.csv", `bad_status_summary.csv: line 4, column 3 (status): unknown status "okay" (want ok, skipped, failed, busy, conflict)`},
		{"gocsv error after a multi-line field", bad + "bad_wall_summary.csv", `bad_wall_summary.csv: line 4, column 15 (wall_ms): strconv.ParseFloat: parsing "abc": invalid syntax`},
		{"ok without wall", bad + "empty_wall_summary.csv", `empty_wall_summary.csv: line 2, column 15 (wall_ms): empty; a number of milliseconds is required`},
		{"queue longer than wall", bad + "queue_over_wall_summary.csv", `queue_over_wall_summary.csv: line 3, column 22 (queue_ms): 12.5 ms is more than wall_ms (10 ms), which includes it`},
		{"negative queue", bad + "negative_queue_summary.csv", `negative_queue_summary.csv: line 2, column 22 (queue_ms): "-1" is not a finite non-negative number`},
		{"stage named like a report row", bad + "reserved_stage_timings.csv", `reserved_stage_timings.csv: line 3, column 3 (stage): "service" is the name of a row the report computes, not a stage`},
		{"duplicate", bad + "duplicate_summary.csv", `duplicate_summary.csv: line 4: duplicate volume: volume "v1" of run "r" is already listed at testdata/bad/duplicate_summary.csv line 2`},
		{"empty file", bad + "empty.csv", `empty.csv: line 1: empty file: no header`},
		{"unknown schema", bad + "unknown_kind.csv", `unknown_kind.csv: line 1: neither a timings CSV (has a stage column) nor a summary CSV (has a status column)`},
		{"folder without CSVs", bad + "nocsv", `nocsv: no timings*.csv or summary*.csv in the folder, its subfolders or its runs/`},
		{"missing path", bad + "nope", `nope: no such file or directory`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Generate([]string{tc.path}, []string{"testdata/B"}, Options{})
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInput) || ExitCode(r, err) != ExitBadInput {
				t.Errorf("error %v is not an input error (exit %d)", err, ExitCode(r, err))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error\n  %s\nwant it to contain\n  %s", err, tc.want)
			}
		})
	}
	// A named timeline volume that A lacks.
	_, err := Generate([]string{"testdata/A"}, []string{"testdata/B"}, Options{TimelineVolume: "v9"})
	if !errors.Is(err, ErrInput) {
		t.Errorf("unknown timeline volume: %v", err)
	}
}

func TestNamedTimelineVolume(t *testing.T) {
	r := loadSample(t, []string{"testdata/A"}, []string{"testdata/B"}, Options{TimelineVolume: "v2"})
	if r.Timeline.Volume != "v2" || r.Timeline.RunID != "a-0" {
		t.Errorf("timeline %s of %s, want v2 of a-0", r.Timeline.Volume, r.Timeline.RunID)
	}
	// No timings in A: no timeline, and the HTML says so.
	r = loadSample(t, []string{"testdata/C"}, []string{"testdata/B"}, Options{})
	if r.Timeline != nil {
		t.Errorf("timeline %+v from a summary-only batch", r.Timeline)
	}
	var html bytes.Buffer
	if err := r.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), "None: A has no timings.csv.") {
		t.Error("HTML does not say there is no timeline")
	}
}

func TestGolden(t *testing.T) {
	r := loadSample(t, []string{"testdata/A"}, []string{"testdata/B"},
		Options{Seed: 1, Gate: &GateOptions{Stage: EndToEnd, MaxSlowerPct: 10}})
	for _, out := range []struct {
		name  string
		write func(*bytes.Buffer) error
	}{
		{"report.md", func(b *bytes.Buffer) error { return r.WriteMarkdown(b) }},
		{"report.csv", func(b *bytes.Buffer) error { return r.WriteCSV(b) }},
	} {
		var got bytes.Buffer
		if err := out.write(&got); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", "golden", out.name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if got.String() != string(want) {
			t.Errorf("%s differs from %s (go test -update refreshes it):\n%s", out.name, path, got.String())
		}
	}
}

func TestHTMLIsSelfContained(t *testing.T) {
	r := loadSample(t, []string{"testdata/A"}, []string{"testdata/B"}, Options{MinVolumes: 4, Gate: &GateOptions{MaxSlowerPct: 10}})
	dir := t.TempDir()
	if err := r.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"report.md", "report.csv", "report.html"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	if n := strings.Count(html, "<svg"); n != 3 {
		t.Errorf("%d inline SVGs, want 3 (bars, CDF, timeline)", n)
	}
	// Nothing to fetch: no src/href/url() to another place; the only URLs are XML namespaces.
	fetch := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:|//)|url\(\s*["']?(https?:|//)|<link|<script`)
	if m := fetch.FindString(html); m != "" {
		t.Errorf("HTML references an external resource: %q", m)
	}
	for _, want := range []string{"@font-face", "data:font/ttf;base64,", "Gate passed", "Volume <b>v4</b>", "v5</td><td>failed",
		"s0", "s1", "h2d", "kernels", "fraction of volumes"} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if strings.Contains(html, "<?xml") {
		t.Error("inline SVG kept its XML prolog")
	}
}

func TestCSVErrorIsInputError(t *testing.T) {
	err := error(&CSVError{File: "f.csv", Line: 3, Column: 2, Field: "volume", Err: errors.New("empty")})
	if !errors.Is(err, ErrInput) || err.Error() != "f.csv: line 3, column 2 (volume): empty" {
		t.Errorf("got %q (input error: %v)", err, errors.Is(err, ErrInput))
	}
}

// FuzzReadCSV: any bytes either load or fail with an input error; never panic.
func FuzzReadCSV(f *testing.F) {
	for _, p := range []string{"testdata/A/shard-0/timings.csv", "testdata/B/summary.csv", "testdata/bad/bad_status_summary.csv",
		"testdata/bad/short_row_timings.csv", "testdata/bad/bare_quote_timings.csv"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "fuzz.csv")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := LoadBatch("A", []string{path})
		if err != nil {
			if !errors.Is(err, ErrInput) {
				t.Fatalf("error %v is not an input error", err)
			}
			return
		}
		for _, v := range b.Volumes {
			if v.Status == timing.StatusOK && (math.IsNaN(v.EndToEndMS) || v.EndToEndMS < 0) {
				t.Fatalf("volume %s: end to end %g", v.Name, v.EndToEndMS)
			}
		}
	})
}

// A stage's latency is the union of its spans: the CUDA fp16 engine's kernels of consecutive
// slabs overlap on two streams.
func TestStageLatencyIsUnionOfSpans(t *testing.T) {
	row := func(stage stage.Stage, slab int, start, dur float64) timing.Row {
		return timing.Row{RunID: "r", Volume: "v", Stage: stage, Slab: slab, StartMS: start, DurationMS: dur}
	}
	var b Batch
	err := b.merge([]timing.Row{
		row("kernels", 0, 10, 4), row("kernels", 1, 13, 4), row("kernels", 2, 20, 1), // 4 + 3 + 1
		row("h2d", 0, 0, 2), row("h2d", 1, 2, 2), // touching: 4
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Volumes) != 1 {
		t.Fatalf("%d volumes", len(b.Volumes))
	}
	if got := b.Volumes[0].StageMS; got["kernels"] != 8 || got["h2d"] != 4 {
		t.Errorf("stage latencies %v, want kernels 8, h2d 4", got)
	}
}
