package metrics

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestPACSRequestsAndSeries(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := New(reg)
	for k := range scrape(t, reg) {
		if strings.HasPrefix(k, "voxpipe_pacs_") {
			t.Fatalf("PACS metric exported before any PACS request: %s", k)
		}
	}

	m.PACSRequest("qido", 200, "none", 4*time.Millisecond)
	m.PACSRequest("qido", 200, "none", 30*time.Millisecond)
	m.PACSRequest("wado", 503, "status", 2*time.Second)
	m.PACSRequest("wado", 0, "timeout", 30*time.Second)
	m.PACSRequest("wado", 200, "none", 12*time.Second)
	m.PACSRequest("stow", 401, "status", 8*time.Millisecond)
	m.PACSRequest("stow", 0, "", 2*time.Millisecond)   // no class: no answer, a connection error
	m.PACSRequest("stow", 409, "", 3*time.Millisecond) // no class: an error status
	m.PACSRequest("stow", 200, "", 90*time.Second)     // no class: success; beyond the last bucket
	m.PACSSeries("stored")
	m.PACSSeries("stored")
	m.PACSSeries("busy")

	s := scrape(t, reg)
	want(t, s, `voxpipe_pacs_requests_total{class="none",kind="qido"}`, 2)
	want(t, s, `voxpipe_pacs_requests_total{class="status",kind="wado"}`, 1)
	want(t, s, `voxpipe_pacs_requests_total{class="timeout",kind="wado"}`, 1)
	want(t, s, `voxpipe_pacs_requests_total{class="none",kind="wado"}`, 1)
	want(t, s, `voxpipe_pacs_requests_total{class="status",kind="stow"}`, 2)
	want(t, s, `voxpipe_pacs_requests_total{class="connect",kind="stow"}`, 1)
	want(t, s, `voxpipe_pacs_requests_total{class="none",kind="stow"}`, 1)
	// One observation per attempt, failed ones included, in seconds.
	want(t, s, `voxpipe_pacs_request_duration_seconds_count{kind="qido"}`, 2)
	want(t, s, `voxpipe_pacs_request_duration_seconds_sum{kind="qido"}`, 0.034)
	want(t, s, `voxpipe_pacs_request_duration_seconds_bucket{kind="qido",le="0.005"}`, 1)
	want(t, s, `voxpipe_pacs_request_duration_seconds_bucket{kind="qido",le="0.025"}`, 1)
	want(t, s, `voxpipe_pacs_request_duration_seconds_bucket{kind="qido",le="0.05"}`, 2)
	want(t, s, `voxpipe_pacs_request_duration_seconds_count{kind="wado"}`, 3)
	want(t, s, `voxpipe_pacs_request_duration_seconds_sum{kind="wado"}`, 44)
	want(t, s, `voxpipe_pacs_request_duration_seconds_bucket{kind="wado",le="2.5"}`, 1)
	want(t, s, `voxpipe_pacs_request_duration_seconds_bucket{kind="wado",le="20"}`, 2)
	want(t, s, `voxpipe_pacs_request_duration_seconds_bucket{kind="wado",le="30"}`, 3)
	want(t, s, `voxpipe_pacs_request_duration_seconds_count{kind="stow"}`, 4)
	want(t, s, `voxpipe_pacs_request_duration_seconds_bucket{kind="stow",le="60"}`, 3)
	want(t, s, `voxpipe_pacs_request_duration_seconds_bucket{kind="stow",le="+Inf"}`, 4)
	want(t, s, `voxpipe_pacs_series_total{outcome="stored"}`, 2)
	want(t, s, `voxpipe_pacs_series_total{outcome="busy"}`, 1)
	want(t, s, `voxpipe_pacs_series_total{outcome="failed"}`, 0) // exported before any
	want(t, s, `voxpipe_pacs_series_total{outcome="done"}`, 0)

	// The buckets span 5 ms to 60 s, as documented.
	b := PACSDurationBuckets
	if b[0] != 0.005 || b[len(b)-1] != 60 {
		t.Errorf("PACSDurationBuckets = %v, want 0.005 .. 60", b)
	}
	// No other labels than these: class and kind, kind, outcome.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{
		"voxpipe_pacs_requests_total":           "class,kind",
		"voxpipe_pacs_request_duration_seconds": "kind",
		"voxpipe_pacs_series_total":             "outcome",
	}
	found := 0
	for _, mf := range mfs {
		wantLabels, ok := labels[mf.GetName()]
		if !ok {
			continue
		}
		found++
		for _, mt := range mf.GetMetric() {
			var names []string
			for _, l := range mt.GetLabel() {
				names = append(names, l.GetName())
			}
			if got := strings.Join(names, ","); got != wantLabels {
				t.Errorf("%s: labels %s, want %s", mf.GetName(), got, wantLabels)
			}
		}
	}
	if found != len(labels) {
		t.Errorf("%d PACS metric families, want %d", found, len(labels))
	}
}

// EnablePACS exports every kind and outcome at 0 before any request, once however often it is
// called; the metrics are lint-clean.
func TestPACSEnable(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.EnablePACS()
	m.EnablePACS()
	s := scrape(t, reg)
	for _, k := range PACSKinds {
		want(t, s, `voxpipe_pacs_requests_total{class="none",kind="`+k+`"}`, 0)
		want(t, s, `voxpipe_pacs_request_duration_seconds_count{kind="`+k+`"}`, 0)
	}
	for _, o := range PACSOutcomes {
		want(t, s, `voxpipe_pacs_series_total{outcome="`+o+`"}`, 0)
	}
	m.PACSRequest("qido", 200, "none", time.Millisecond) // registered already: no panic
	want(t, scrape(t, reg), `voxpipe_pacs_requests_total{class="none",kind="qido"}`, 1)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// A nil Metrics (metrics off) takes the calls and does nothing.
func TestPACSNil(t *testing.T) {
	t.Parallel()
	var m *Metrics
	m.EnablePACS()
	m.PACSRequest("qido", 200, "none", time.Second)
	m.PACSSeries("stored")
}

// The first uses may race (the client's Observe runs on the sync's goroutines): one
// registration, every count kept.
func TestPACSConcurrent(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := New(reg)
	const goroutines, each = 8, 50
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				m.PACSRequest("wado", 200, "none", time.Millisecond)
				m.PACSSeries("done")
			}
		})
	}
	wg.Wait()
	s := scrape(t, reg)
	want(t, s, `voxpipe_pacs_requests_total{class="none",kind="wado"}`, goroutines*each)
	want(t, s, `voxpipe_pacs_request_duration_seconds_count{kind="wado"}`, goroutines*each)
	want(t, s, `voxpipe_pacs_series_total{outcome="done"}`, goroutines*each)
}
