package timing

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestCSVFileAppendsAndParses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "timings.csv")
	f, err := CreateCSV[Row](path)
	if err != nil {
		t.Fatal(err)
	}
	// The header is there before any row, so a run killed early leaves a parseable file.
	data, _ := os.ReadFile(path)
	if got := strings.TrimSpace(string(data)); got != "run_id,volume,stage,slab,device,start_ms,duration_ms,bytes,voxels" {
		t.Fatalf("header %q", got)
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.Append(Row{RunID: "r", Volume: "v,with \"comma\"", Stage: "read", Slab: i, DurationMS: 1.5, Bytes: int64(i)})
		}()
	}
	wg.Wait()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	rows, err := ReadRows(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 50 {
		t.Fatalf("%d rows, want 50", len(rows))
	}
	seen := map[int]bool{}
	for _, r := range rows {
		if r.Volume != "v,with \"comma\"" || r.DurationMS != 1.5 || int64(r.Slab) != r.Bytes {
			t.Errorf("row %+v", r)
		}
		seen[r.Slab] = true
	}
	if len(seen) != 50 {
		t.Errorf("rows lost or duplicated: %d distinct", len(seen))
	}
	if err := f.Append(Row{}); err == nil {
		t.Error("append after close succeeded")
	}
}

func TestTraceIsChromeJSON(t *testing.T) {
	t.Parallel()
	var tr Trace
	tr.Add(Span{Row: Row{Volume: "a", Stage: "read", Slab: 0, StartMS: 1, DurationMS: 2}, Process: "host", Track: "reader 0"})
	tr.Add(Span{Row: Row{Volume: "a", Stage: "kernels", Slab: 0, StartMS: 3, DurationMS: 0.5}, Process: "cuda:0", Track: "kernels"})
	tr.Add(Span{Row: Row{Volume: "a", Stage: "write", Slab: -1, StartMS: 4, DurationMS: 1}, Process: "host", Track: "writer 0"})
	path := filepath.Join(t.TempDir(), "trace.json")
	if err := tr.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	var doc struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var spans, meta int
	pids := map[float64]bool{}
	for _, e := range doc.TraceEvents {
		switch e["ph"] {
		case "X":
			spans++
			pids[e["pid"].(float64)] = true
			if e["name"] == "kernels a slab 0" && (e["ts"].(float64) != 3000 || e["dur"].(float64) != 500) {
				t.Errorf("kernel span in µs wrong: %v", e)
			}
		case "M":
			meta++
		}
	}
	if spans != 3 || len(pids) != 2 || meta != 2+3 {
		t.Errorf("%d spans on %d processes, %d metadata events; want 3 on 2, 5", spans, len(pids), meta)
	}
}
