package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"voxpipe/analysis"
	"voxpipe/engine/engine"

	"voxpipe/jobs"
	"voxpipe/model"
	"voxpipe/store/claim"
	"voxpipe/store/records"
	"voxpipe/telemetry/timing"
)

// Masks whose folders do not exist yet (-r over nested inputs, a --mask-name with folders) are
// claimed and written: the claim's folder is made before the claim.
func TestRunClaimsMasksInNewFolders(t *testing.T) {
	t.Parallel()
	for _, maskName := range []string{"{name}_mask.nii.gz", "masks/{name}_mask.nii.gz", "a/b/{name}.nii"} {
		t.Run(maskName, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
			os.MkdirAll(filepath.Join(in, "sub", "deeper"), 0o755)
			writeVolume(t, filepath.Join(in, "top.nii.gz"), 9, 7, 5, 1)
			writeVolume(t, filepath.Join(in, "sub", "mid.nii"), 9, 7, 5, 2)
			writeVolume(t, filepath.Join(in, "sub", "deeper", "low.nii.gz"), 9, 7, 5, 3)
			found, err := jobs.Discover([]string{in}, true, out, maskName)
			if err != nil {
				t.Fatal(err)
			}
			os.MkdirAll(out, 0o755)
			claims, err := claim.NewManager(out, claim.Options{RunID: "test"})
			if err != nil {
				t.Fatal(err)
			}
			var rows []timing.Summary
			res, err := Run(context.Background(), Config{
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
					Claims:  claims,
				},
				Telemetry: Telemetry{
					RunID:    "test",
					Observer: &summaries{rows: &rows},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.OK != 3 {
				t.Fatalf("%+v; rows %+v", res, rows)
			}
			for _, j := range found.Jobs {
				if _, err := os.Stat(j.Output); err != nil {
					t.Errorf("mask of %s: %v", j.Name, err)
				}
			}
			assertNoTemporaries(t, out)
		})
	}
}

// summaries collects the summary rows of a run.
type summaries struct{ rows *[]timing.Summary }

func (s *summaries) Row(timing.Row)           {}
func (s *summaries) Summary(r timing.Summary) { *s.rows = append(*s.rows, r) }

// --statistics or --preview over a finished folder makes what is missing (the volumes are
// done again: the same masks), rather than skipping them silently; once they exist, the
// volumes are skipped again.
func TestRunMakesMissingAnalysesOfUpToDateMasks(t *testing.T) {
	t.Parallel()
	b := newBatch(t, 2)
	if first := runBatch(t, context.Background(), b, &signEngine{}, func(c *Config) { c.Output.Analyser = &analysis.Outputs{Dir: b.out} }); first.res.OK != 2 {
		t.Fatalf("first run %+v", first.res)
	}
	analyses := func(c *Config) {
		c.Output.Analyser = &analysis.Outputs{Dir: b.out, Statistics: true, Preview: true, Labels: []model.Label{{Value: 0, Name: "background", Color: "#000000"}, {Value: 1, Name: "a", Color: "#ff0000"}, {Value: 2, Name: "b", Color: "#00ff00"}}}
	}
	again := runBatch(t, context.Background(), b, &signEngine{}, analyses)
	if again.res.OK != 2 || again.res.Skipped != 0 {
		t.Fatalf("with --statistics --preview over up-to-date masks: %+v", again.res)
	}
	for name, s := range statusByVolume(again.summary) {
		if _, good := b.good[name]; good && !strings.Contains(s.Reason, "statistics and preview are missing") {
			t.Errorf("%s: reason %q", name, s.Reason)
		}
	}
	for name := range b.good {
		jsonPath, csvPath := records.StatisticsPaths(b.out, name)
		for _, p := range []string{jsonPath, csvPath, records.PreviewPath(b.out, name)} {
			if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
				t.Errorf("missing %s", p)
			}
		}
	}
	if third := runBatch(t, context.Background(), b, &signEngine{}, analyses); third.res.Skipped != 2 {
		t.Errorf("third run %+v: want both skipped", third.res)
	}
}
