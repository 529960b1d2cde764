package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
	"voxpipe/engine/cpu"
	"voxpipe/engine/engine"

	"voxpipe/model"
	"voxpipe/telemetry/timing"
)

// describedEngine is an engine that says which kernels it runs (as the CUDA engine does).
type describedEngine struct {
	engine.Engine
	name string
	err  error
}

func (d describedEngine) Name() string { return d.name }
func (d describedEngine) Kernels() (string, error) {
	return "fused fp16 kernel (mma.sync) from the fatbin (sm_90 SASS, nvcc 11.8)", d.err
}
func (d describedEngine) OpenSteps() ([]engine.OpenStep, error) {
	return []engine.OpenStep{{Name: "context", Duration: 61500 * time.Microsecond}, {Name: "weights and streams", Duration: 2 * time.Millisecond}}, d.err
}

func TestNoteKernels(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	tr := &timing.Trace{}
	cpu := cpu.New(model.RandomModel(4, 2, 1), 1)
	failed := describedEngine{name: "cuda:1", err: errors.New("no context")}
	noteKernels([]engine.Engine{cpu, describedEngine{name: "cuda:0"}, failed}, log, tr)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want one (the CPU engine says nothing, a failed engine is left out):\n%s", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["msg"] != "kernels" || rec["engine"] != "cuda:0" || !strings.Contains(rec["kernels"].(string), "fatbin") ||
		rec["open_context_ms"] != 61.5 || rec["open_weights_and_streams_ms"] != 2.0 {
		t.Errorf("log line %v", rec)
	}
	// noteKernels adds to the trace's metadata; the nil trace of watch is fine too.
	noteKernels([]engine.Engine{describedEngine{name: "cuda:0"}}, log, nil)
	path := t.TempDir() + "/trace.json"
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
	if !strings.Contains(doc.OtherData["cuda:0 kernels"], "fatbin") || len(doc.OtherData) != 1 {
		t.Errorf("trace metadata %v, want cuda:0's kernels only", doc.OtherData)
	}
}
