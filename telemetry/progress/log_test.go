package progress

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"voxpipe/jobs"
	"voxpipe/telemetry/timing"
)

// The tests run in a synctest bubble: the fake clock makes the rate and the time left exact,
// and Start's ticker fires only as the test lets time pass.

// syncBuffer collects log lines written from the ticker's goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the JSON log lines written so far.
func (b *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

func TestLogLines(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		p := NewLog(slog.New(slog.NewJSONHandler(&buf, nil)), time.Hour)
		p.Start(4)
		defer p.Close()
		a, b := jobs.Job{Index: 0, Name: "a"}, jobs.Job{Index: 1, Name: "b"}
		p.VolumeStarted(a, 100)
		p.PlanesDone(a, 100)
		p.VolumeDone(a, timing.StatusOK)
		p.VolumeStarted(b, 200)
		p.PlanesDone(b, 100) // half of b
		<-time.After(3 * time.Minute)
		p.Line()
		p.Line() // nothing changed: no second line
		lines := buf.lines(t)
		if len(lines) != 1 {
			t.Fatalf("%d lines: %v", len(lines), lines)
		}
		// 1.5 volumes in 3 minutes: 0.5 a minute, 2.5 left: 5 minutes.
		want := map[string]any{"msg": "progress", "done": 1.0, "total": 4.0, "ok": 1.0,
			"in_flight": "b 100/200 planes", "volumes_per_min": "0.50", "eta": "5m0s"}
		for k, v := range want {
			if lines[0][k] != v {
				t.Errorf("%s = %v, want %v (line %v)", k, lines[0][k], v, lines[0])
			}
		}
	})
}

// Start logs a line every interval while something changed, none while nothing did, and
// stops at Close.
func TestLogEveryInterval(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const every = time.Minute
		var buf syncBuffer
		p := NewLog(slog.New(slog.NewJSONHandler(&buf, nil)), every)
		p.Start(2)
		a := jobs.Job{Index: 0, Name: "a"}
		p.VolumeStarted(a, 10)
		count := func(when string, want int) {
			t.Helper()
			synctest.Wait()
			if got := len(buf.lines(t)); got != want {
				t.Fatalf("%s: %d lines, want %d", when, got, want)
			}
		}
		<-time.After(every - time.Second)
		count("before the first interval", 0)
		<-time.After(time.Second)
		count("at the first interval", 1)
		<-time.After(5 * every)
		count("five quiet intervals later", 1)
		p.PlanesDone(a, 5)
		<-time.After(every)
		count("an interval after a change", 2)
		if got := buf.lines(t)[1]["in_flight"]; got != "a 5/10 planes" {
			t.Errorf("in_flight = %v", got)
		}
		p.VolumeDone(a, timing.StatusOK)
		p.Close()
		<-time.After(3 * every)
		count("after Close", 2)
	})
}
