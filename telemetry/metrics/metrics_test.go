package metrics

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"voxpipe/jobs"
	"voxpipe/stage"
	"voxpipe/telemetry/progress"
	"voxpipe/telemetry/timing"
)

// scrape fetches reg's metrics through promhttp's handler, as Prometheus would (without a
// socket: TestServe covers serving them), and returns the samples by their name and labels as
// printed (`voxpipe_volumes_total{status="ok"}`).
func scrape(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: status %d: %s", rec.Code, rec.Body)
	}
	return parseText(t, rec.Body)
}

func parseText(t *testing.T, r io.Reader) map[string]float64 {
	t.Helper()
	samples := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		samples[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return samples
}

// want checks one sample, to a microsecond's worth of rounding.
func want(t *testing.T, samples map[string]float64, name string, value float64) {
	t.Helper()
	got, ok := samples[name]
	if !ok {
		t.Errorf("%s: not exported", name)
		return
	}
	if math.Abs(got-value) > 1e-6 {
		t.Errorf("%s = %v, want %v", name, got, value)
	}
}

func TestVolumesAndHistograms(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := New(reg)
	ok := func(vol string, wallMS, queueMS float64, voxels int64) timing.Summary {
		return timing.Summary{RunID: "r", Volume: vol, Status: timing.StatusOK, WallMS: wallMS, QueueMS: queueMS, Voxels: voxels}
	}
	m.Summary(ok("a", 1500, 500, 1000))
	m.Summary(ok("b", 90_000, 0, 24))
	m.Summary(timing.Summary{Volume: "c", Status: timing.StatusSkipped, WallMS: 7, Voxels: 5})
	m.Summary(timing.Summary{Volume: "d", Status: timing.StatusFailed, WallMS: 9})
	m.Summary(timing.Summary{Volume: "e", Status: timing.StatusFailed})
	m.Row(timing.Row{RunID: "r", Stage: "read", Slab: -1, Device: "host", StartMS: 0, DurationMS: 20})
	m.Row(timing.Row{RunID: "r", Stage: "read", Slab: -1, Device: "host", StartMS: 5, DurationMS: 2})
	m.Row(timing.Row{RunID: "r", Stage: "write", Slab: 0, Device: "host", StartMS: 30, DurationMS: 400_000})

	s := scrape(t, reg)
	want(t, s, `voxpipe_volumes_total{status="ok"}`, 2)
	want(t, s, `voxpipe_volumes_total{status="skipped"}`, 1)
	want(t, s, `voxpipe_volumes_total{status="failed"}`, 2)
	want(t, s, `voxpipe_volumes_total{status="busy"}`, 0) // exported before any
	want(t, s, `voxpipe_volumes_total{status="conflict"}`, 0)
	// Turnaround and queue of the ok volumes only.
	want(t, s, `voxpipe_volume_turnaround_seconds_count`, 2)
	want(t, s, `voxpipe_volume_turnaround_seconds_sum`, 91.5)
	want(t, s, `voxpipe_volume_turnaround_seconds_bucket{le="2.5"}`, 1)
	want(t, s, `voxpipe_volume_turnaround_seconds_bucket{le="120"}`, 2)
	want(t, s, `voxpipe_volume_queue_seconds_count`, 2)
	want(t, s, `voxpipe_volume_queue_seconds_sum`, 0.5)
	want(t, s, `voxpipe_voxels_segmented_total`, 1024)
	// Stage histograms: one observation per row, in seconds.
	want(t, s, `voxpipe_stage_duration_seconds_count{stage="read"}`, 2)
	want(t, s, `voxpipe_stage_duration_seconds_sum{stage="read"}`, 0.022)
	want(t, s, `voxpipe_stage_duration_seconds_bucket{stage="read",le="0.0025"}`, 1)
	want(t, s, `voxpipe_stage_duration_seconds_bucket{stage="read",le="0.025"}`, 2)
	want(t, s, `voxpipe_stage_duration_seconds_count{stage="write"}`, 1)
	want(t, s, `voxpipe_stage_duration_seconds_sum{stage="write"}`, 400)
	want(t, s, `voxpipe_stage_duration_seconds_bucket{stage="write",le="300"}`, 0)
	want(t, s, `voxpipe_stage_duration_seconds_bucket{stage="write",le="600"}`, 1)
	// Host rows are no engine's busy time.
	for k := range s {
		if strings.HasPrefix(k, "voxpipe_engine_busy") {
			t.Errorf("busy metric without any engine row: %s", k)
		}
	}
}

func TestLint(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.SetQueueDepth(func() float64 { return 3 })
	m.Summary(timing.Summary{Status: timing.StatusOK, WallMS: 1})
	m.Row(timing.Row{Stage: "kernels", Slab: 0, Device: "cuda:0", DurationMS: 1})
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 9 {
		t.Errorf("%d metric families, want 9", len(mfs))
	}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "voxpipe_") || mf.GetHelp() == "" {
			t.Errorf("%s: want the voxpipe_ prefix and a HELP text (%q)", mf.GetName(), mf.GetHelp())
		}
	}
}

func TestBusyUnionPerDevice(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := New(reg)
	gpu := func(run string, stage stage.Stage, slab int, start, dur float64) timing.Row {
		return timing.Row{RunID: run, Stage: stage, Slab: slab, Device: "cuda:0", StartMS: start, DurationMS: dur}
	}
	// fp16: the kernels of consecutive slabs overlap on two streams; copies are not busy time,
	// nor the whole-call segment row.
	m.Row(gpu("r1", "h2d", 0, 0, 4))
	m.Row(gpu("r1", "kernels", 0, 4, 10))  // 4..14
	m.Row(gpu("r1", "d2h", 0, 14, 3))      //
	m.Row(gpu("r1", "kernels", 1, 9, 11))  // 9..20: 6 more
	m.Row(gpu("r1", "kernels", 2, 12, 3))  // 12..15: inside, nothing more
	m.Row(gpu("r1", "kernels", 3, 30, 10)) // 30..40: 10 more
	m.Row(gpu("r1", "segment", -1, 0, 45))
	// The CPU engine: per-slab segment rows.
	cpu := func(start, dur float64) timing.Row {
		return timing.Row{RunID: "r1", Stage: "segment", Slab: 0, Device: "cpu", StartMS: start, DurationMS: dur}
	}
	m.Row(cpu(0, 10))
	m.Row(cpu(10, 15))
	s := scrape(t, reg)
	want(t, s, `voxpipe_engine_busy_seconds_total{device="cuda:0"}`, 0.026)
	want(t, s, `voxpipe_engine_busy_seconds_total{device="cpu"}`, 0.025)
	want(t, s, `voxpipe_stage_duration_seconds_count{stage="kernels"}`, 4)
	want(t, s, `voxpipe_stage_duration_seconds_sum{stage="kernels"}`, 0.034) // the rows as they are
	want(t, s, `voxpipe_stage_duration_seconds_count{stage="segment"}`, 3)

	// Another run's times start again from 0: its spans count in full.
	m.Row(gpu("r2", "kernels", 0, 2, 5))
	s = scrape(t, reg)
	want(t, s, `voxpipe_engine_busy_seconds_total{device="cuda:0"}`, 0.031)
}

// The busy fraction averages over the window, on the clock: the test runs in a synctest
// bubble, whose fake clock moves only as the test lets time pass.
func TestBusyFractionWindow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		set := func(d time.Duration) { <-time.After(time.Until(t0.Add(d))) }
		reg := prometheus.NewRegistry()
		m := New(reg, WithBusyWindow(time.Minute))

		// A run that started at t0: its kernels ran 10 s..40 s (two overlapping spans),
		// reported as they ended.
		set(30 * time.Second)
		m.Row(timing.Row{RunID: "r", Stage: "read", Slab: -1, Device: "host", StartMS: 0, DurationMS: 30_000})
		set(40 * time.Second)
		m.Row(timing.Row{RunID: "r", Stage: "kernels", Slab: 0, Device: "cuda:0", StartMS: 10_000, DurationMS: 25_000})
		m.Row(timing.Row{RunID: "r", Stage: "kernels", Slab: 1, Device: "cuda:0", StartMS: 20_000, DurationMS: 20_000})
		const name = `voxpipe_engine_busy_fraction{device="cuda:0"}`
		for _, c := range []struct {
			at   time.Duration
			want float64
		}{
			{40 * time.Second, 30.0 / 40}, // the process is 40 s old: 30 s busy of 40
			{60 * time.Second, 30.0 / 60}, // window 0..60 s
			{85 * time.Second, 15.0 / 60}, // window 25..85 s: 25..40 s busy
			{200 * time.Second, 0},        // all of it out of the window
		} {
			set(c.at)
			want(t, scrape(t, reg), name, c.want)
		}
		m.mu.Lock()
		if n := len(m.devices["cuda:0"].intervals); n != 0 {
			t.Errorf("%d intervals kept out of the window", n)
		}
		m.mu.Unlock()
		want(t, scrape(t, reg), `voxpipe_engine_busy_seconds_total{device="cuda:0"}`, 30)
	})
}

func TestInFlight(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := New(reg)
	p := progress.Multi(m) // as run and watch wire it
	a := jobs.Job{Name: "a", Input: "/in/a.nii"}
	b := jobs.Job{Name: "b", Input: "/in/b.nii"}
	c := jobs.Job{Name: "c", Input: "/in/c.nii"}
	p.Start(3)
	p.VolumeStarted(a, 10)
	p.VolumeStarted(b, 10)
	p.PlanesDone(a, 10)
	want(t, scrape(t, reg), "voxpipe_volumes_in_flight", 2)
	p.VolumeDone(c, timing.StatusSkipped) // never started: not in flight before either
	want(t, scrape(t, reg), "voxpipe_volumes_in_flight", 2)
	p.VolumeDone(a, timing.StatusOK)
	want(t, scrape(t, reg), "voxpipe_volumes_in_flight", 1)
	p.VolumeDone(a, timing.StatusOK) // a second outcome of a counts nothing
	want(t, scrape(t, reg), "voxpipe_volumes_in_flight", 1)
	p.VolumeStarted(a, 10) // watch hands a changed file out again
	p.VolumeDone(b, timing.StatusFailed)
	p.VolumeDone(a, timing.StatusOK)
	p.Close()
	want(t, scrape(t, reg), "voxpipe_volumes_in_flight", 0)
}

func TestQueueDepth(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := New(reg)
	if _, ok := scrape(t, reg)["voxpipe_volumes_waiting"]; ok {
		t.Error("voxpipe_volumes_waiting exported before SetQueueDepth")
	}
	pending := 4
	m.SetQueueDepth(func() float64 { return float64(pending) })
	want(t, scrape(t, reg), "voxpipe_volumes_waiting", 4)
	pending = 1
	want(t, scrape(t, reg), "voxpipe_volumes_waiting", 1)
	m.SetQueueDepth(func() float64 { return 7 }) // replaced, not registered twice
	want(t, scrape(t, reg), "voxpipe_volumes_waiting", 7)
}

// logAddr returns the address of Serve's "metrics listening" line in a JSON log.
func logAddr(t *testing.T, log *bytes.Buffer) string {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var rec struct{ Msg, Addr string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec.Msg == "metrics listening" {
			return rec.Addr
		}
	}
	t.Fatalf("no listening line in the log: %s", log)
	return ""
}

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func TestServe(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Summary(timing.Summary{Status: timing.StatusOK, WallMS: 250, Voxels: 8})
	var logBuf bytes.Buffer
	stop, err := Serve(context.Background(), "127.0.0.1:0", reg, slog.New(slog.NewJSONHandler(&logBuf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	addr := logAddr(t, &logBuf)
	code, body, err := get("http://" + addr + "/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/metrics: %d, %v", code, err)
	}
	s := parseText(t, strings.NewReader(body))
	want(t, s, `voxpipe_volumes_total{status="ok"}`, 1)
	want(t, s, `voxpipe_volume_turnaround_seconds_sum`, 0.25)
	if code, body, err := get("http://" + addr + "/healthz"); err != nil || code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: %d %q, %v", code, body, err)
	}
	if code, _, err := get("http://" + addr + "/nothing"); err != nil || code != http.StatusNotFound {
		t.Errorf("/nothing: %d, %v", code, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Errorf("second stop: %v", err)
	}
	if _, _, err := get("http://" + addr + "/healthz"); err == nil {
		t.Error("still answering after stop")
	}
	// The port is free again.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port not released: %v", err)
	}
	ln.Close()
}

func TestServeStopsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	var logBuf bytes.Buffer
	stop, err := Serve(ctx, "127.0.0.1:0", prometheus.NewRegistry(), slog.New(slog.NewJSONHandler(&logBuf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	addr := logAddr(t, &logBuf)
	if code, _, err := get("http://" + addr + "/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("/healthz: %d, %v", code, err)
	}
	cancel()
	// The server stops on its own goroutine: ask until it no longer answers. (Real sockets: a
	// synctest bubble cannot wait for them.)
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	limit := time.After(5 * time.Second)
	for {
		if _, _, err := get("http://" + addr + "/healthz"); err != nil {
			break
		}
		select {
		case <-poll.C:
		case <-limit:
			t.Fatal("still answering 5 s after the context was cancelled")
		}
	}
}

func TestServeBadAddress(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, c := range []struct {
		addr  string
		cause error
	}{
		{taken.Addr().String(), syscall.EADDRINUSE},
		{"127.0.0.1:99999", nil}, // no such port
		{"not an address", nil},
	} {
		stop, err := Serve(context.Background(), c.addr, prometheus.NewRegistry(), nil)
		if err == nil {
			stop()
			t.Errorf("%s: no error", c.addr)
			continue
		}
		if stop != nil {
			t.Errorf("%s: a stop function with the error", c.addr)
		}
		if !errors.Is(err, ErrListen) || !strings.Contains(err.Error(), c.addr) {
			t.Errorf("%s: %v, want ErrListen naming the address", c.addr, err)
		}
		if c.cause != nil && !errors.Is(err, c.cause) {
			t.Errorf("%s: %v, want it to wrap %v", c.addr, err, c.cause)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := New(reg)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j := jobs.Job{Name: strconv.Itoa(w), Input: strconv.Itoa(w)}
			for i := range 100 {
				m.VolumeStarted(j, 1)
				m.Row(timing.Row{RunID: "r", Stage: "kernels", Slab: i, Device: "cuda:" + strconv.Itoa(w), StartMS: float64(i), DurationMS: 1})
				m.VolumeDone(j, timing.StatusOK)
				m.Summary(timing.Summary{Status: timing.StatusOK, Voxels: 1})
			}
		}()
	}
	wg.Add(1)
	go func() { // scrapes race with the updates
		defer wg.Done()
		for range 20 {
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	s := scrape(t, reg)
	want(t, s, `voxpipe_volumes_total{status="ok"}`, 800)
	want(t, s, `voxpipe_voxels_segmented_total`, 800)
	want(t, s, "voxpipe_volumes_in_flight", 0)
	want(t, s, `voxpipe_engine_busy_seconds_total{device="cuda:3"}`, 0.1)
}
