package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// PACSDurationBuckets are the upper bounds in seconds of voxpipe_pacs_request_duration_seconds:
// 5 ms (a QIDO search on the same host) to 60 s (a large series retrieved, or an attempt cut
// off by the client's stall timeout).
var PACSDurationBuckets = []float64{
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60,
}

// PACSKinds are the DICOMweb transactions (pacs/dicomweb's Kind): voxpipe_pacs_requests_total
// exports each with class "none" at 0 from the start.
var PACSKinds = []string{"qido", "wado", "stow"}

// PACSOutcomes are the outcomes of a series in a PACS sync or watch, exported at 0 from the
// start: stored (its SEG stored and the series recorded done), failed (released for the next
// pass), busy (another process holds its claim), done (already in the ledger).
var PACSOutcomes = []string{"stored", "failed", "busy", "done"}

// pacsMetrics are the PACS commands' metrics, registered on first use so that run and watch
// export none of them.
type pacsMetrics struct {
	once      sync.Once
	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
	series    *prometheus.CounterVec
}

// EnablePACS registers the PACS metrics now, at 0, rather than at the first PACSRequest or
// PACSSeries: a service calls it at its start so that a scrape before its first poll sees them.
// A nil Metrics does nothing.
func (m *Metrics) EnablePACS() {
	if m != nil {
		m.pacsMetrics()
	}
}

// PACSRequest counts one DICOMweb attempt (every attempt, retries included) and observes its
// duration: kind is qido, wado or stow, class how it ended ("none": success; pacs/dicomweb's
// ErrorClass otherwise). An empty class is taken from status: "none" below 400, "status" from
// 400 on, "connect" for 0 (no answer). status is not a label (one series per code would be too
// many); the class tells a refused request from a broken connection. A nil Metrics does
// nothing, so that callers need no check when metrics are off.
func (m *Metrics) PACSRequest(kind string, status int, class string, d time.Duration) {
	if m == nil {
		return
	}
	if class == "" {
		switch {
		case status == 0:
			class = "connect"
		case status >= 400:
			class = "status"
		default:
			class = "none"
		}
	}
	p := m.pacsMetrics()
	p.requests.WithLabelValues(kind, class).Inc()
	p.durations.WithLabelValues(kind).Observe(max(0, d.Seconds()))
}

// PACSSeries counts a series' outcome in a PACS pass (one of PACSOutcomes). A nil Metrics
// does nothing.
func (m *Metrics) PACSSeries(outcome string) {
	if m == nil {
		return
	}
	m.pacsMetrics().series.WithLabelValues(outcome).Inc()
}

// pacsMetrics returns the PACS metrics, made and registered on the first call.
func (m *Metrics) pacsMetrics() *pacsMetrics {
	p := &m.pacs
	p.once.Do(func() {
		p.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "voxpipe_pacs_requests_total",
			Help: "DICOMweb attempts (retries included) by kind (qido, wado, stow) and by how they ended (class: none for success; status, connect, tls, timeout, stream, malformed, store, local, canceled).",
		}, []string{"kind", "class"})
		p.durations = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "voxpipe_pacs_request_duration_seconds",
			Help:    "Duration of each DICOMweb attempt by kind (qido, wado, stow), failed ones included: for a retrieve, until its last part is on disk.",
			Buckets: PACSDurationBuckets,
		}, []string{"kind"})
		p.series = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "voxpipe_pacs_series_total",
			Help: "Series of PACS searches by outcome: stored (SEG stored, recorded done), failed (left for the next pass), busy (claimed by another process), done (recorded done before).",
		}, []string{"outcome"})
		for _, k := range PACSKinds {
			p.requests.WithLabelValues(k, "none")
			p.durations.WithLabelValues(k)
		}
		for _, o := range PACSOutcomes {
			p.series.WithLabelValues(o)
		}
		for _, c := range []prometheus.Collector{p.requests, p.durations, p.series} {
			m.reg.MustRegister(c)
		}
	})
	return p
}
