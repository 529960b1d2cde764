package pipeline

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"voxpipe/engine/engine"

	"voxpipe/internal/regular"
	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/telemetry/timing"
)

// syncBuffer is a log sink shared by the run's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A volume whose scl_slope is NaN, infinite or 0 is segmented with its values as stored (the
// NIfTI rule) and a warning that names the file; a valid slope gives none.
func TestRunWarnsAboutBadScaling(t *testing.T) {
	t.Parallel()
	for name, slope := range map[string]float32{"nan": float32(math.NaN()), "inf": float32(math.Inf(1)), "zero": 0, "one": 1} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "in", "v.nii")
			os.MkdirAll(filepath.Dir(path), 0o755)
			writeVolume(t, path, 9, 7, 5, 1)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			binary.LittleEndian.PutUint32(raw[112:], math.Float32bits(slope)) // scl_slope
			os.WriteFile(path, raw, 0o644)
			if h, err := nifti.ReadHeader(path); err != nil || h.ScalingWarning() == "" && slope != 1 {
				t.Fatalf("header %v: warning %q", err, h.ScalingWarning())
			}
			found, err := jobs.Discover([]string{filepath.Dir(path)}, false, filepath.Join(dir, "out"), "{name}_mask.nii")
			if err != nil {
				t.Fatal(err)
			}
			var log syncBuffer
			var rows []timing.Summary
			res, err := Run(context.Background(), Config{
				Engines: []engine.Engine{&signEngine{}},
				Input: Input{
					Jobs: found.Jobs,
				},
				Workers: Workers{
					Slab:    4,
					Readers: 1,
					Writers: 1,
				},
				Output: Output{
					Classes: 3,
				},
				Telemetry: Telemetry{
					RunID:    "test",
					Log:      slog.New(slog.NewTextHandler(&log, nil)),
					Observer: &summaries{rows: &rows},
				},
			})
			if err != nil || res.OK != 1 {
				t.Fatalf("%+v %v\n%s", res, err, log.String())
			}
			warned := strings.Contains(log.String(), "level=WARN msg=\"input scaling\"") && strings.Contains(log.String(), path)
			if warned != (slope != 1) {
				t.Errorf("slope %v: warned %v\n%s", slope, warned, log.String())
			}
			// The record says it too: a reason of the domain verdict, naming the file.
			if recorded := strings.Contains(rows[0].Domain, "scl_slope") && strings.Contains(rows[0].Domain, path); recorded != (slope != 1) {
				t.Errorf("slope %v: summary domain %q", slope, rows[0].Domain)
			}
		})
	}
}

// A .hdr whose .img is a FIFO is refused at discovery, naming the .img, and never opened: the
// run ends (a plain open of the FIFO would block it forever).
func TestDiscoverRefusesAFIFOImage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	os.MkdirAll(in, 0o755)
	writeVolume(t, filepath.Join(in, "good.nii"), 9, 7, 5, 1)
	h := &nifti.Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: nifti.Int16, BitPix: 16,
		Dim: [8]int64{3, 4, 3, 2, 1, 1, 1, 1}, PixDim: [8]float64{1, 1, 1, 1}, SclSlope: 1, Magic: "ni1"}
	if err := nifti.Write(filepath.Join(in, "pair.hdr"), h, make([]byte, 4*3*2*2), nifti.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(in, "pair.img")
	os.Remove(img)
	if err := syscall.Mkfifo(img, 0o644); err != nil {
		t.Fatal(err)
	}
	found, err := jobs.Discover([]string{in}, false, filepath.Join(dir, "out"), "{name}_mask.nii")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]jobs.Job{}
	for _, j := range found.Jobs {
		byName[j.Name] = j
	}
	if err := byName["pair"].Err; !errors.Is(err, jobs.ErrNotRegular) || !errors.Is(err, regular.ErrNotRegular) || !strings.Contains(err.Error(), img) {
		t.Fatalf("pair: %v; want ErrNotRegular naming %s", err, img)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{
		Engines: []engine.Engine{&signEngine{}},
		Input: Input{
			Jobs: found.Jobs,
		},
		Workers: Workers{
			Slab:    4,
			Readers: 2,
			Writers: 1,
		},
		Output: Output{
			Classes: 3,
		},
		Telemetry: Telemetry{
			RunID: "test",
		},
	})
	if err != nil || res.OK != 1 || res.Failed != 1 {
		t.Fatalf("%+v %v", res, err)
	}
}
