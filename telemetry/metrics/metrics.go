// Package metrics exports a run's progress and timings as Prometheus metrics: Metrics is a
// pipeline.Progress (volumes in flight) and a pipeline.Observer (every timings.csv and
// summary.csv row), and Serve offers them over HTTP (/metrics, /healthz).
//
// Metrics (durations in seconds):
//
//	voxpipe_volumes_total{status}             counter: summary rows by status (ok, skipped, failed, busy, conflict)
//	voxpipe_stage_duration_seconds{stage}     histogram: one observation per timings.csv row (a slab's,
//	                                          a chunk's or a whole volume's, as the row is)
//	voxpipe_volume_turnaround_seconds         histogram: wall_ms of ok volumes (first read, or arrival
//	                                          under watch, to the mask's rename)
//	voxpipe_volume_queue_seconds              histogram: queue_ms of ok volumes (the part of the
//	                                          turnaround spent waiting)
//	voxpipe_voxels_segmented_total            counter: voxels of ok volumes
//	voxpipe_volumes_in_flight                 gauge: volumes whose read has started and that have
//	                                          no outcome yet
//	voxpipe_engine_busy_seconds_total{device} counter: time with a kernel (CUDA: kernels rows) or
//	                                          a CPU engine slab (per-slab segment rows) running;
//	                                          overlapping spans count once, so its rate is the
//	                                          busy fraction
//	voxpipe_engine_busy_fraction{device}      gauge: that busy time over the last BusyWindow
//	                                          (default 60 s; since the process started when it is
//	                                          younger), in [0, 1]
//	voxpipe_volumes_waiting                   gauge: volumes waiting to be read, from the function
//	                                          given to SetQueueDepth (absent until then)
//
// and, once a PACS command reports its first request or series (pacs.go; absent until then):
//
//	voxpipe_pacs_requests_total{kind,class}   counter: DICOMweb attempts (qido, wado, stow) by
//	                                          how they ended (none: success)
//	voxpipe_pacs_request_duration_seconds{kind} histogram: one observation per attempt
//	voxpipe_pacs_series_total{outcome}        counter: series by outcome (stored, failed, busy, done)
package metrics

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voxpipe/internal/spans"
	"voxpipe/jobs"
	"voxpipe/stage"
	"voxpipe/telemetry/timing"
)

// DefaultBusyWindow is the span voxpipe_engine_busy_fraction averages over.
const DefaultBusyWindow = 60 * time.Second

// DurationBuckets are the histograms' upper bounds in seconds: 1 ms (a slab's kernels on a GPU)
// to 20 min (a large volume on the CPU engine).
var DurationBuckets = []float64{
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200,
}

// Metrics collects a run's metrics. Its methods may be called from several goroutines.
type Metrics struct {
	reg prometheus.Registerer

	volumes      *prometheus.CounterVec
	stages       *prometheus.HistogramVec
	turnaround   prometheus.Histogram
	queue        prometheus.Histogram
	voxels       prometheus.Counter
	inFlight     prometheus.Gauge
	busySeconds  *prometheus.CounterVec
	busyFraction *busyCollector

	window  time.Duration
	created time.Time

	mu      sync.Mutex
	started map[string]int         // volumes started and not done, by jobKey
	anchors map[string]time.Time   // per run id: the wall time its start_ms count from (estimated)
	devices map[string]*deviceBusy // busy state per device

	queueOnce  sync.Once
	queueDepth atomic.Pointer[func() float64]

	pacs pacsMetrics // registered on first use (pacs.go)
}

// Option changes a default of New.
type Option func(*Metrics)

// WithBusyWindow sets the span voxpipe_engine_busy_fraction averages over (DefaultBusyWindow).
func WithBusyWindow(d time.Duration) Option {
	return func(m *Metrics) {
		if d > 0 {
			m.window = d
		}
	}
}

// New makes the metrics and registers them with reg. Like promauto, it panics if reg already
// has metrics of these names (a second New on one registry): give each its own registry.
func New(reg prometheus.Registerer, opts ...Option) *Metrics {
	m := &Metrics{
		reg:     reg,
		window:  DefaultBusyWindow,
		started: map[string]int{},
		anchors: map[string]time.Time{},
		devices: map[string]*deviceBusy{},
	}
	for _, o := range opts {
		o(m)
	}
	m.created = time.Now()
	m.volumes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voxpipe_volumes_total",
		Help: "Volumes finished, by status (ok, skipped, failed, busy, conflict): one per summary.csv row.",
	}, []string{"status"})
	for _, s := range timing.Statuses {
		m.volumes.WithLabelValues(string(s)) // every status exported from the start, at 0
	}
	m.stages = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "voxpipe_stage_duration_seconds",
		Help:    "Duration of each timings.csv row by stage (read, stats, segment, write; h2d, kernels, d2h on GPUs): a slab's, a chunk's or a whole volume's, as the row is.",
		Buckets: DurationBuckets,
	}, []string{"stage"})
	m.turnaround = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "voxpipe_volume_turnaround_seconds",
		Help:    "Wall time of ok volumes, from their read (their arrival under watch) to their mask's rename (summary.csv wall_ms).",
		Buckets: DurationBuckets,
	})
	m.queue = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "voxpipe_volume_queue_seconds",
		Help:    "Part of the turnaround of ok volumes spent waiting rather than being worked on (summary.csv queue_ms).",
		Buckets: DurationBuckets,
	})
	m.voxels = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "voxpipe_voxels_segmented_total",
		Help: "Voxels of the volumes segmented ok.",
	})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "voxpipe_volumes_in_flight",
		Help: "Volumes whose read has started and that have no outcome yet.",
	})
	m.busySeconds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voxpipe_engine_busy_seconds_total",
		Help: "Time with a kernel (or a CPU engine slab) running, per device; overlapping kernels count once, so the rate is the busy fraction.",
	}, []string{"device"})
	m.busyFraction = &busyCollector{m: m, desc: prometheus.NewDesc("voxpipe_engine_busy_fraction",
		"Fraction of the last "+m.window.String()+" (or of the time since the process started, when shorter) with a kernel or a CPU engine slab running, per device.",
		[]string{"device"}, nil)}
	for _, c := range []prometheus.Collector{m.volumes, m.stages, m.turnaround, m.queue, m.voxels,
		m.inFlight, m.busySeconds, m.busyFraction} {
		reg.MustRegister(c)
	}
	return m
}

// SetQueueDepth makes voxpipe_volumes_waiting report f(), the volumes waiting to be read (watch:
// its inbox's pending count). The gauge is registered on the first call; later calls replace f.
// f is called at each scrape, from the scraping goroutine.
func (m *Metrics) SetQueueDepth(f func() float64) {
	m.queueDepth.Store(&f)
	m.queueOnce.Do(func() {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "voxpipe_volumes_waiting",
			Help: "Volumes waiting to be read.",
		}, func() float64 {
			if f := m.queueDepth.Load(); f != nil && *f != nil {
				return (*f)()
			}
			return 0
		}))
	})
}

// jobKey tells volumes apart while in flight (watch hands a file out again when it changes).
func jobKey(j jobs.Job) string { return j.Input + "\x00" + j.Name }

// Start implements pipeline.Progress; the batch's size is not a metric.
func (m *Metrics) Start(int) {}

// VolumeStarted implements pipeline.Progress: the volume is in flight.
func (m *Metrics) VolumeStarted(j jobs.Job, _ int) {
	m.mu.Lock()
	m.started[jobKey(j)]++
	m.mu.Unlock()
	m.inFlight.Inc()
}

// PlanesDone implements pipeline.Progress.
func (m *Metrics) PlanesDone(jobs.Job, int) {}

// VolumeDone implements pipeline.Progress: a started volume is no longer in flight. Volumes
// that end before their read starts (skipped, busy, conflict, failed early) never were.
func (m *Metrics) VolumeDone(j jobs.Job, _ timing.Status) {
	k := jobKey(j)
	m.mu.Lock()
	n := m.started[k]
	switch {
	case n > 1:
		m.started[k] = n - 1
	case n == 1:
		delete(m.started, k)
	}
	m.mu.Unlock()
	if n > 0 {
		m.inFlight.Dec()
	}
}

// Close implements pipeline.Progress.
func (m *Metrics) Close() {}

// Summary implements pipeline.Observer: counts the volume by status; an ok one adds its
// turnaround, queue time and voxels.
func (m *Metrics) Summary(s timing.Summary) {
	m.volumes.WithLabelValues(string(s.Status)).Inc()
	if s.Status != timing.StatusOK {
		return
	}
	m.turnaround.Observe(s.WallMS / 1e3)
	m.queue.Observe(s.QueueMS / 1e3)
	m.voxels.Add(float64(s.Voxels))
}

// Row implements pipeline.Observer: observes the row's duration for its stage and adds an
// engine's busy time.
func (m *Metrics) Row(r timing.Row) {
	m.stages.WithLabelValues(string(r.Stage)).Observe(r.DurationMS / 1e3)
	now := time.Now()
	m.mu.Lock()
	anchor := m.anchor(r, now)
	var added float64
	if busyRow(r) {
		added = m.device(r.Device).add(r, anchor, now.Add(-m.window))
	}
	m.mu.Unlock()
	if added > 0 {
		m.busySeconds.WithLabelValues(r.Device).Add(added / 1e3)
	}
}

// anchor returns the wall time the row's run counts start_ms from. Rows carry only times since
// their run started; a row is recorded after its span ended, so the run started at most
// now - (start+duration) ago: the earliest such bound over the run's rows is the estimate.
// Under m.mu.
func (m *Metrics) anchor(r timing.Row, now time.Time) time.Time {
	bound := now.Add(-msDuration(r.StartMS + r.DurationMS))
	if a, ok := m.anchors[r.RunID]; ok && !bound.Before(a) {
		return a
	}
	m.anchors[r.RunID] = bound
	return bound
}

// busyRow reports whether the row is an engine computing: kernels (and any finer kernel group
// an engine reports), or a CPU engine's per-slab segment row. Copies and host stages are not,
// nor the whole-call segment row (slab -1) standing in for engines that report finer stages:
// it spans their copies too.
func busyRow(r timing.Row) bool {
	if r.Device == stage.Host {
		return false
	}
	switch r.Stage {
	case stage.Read, stage.Stats, stage.Write, stage.H2D, stage.D2H:
		return false
	case stage.Segment:
		return r.Slab >= 0
	}
	return true
}

// device returns the busy state of a device, made on first use. Under m.mu.
func (m *Metrics) device(name string) *deviceBusy {
	d := m.devices[name]
	if d == nil {
		d = &deviceBusy{}
		m.devices[name] = d
	}
	return d
}

// deviceBusy is one device's busy time: the end of its latest busy span (for the union of
// overlapping spans) and the busy intervals of the last window, in wall time.
type deviceBusy struct {
	run       string
	end       float64    // latest end of a busy span of run, ms since its start
	intervals []interval // disjoint, in order
}

type interval struct{ from, to time.Time }

// add adds the part of the row's span not yet counted (spans of one device come in order of
// their starts, per run) and returns it in ms; intervals ending before keepFrom are dropped.
func (d *deviceBusy) add(r timing.Row, anchor, keepFrom time.Time) float64 {
	if d.run != r.RunID { // another run: its times count from another start
		d.run, d.end = r.RunID, 0
	}
	added := spans.BusyAdded(&d.end, r.StartMS, r.DurationMS)
	if added <= 0 {
		return 0
	}
	// The added part is the span's tail, [end-added, end).
	iv := interval{anchor.Add(msDuration(d.end - added)), anchor.Add(msDuration(d.end))}
	if n := len(d.intervals); n > 0 && !iv.from.After(d.intervals[n-1].to) {
		last := &d.intervals[n-1]
		if iv.to.After(last.to) {
			last.to = iv.to
		}
	} else {
		d.intervals = append(d.intervals, iv)
	}
	d.prune(keepFrom)
	return added
}

// busyIn returns the busy time within [from, to).
func (d *deviceBusy) busyIn(from, to time.Time) time.Duration {
	var sum time.Duration
	for _, iv := range d.intervals {
		a, b := iv.from, iv.to
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if b.After(a) {
			sum += b.Sub(a)
		}
	}
	return sum
}

func (d *deviceBusy) prune(before time.Time) {
	i := 0
	for i < len(d.intervals) && !d.intervals[i].to.After(before) {
		i++
	}
	d.intervals = append(d.intervals[:0], d.intervals[i:]...)
}

// busyCollector computes voxpipe_engine_busy_fraction at each scrape.
type busyCollector struct {
	m    *Metrics
	desc *prometheus.Desc
}

func (c *busyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *busyCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	now := time.Now()
	span := min(m.window, now.Sub(m.created))
	from := now.Add(-span)
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, d := range m.devices {
		d.prune(from)
		f := 0.0
		if span > 0 {
			f = min(1, max(0, float64(d.busyIn(from, now))/float64(span)))
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, f, name)
	}
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
