package timing

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"voxpipe/stage"
)

func iv(start, dur float64) Interval[float64] { return Interval[float64]{start, dur} }

// Copies are hidden by the union of the kernel spans: where kernels of two streams overlap, the
// copy time under both counts once.
func TestHiddenCopy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name            string
		kernels, copies []Interval[float64]
		copy, hidden    float64
	}{
		{"none", nil, []Interval[float64]{iv(0, 4)}, 4, 0},
		{"no copies", []Interval[float64]{iv(0, 4)}, nil, 0, 0},
		{"partly", []Interval[float64]{iv(5, 20)}, []Interval[float64]{iv(0, 10), iv(20, 10)}, 20, 10},
		// summing per-kernel overlaps would give 5+5 for the h2d and 3 for the d2h: 13 of 13
		{"kernels overlapping", []Interval[float64]{iv(0, 10), iv(5, 10)}, []Interval[float64]{iv(5, 5), iv(12, 8)}, 13, 8},
		{"kernel inside kernel, unsorted", []Interval[float64]{iv(2, 3), iv(0, 10), iv(20, 2)}, []Interval[float64]{iv(8, 14)}, 14, 4},
		{"copy across a gap", []Interval[float64]{iv(0, 2), iv(4, 2), iv(8, 2)}, []Interval[float64]{iv(1, 8)}, 8, 4},
		{"copies overlapping each other", []Interval[float64]{iv(0, 10)}, []Interval[float64]{iv(0, 4), iv(2, 4)}, 8, 8},
		{"touching kernels", []Interval[float64]{iv(0, 2), iv(2, 2)}, []Interval[float64]{iv(1, 2)}, 2, 2},
	} {
		o := HiddenCopy(tc.kernels, tc.copies)
		if o.Copy != tc.copy || o.Hidden != tc.hidden {
			t.Errorf("%s: copy %v hidden %v, want %v and %v", tc.name, o.Copy, o.Hidden, tc.copy, tc.hidden)
		}
	}
	if f := (CopyOverlap[float64]{Copy: 4, Hidden: 3}).Fraction(); f != 0.75 {
		t.Errorf("fraction %v, want 0.75", f)
	}
	if f := (CopyOverlap[float64]{}).Fraction(); f != 0 {
		t.Errorf("no copies: fraction %v, want 0", f)
	}
	d := HiddenCopy([]Interval[time.Duration]{{0, 10}, {5, 10}}, []Interval[time.Duration]{{5, 5}})
	if d.Copy != 5 || d.Hidden != 5 {
		t.Errorf("durations: %+v, want 5 of 5", d)
	}
}

// timings.csv rows: per device, kernels stage rows only (the segment row spans the whole engine
// call and hides nothing).
func TestRowsCopyOverlap(t *testing.T) {
	t.Parallel()
	rows := []Row{
		{Stage: stage.Segment, Device: "cuda:0", StartMS: 0, DurationMS: 100},
		{Stage: stage.H2D, Device: "cuda:0", StartMS: 0, DurationMS: 10},
		{Stage: stage.Kernels, Device: "cuda:0", StartMS: 10, DurationMS: 20},
		{Stage: stage.Kernels, Device: "cuda:0", StartMS: 15, DurationMS: 20},
		{Stage: stage.H2D, Device: "cuda:0", StartMS: 12, DurationMS: 10},
		{Stage: stage.D2H, Device: "cuda:0", StartMS: 30, DurationMS: 10},
		{Stage: stage.Kernels, Device: "cuda:1", StartMS: 0, DurationMS: 50},
		{Stage: stage.D2H, Device: "cuda:1", StartMS: 40, DurationMS: 20},
		{Stage: stage.Read, Device: stage.Host, StartMS: 0, DurationMS: 9},
	}
	got := RowsCopyOverlap(rows)
	want := map[string]CopyOverlap[float64]{"cuda:0": {Copy: 30, Hidden: 15}, "cuda:1": {Copy: 20, Hidden: 10}}
	if len(got) != len(want) {
		t.Fatalf("devices %v, want %v", got, want)
	}
	for dev, w := range want {
		if got[dev] != w {
			t.Errorf("%s: %+v, want %+v", dev, got[dev], w)
		}
	}
}

// The trace carries each device's copy overlap in its metadata.
func TestTraceCopyOverlap(t *testing.T) {
	t.Parallel()
	var tr Trace
	add := func(st stage.Stage, start, dur float64) {
		tr.Add(Span{Row: Row{Volume: "a", Stage: st, Slab: 0, StartMS: start, DurationMS: dur}, Process: "cuda:0", Track: string(st)})
	}
	add(stage.Kernels, 0, 10)
	add(stage.Kernels, 5, 10)
	add(stage.H2D, 5, 5)
	add(stage.D2H, 12, 8)
	tr.Add(Span{Row: Row{Volume: "a", Stage: stage.Read, StartMS: 0, DurationMS: 3}, Process: stage.Host, Track: "reader 0"})
	path := filepath.Join(t.TempDir(), "trace.json")
	if err := tr.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OtherData map[string]string `json:"otherData"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.OtherData) != 1 || !strings.HasPrefix(doc.OtherData["cuda:0 copies hidden"], "61.5 % of 13.000 ms") {
		t.Errorf("otherData %v, want cuda:0's copies 61.5 %% hidden of 13 ms", doc.OtherData)
	}

	// Notes join the metadata (the kernels an engine ran).
	tr.Note("cuda:0 kernels", "fused fp16 kernel from the fatbin")
	if err := tr.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if data, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	doc.OtherData = nil
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.OtherData) != 2 || doc.OtherData["cuda:0 kernels"] != "fused fp16 kernel from the fatbin" {
		t.Errorf("otherData %v, want the note beside the copies", doc.OtherData)
	}
}
