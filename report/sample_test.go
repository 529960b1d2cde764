package report

import (
	"fmt"
	"strings"
	"testing"

	"voxpipe/stage"
)

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
	t.Parallel()
	r := loadSample(t, []string{"testdata/A"}, []string{"testdata/B"}, Options{Seed: 1})
	checkSampleLatencies(t, r)
	checkSampleSpeedups(t, r)
	checkSampleTables(t, r)
	checkSampleTimeline(t, r)
}

// checkSampleLatencies checks A's and B's rows: the stages, end to end, service, kernels, h2d
// and segment.
func checkSampleLatencies(t *testing.T, r *Report) {
	t.Helper()
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
}

// checkSampleSpeedups checks the speedups, paired on v1..v4 (4 of min(4, 5) volumes match).
func checkSampleSpeedups(t *testing.T, r *Report) {
	t.Helper()
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
}

// checkSampleTables checks the throughput tables and the volumes listed apart.
func checkSampleTables(t *testing.T, r *Report) {
	t.Helper()
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
}

// checkSampleTimeline checks the timeline of A's slowest volume.
func checkSampleTimeline(t *testing.T, r *Report) {
	t.Helper()
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
