package report

import (
	"path/filepath"
	"testing"
	"time"

	"voxpipe/store/records"
	"voxpipe/telemetry/timing"
)

// An output folder's runs merge into its state, the latest outcome per volume; one run's
// folder is that run alone.
func TestOutputFolderMergesRunsKeepingLatest(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	write := func(id string, at time.Time, rows ...timing.Summary) {
		r, err := records.Create(out, id)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for i, s := range rows {
			s.RunID, s.FinishedAt = id, records.Stamp(at.Add(time.Duration(i)*time.Second))
			if s.Status == timing.StatusOK {
				s.WallMS, s.Voxels = 10+float64(i), 1000
				r.Timings.Append(timing.Row{RunID: id, Volume: s.Volume, Stage: "read", Slab: -1, Device: "host", StartMS: 1, DurationMS: 3})
			}
			if err := r.Summary.Append(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("r1", t0,
		timing.Summary{Volume: "v1", Status: timing.StatusOK},
		timing.Summary{Volume: "v2", Status: timing.StatusFailed, Error: "boom"})
	write("r2", t0.Add(time.Hour),
		timing.Summary{Volume: "v1", Status: timing.StatusSkipped},
		timing.Summary{Volume: "v2", Status: timing.StatusOK},
		timing.Summary{Volume: "v3", Status: timing.StatusBusy})

	b, err := LoadBatch("A", []string{out})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range b.Volumes {
		got[v.Name] = v.RunID + " " + string(v.Status)
	}
	want := map[string]string{"v1": "r1 ok", "v2": "r2 ok", "v3": "r2 busy"}
	if len(got) != len(want) {
		t.Fatalf("volumes %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %q, want %q", k, got[k], w)
		}
	}
	if len(b.okVolumes()) != 2 {
		t.Errorf("%d ok volumes, want 2", len(b.okVolumes()))
	}

	one, err := LoadBatch("A", []string{filepath.Join(out, records.RunsDir, "r1")})
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Volumes) != 2 || len(one.Spans) != 1 || one.Spans[0].RunID != "r1" {
		t.Fatalf("one run: %d volumes, spans %+v", len(one.Volumes), one.Spans)
	}
}
