package progress

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"voxpipe/jobs"
	"voxpipe/telemetry/timing"
)

func TestLogLines(t *testing.T) {
	var buf bytes.Buffer
	p := NewLog(slog.New(slog.NewJSONHandler(&buf, nil)), time.Hour)
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	p.Start(4)
	defer p.Close()
	a, b := jobs.Job{Index: 0, Name: "a"}, jobs.Job{Index: 1, Name: "b"}
	p.VolumeStarted(a, 100)
	p.PlanesDone(a, 100)
	p.VolumeDone(a, timing.StatusOK)
	p.VolumeStarted(b, 200)
	p.PlanesDone(b, 100) // half of b
	now = now.Add(3 * time.Minute)
	p.Line()
	p.Line() // nothing changed: no second line
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d lines: %q", len(lines), buf.String())
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	// 1.5 volumes in 3 minutes: 0.5 a minute, 2.5 left: 5 minutes.
	want := map[string]any{"msg": "progress", "done": 1.0, "total": 4.0, "ok": 1.0,
		"in_flight": "b 100/200 planes", "volumes_per_min": "0.50", "eta": "5m0s"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (line %s)", k, got[k], v, lines[0])
		}
	}
}
