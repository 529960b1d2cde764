package report

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"voxpipe/stage"
	"voxpipe/telemetry/timing"
)

func TestShardsAsRepeatedPathsOrFiles(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

func TestCSVErrorIsInputError(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
