package report

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"voxpipe/stage"
)

// Q (with queue_ms) against P (without): service leaves the queue out, turnaround keeps it.
func TestServiceLatencyExcludesQueue(t *testing.T) {
	t.Parallel()
	r := loadSample(t, []string{"testdata/Q"}, []string{"testdata/P"}, Options{Seed: 1})
	if got := strings.Join(r.stageNames(), " "); got != "read segment write service end_to_end" {
		t.Fatalf("rows %s, want the stages, then service and end_to_end", got)
	}

	// Q service: sorted 5500 5600 5600 5700: mean 5600, p50 5600, p90: h = 2.7 -> 5670,
	// p95: h = 2.85 -> 5685, p99: h = 2.97 -> 5697, max 5700. Busy time 22400 ms:
	// 4*60000/22400 vol/min, 4e6 voxels / 22.4 s.
	svc, e2e := r.row(Service), r.row(EndToEnd)
	checkStats(t, "Q service", svc.A, wantStats{4, 5600, 5600, 5670, 5685, 5697, 5700, 4 * 60000.0 / 22400, 4 / 22.4})
	// Q turnaround: sorted 5600 11300 15700 16000: mean 12150, p50 13500, p90: h = 2.7 ->
	// 15700 + 0.7*300 = 15910, p95 15955, p99 15991, max 16000. No timings.csv: the span is the
	// sum of wall_ms of the listed volumes, 48600 + 700 (fix5, failed) = 49300 ms.
	checkStats(t, "Q end_to_end", e2e.A, wantStats{4, 12150, 13500, 15910, 15955, 15991, 16000, 4 * 60000.0 / 49300, 4 / 49.3})
	if svc.A.P50 >= e2e.A.P50 || svc.A.Max >= e2e.A.Max {
		t.Errorf("service p50 %g, max %g: want below turnaround's %g, %g", svc.A.P50, svc.A.Max, e2e.A.P50, e2e.A.Max)
	}

	// P has no queue_ms: service = turnaround, sorted 5800 6000 6100 6200: mean 6025, p50 6050,
	// p90 6170, p95 6185, p99 6197, max 6200; busy time and span are both 24100 ms.
	pStats := wantStats{4, 6025, 6050, 6170, 6185, 6197, 6200, 4 * 60000.0 / 24100, 4 / 24.1}
	checkStats(t, "P service", svc.B, pStats)
	checkStats(t, "P end_to_end", e2e.B, pStats)

	// Per volume: fix2 waited 5600 of its 11300 ms; failed fix5 has an empty queue_ms.
	for _, v := range r.A.Volumes {
		switch v.Name {
		case "fix2":
			if !v.QueueKnown || v.QueueMS != 5600 || v.ServiceMS() != 5700 {
				t.Errorf("fix2: queue %g (known %v), service %g; want 5600, 5700", v.QueueMS, v.QueueKnown, v.ServiceMS())
			}
		case "fix5":
			if v.QueueKnown {
				t.Errorf("fix5: queue_ms is empty, but taken as known (%g)", v.QueueMS)
			}
		}
	}
	for _, v := range r.B.Volumes {
		if v.QueueKnown || v.ServiceMS() != v.EndToEndMS {
			t.Errorf("P %s: no queue_ms column, yet queue %g (known %v)", v.Name, v.QueueMS, v.QueueKnown)
		}
	}

	// Paired speedups. Service ratios B/A: 6000/5600, 6200/5700, 5800/5500, 6100/5600, sorted
	// 1.0545 1.0714 1.0877 1.0893: median (6000/5600 + 6200/5700)/2, A faster. Turnaround
	// ratios: 6000/5600, 6200/11300, 5800/16000, 6100/15700, sorted 0.3625 0.3885 0.5487
	// 1.0714: median (6100/15700 + 6200/11300)/2, A "slower" only for its queue.
	approx(t, "service speedup", svc.Speedup.Value, (6000.0/5600+6200.0/5700)/2)
	approx(t, "turnaround speedup", e2e.Speedup.Value, (6100.0/15700+6200.0/11300)/2)

	checkQServiceOutputs(t, r)
	checkQServiceGate(t)
}

// checkQServiceOutputs checks that Q's Markdown, CSV and HTML tell service from turnaround.
func checkQServiceOutputs(t *testing.T, r *Report) {
	t.Helper()
	var md, csvOut, html bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteCSV(&csvOut); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| **service** (wall_ms − queue_ms: queueing excluded) | A | 4 | 5600.0 | 5600.0 | 5670.0 |",
		"| **end_to_end** (turnaround / sojourn: queueing included) | A | 4 | 12150.0 | 13500.0 | 15910.0 |",
		"- A: stage latencies of 4 volume(s) from summary.csv's <stage>_ms columns (no timings.csv); end_to_end of 4 from summary.csv wall_ms; service of 4 from wall_ms − queue_ms\n",
		"service equal to end_to_end (no queue_ms)\n",
		"end_to_end is the turnaround (sojourn) time",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md.String())
		}
	}
	for _, want := range []string{"\nservice,4,5600.000,5600.000,5670.000,", "\nend_to_end,4,12150.000,13500.000,15910.000,"} {
		if !strings.Contains(csvOut.String(), want) {
			t.Errorf("CSV lacks %q:\n%s", want, csvOut.String())
		}
	}
	// The CDF draws A's service apart from its turnaround; B never waited, so it has no
	// service curve of its own.
	for _, want := range []string{"wall_ms − queue_ms: queueing excluded", "turnaround / sojourn: queueing included", "A service", "A turnaround"} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if strings.Contains(html.String(), "B service") {
		t.Error("HTML draws a service curve for B, which has no queue_ms")
	}
}

// checkQServiceGate checks the gate on Q against P: on service it sees A faster; on
// turnaround, 123% slower.
func checkQServiceGate(t *testing.T) {
	t.Helper()
	// The gate on service sees A faster; on turnaround, 123% slower.
	for _, c := range []struct {
		stage     stage.Stage
		failed    bool
		slowerPct float64
	}{{Service, false, (5600.0/6050 - 1) * 100}, {EndToEnd, true, (13500.0/6050 - 1) * 100}} {
		r, err := Generate([]string{"testdata/Q"}, []string{"testdata/P"}, Options{MinVolumes: 4, Gate: &GateOptions{Stage: c.stage, MaxSlowerPct: 10}})
		if err != nil {
			t.Fatal(err)
		}
		if r.Gate.Failed != c.failed || r.Gate.NotEvaluated {
			t.Errorf("gate on %s: %s", c.stage, r.Gate.Message())
		}
		approx(t, string(c.stage)+" gate slower %", r.Gate.SlowerPct, c.slowerPct)
	}
}

// A batch mixing files with and without queue_ms says which volumes' service is their wall.
func TestServiceSourcesOfAMixedBatch(t *testing.T) {
	t.Parallel()
	b, err := LoadBatch("A", []string{"testdata/Q", "testdata/C"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.latencySources(), "service of 4 from wall_ms − queue_ms, of 3 equal to end_to_end (no queue_ms)"; !strings.HasSuffix(got, want) {
		t.Errorf("latency sources %q, want it to end with %q", got, want)
	}
}

// writeWalls writes a summary.csv (the schema before queue_ms) of ok volumes prefix0,
// prefix1... with the given walls, and returns its path.
func writeWalls(t *testing.T, run, prefix string, walls ...float64) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("run_id,volume,status,error,dims,voxels,engine,read_ms,stats_ms,segment_ms,h2d_ms,kernels_ms,d2h_ms,write_ms,wall_ms,mvox_per_s,output\n")
	for i, w := range walls {
		fmt.Fprintf(&b, "%s,%s%d,ok,,10x10x10,1000,cpu,%g,0,%g,0,0,0,0,%g,0,out/%s%d_mask.nii.gz\n", run, prefix, i, w/4, w*3/4, w, prefix, i)
	}
	path := filepath.Join(t.TempDir(), "summary.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// series is first, first+step, ... (n values).
func series(n int, first, step float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = first + float64(i)*step
	}
	return out
}

// tooFewCase is a batch pair for TestTooFewVolumes.
type tooFewCase struct {
	name       string
	a, b       []float64
	bPrefix    string // "f" pairs with A's volumes, anything else does not
	minVolumes int
	tooFew     bool
	n          int // volumes the comparison rests on
	slowerPct  float64
}

// tooFewCases are A ~20% slower than B, on either side of the volume limit.
var tooFewCases = []tooFewCase{
	// The case: 3 volumes each. p50 120 vs 100.
	{"3 vs 3", []float64{120, 121, 119}, []float64{100, 101, 99}, "f", 0, true, 3, 20},
	{"3 vs 3 with --min-volumes 3", []float64{120, 121, 119}, []float64{100, 101, 99}, "f", 3, false, 3, 20},
	// p50 124.5 vs 104.5.
	{"10 vs 10", series(10, 120, 1), series(10, 100, 1), "f", 0, false, 10, (124.5/104.5 - 1) * 100},
	// 9 pairs: one short on A's side. p50 124 vs 104.5.
	{"9 vs 10", series(9, 120, 1), series(10, 100, 1), "f", 0, true, 9, (124/104.5 - 1) * 100},
	// No names match: unpaired, 10 vs 3, judged by the smaller side. p50 124.5 vs 100.
	{"10 vs 3 unpaired", series(10, 120, 1), []float64{100, 101, 99}, "g", 0, true, 3, 24.5},
}

// Speedups from fewer than MinVolumes volumes on a side are flagged, and the gate on them is
// not evaluated; --min-volumes lowers the limit. A is ~20% slower than B in every case, so an
// evaluated gate (limit 10%) fails.
func TestTooFewVolumes(t *testing.T) {
	t.Parallel()
	for _, tc := range tooFewCases {
		t.Run(tc.name, func(t *testing.T) {
			run, base := writeWalls(t, "a", "f", tc.a...), writeWalls(t, "b", tc.bPrefix, tc.b...)
			r, err := Generate([]string{run}, []string{base}, Options{Seed: 1, MinVolumes: tc.minVolumes,
				Gate: &GateOptions{Stage: EndToEnd, MaxSlowerPct: 10}})
			if err != nil {
				t.Fatal(err)
			}
			limit := DefaultMinVolumes
			if tc.minVolumes > 0 {
				limit = tc.minVolumes
			}
			sp := r.row(EndToEnd).Speedup
			if sp == nil || sp.Volumes() != tc.n || sp.TooFew != tc.tooFew || sp.MinVolumes != limit {
				t.Fatalf("speedup %+v: want %d volumes, too few %v (limit %d)", sp, tc.n, tc.tooFew, limit)
			}
			// Every row with a speedup is judged alike (read and segment too).
			for _, row := range r.Rows {
				if row.Speedup != nil && row.Speedup.TooFew != tc.tooFew {
					t.Errorf("%s: too few %v, want %v", row.Stage, row.Speedup.TooFew, tc.tooFew)
				}
			}

			g := r.Gate
			approx(t, "slower %", g.SlowerPct, tc.slowerPct)
			if g.N != tc.n || g.MinVolumes != limit || g.NotEvaluated != tc.tooFew || g.Failed == tc.tooFew {
				t.Fatalf("gate %+v: want n %d, not evaluated %v, failed %v", g, tc.n, tc.tooFew, !tc.tooFew)
			}
			wantCode, verdict := ExitGateFailed, "FAILED"
			if tc.tooFew {
				wantCode, verdict = ExitOK, "not evaluated"
				want := fmt.Sprintf("gate not evaluated: too few volumes (n=%d < %d): end_to_end p50 A ", tc.n, limit)
				if !strings.HasPrefix(g.Message(), want) {
					t.Errorf("gate message %q, want it to start with %q", g.Message(), want)
				}
			}
			if code := ExitCode(r, nil); code != wantCode {
				t.Errorf("exit code %d, want %d", code, wantCode)
			}

			checkTooFewOutputs(t, r, tc, limit, verdict)
		})
	}
}

// checkTooFewOutputs checks that the Markdown, CSV and HTML flag the speedup (or not) and
// state the gate's verdict.
func checkTooFewOutputs(t *testing.T, r *Report, tc tooFewCase, limit int, verdict string) {
	t.Helper()
	var md, csvOut, html bytes.Buffer
	for _, w := range []func() error{
		func() error { return r.WriteMarkdown(&md) },
		func() error { return r.WriteCSV(&csvOut) },
		func() error { return r.WriteHTML(&html) },
	} {
		if err := w(); err != nil {
			t.Fatal(err)
		}
	}
	flag := fmt.Sprintf("): too few volumes (< %d) |", limit)
	mdRow := mdLine(t, md.String(), "| **end_to_end** ")
	if strings.HasSuffix(mdRow, flag) != tc.tooFew {
		t.Errorf("Markdown end_to_end row %q: flagged %v, want %v", mdRow, !tc.tooFew, tc.tooFew)
	}
	if got := strings.Contains(md.String(), "Speedups marked *too few volumes*"); got != tc.tooFew {
		t.Errorf("Markdown note on too few volumes: %v, want %v", got, tc.tooFew)
	}
	if want := "**Gate " + verdict + "**: "; !strings.Contains(md.String(), want) {
		t.Errorf("Markdown lacks %q", want)
	}
	csvRow := mdLine(t, csvOut.String(), "end_to_end,")
	if want := fmt.Sprintf(",%v", tc.tooFew); !strings.HasSuffix(csvRow, want) {
		t.Errorf("CSV row %q: want speedup_too_few_volumes %s", csvRow, want[1:])
	}
	if got := strings.Contains(html.String(), `class="few"`); got != tc.tooFew {
		t.Errorf("HTML marks a speedup too few: %v, want %v", got, tc.tooFew)
	}
	if want := "<b>Gate " + verdict + "</b>"; !strings.Contains(html.String(), want) {
		t.Errorf("HTML lacks %q", want)
	}
}

// The symptom: 3 volumes a side give an interval that excludes 1 although the
// difference could be noise; the report shows it only with the flag.
func TestTooFewVolumesIntervalLooksSignificant(t *testing.T) {
	t.Parallel()
	r, err := Generate([]string{writeWalls(t, "a", "f", 120, 121, 119)}, []string{writeWalls(t, "b", "f", 100, 101, 99)}, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	sp := r.row(EndToEnd).Speedup
	// Ratios 100/120, 101/121, 99/119: all below 1, so is the whole interval.
	if !(sp.High < 1) || !sp.TooFew {
		t.Errorf("speedup %+v: want an interval below 1, flagged too few volumes", sp)
	}
	if got, want := speedupText(sp), "(paired, 3 volumes): too few volumes (< 10)"; !strings.HasSuffix(got, want) {
		t.Errorf("speedup text %q, want it to end with %q", got, want)
	}
}

func TestMinVolumesMustBePositive(t *testing.T) {
	t.Parallel()
	_, err := Generate([]string{"testdata/A"}, []string{"testdata/B"}, Options{MinVolumes: -1})
	if !errors.Is(err, ErrInput) {
		t.Errorf("MinVolumes -1: error %v, want an input error", err)
	}
}

// mdLine returns the line of text that starts with prefix.
func mdLine(t *testing.T, text, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("no line starts with %q in:\n%s", prefix, text)
	return ""
}
