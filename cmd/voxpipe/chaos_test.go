package main

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"voxpipe/internal/testexec"
	"voxpipe/store/records"
	"voxpipe/telemetry/timing"
)

// TestChaosConcurrentRunsWithKills runs three voxpipe processes at once on one output folder of
// 14 volumes, twice, killing some with SIGKILL at random moments, then one clean run. Then:
// every mask is byte-identical to a single-process run's; no volume was committed twice; every
// CSV of every run parses with its header's field count; no temporaries or claims are left;
// the clean run finds nothing busy. VOXPIPE_CHAOS_SEED replays a seed.
func TestChaosConcurrentRunsWithKills(t *testing.T) {
	t.Parallel()
	bin := testBinary(t)
	model, _ := testModel(t)
	dir := t.TempDir()
	const volumes = 14
	genRun(t, "--out", dir, "--dims", "40x40x24", "--count", strconv.Itoa(volumes), "--seed", "11")
	in := filepath.Join(dir, "volumes")
	args := func(out, id string) []string {
		return []string{"run", "-q", "--engine", "cpu", "--workers", "1", "--readers", "1", "--slab", "6",
			"--model", model, "--run-id", id, in, "-o", out}
	}

	ref := filepath.Join(dir, "ref")
	start := time.Now()
	if b, err := testexec.Cmd(t, bin, args(ref, "ref")...).CombinedOutput(); err != nil {
		t.Fatalf("reference run: %v\n%s", err, b)
	}
	single := time.Since(start)

	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("VOXPIPE_CHAOS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (VOXPIPE_CHAOS_SEED replays it); a single process takes %v", seed, single)
	rng := rand.New(rand.NewPCG(seed, 1))

	out := filepath.Join(dir, "out")
	var runIDs []string
	var killed atomic.Int32
	for round := range 2 {
		var wg sync.WaitGroup
		for p := range 3 {
			id := fmt.Sprintf("chaos-%d-%d", round, p)
			runIDs = append(runIDs, id)
			// Two of three processes are killed, at a random moment of a single run's length.
			kill := p != rng.IntN(3)
			after := time.Duration(rng.Int64N(int64(single)))
			chaosProcess(t, &wg, testexec.Cmd(t, bin, args(out, id)...), id, kill, after, &killed)
		}
		wg.Wait()
	}
	t.Logf("%d processes killed with SIGKILL", killed.Load())

	if b, err := testexec.Cmd(t, bin, args(out, "clean")...).CombinedOutput(); err != nil {
		t.Fatalf("clean run: %v\n%s", err, b)
	}
	runIDs = append(runIDs, "clean")

	checkChaosMasks(t, ref, out, volumes)
	checkChaosRecords(t, out, runIDs, volumes)
	checkNothingLeft(t, out)

	// The merged records make a report.
	rep := testexec.Cmd(t, bin, "report", "--run", out, "--baseline", ref, "-o", t.TempDir())
	if b, err := rep.CombinedOutput(); err != nil {
		t.Errorf("report over the chaos runs: %v\n%s", err, b)
	}
}

// chaosProcess starts cmd and, in a goroutine of wg, waits for it, or kills it with SIGKILL
// after (when kill), counting the kills.
func chaosProcess(t *testing.T, wg *sync.WaitGroup, cmd *exec.Cmd, id string, kill bool, after time.Duration, killed *atomic.Int32) {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var timer <-chan time.Time
		if kill {
			timer = time.After(after)
		}
		select {
		case err := <-done:
			if err != nil && !kill {
				t.Errorf("%s: %v\n%s", id, err, stderr.String())
			}
		case <-timer:
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			killed.Add(1)
		case <-time.After(5 * time.Minute):
			cmd.Process.Kill()
			t.Errorf("%s did not finish", id)
		}
	}()
}

// checkChaosMasks checks that the masks in out are byte-identical to the single process's.
func checkChaosMasks(t *testing.T, ref, out string, volumes int) {
	t.Helper()
	refMasks, _ := filepath.Glob(filepath.Join(ref, "*_mask.nii.gz"))
	if len(refMasks) != volumes {
		t.Fatalf("reference has %d masks", len(refMasks))
	}
	for _, r := range refMasks {
		want, _ := os.ReadFile(r)
		got, err := os.ReadFile(filepath.Join(out, filepath.Base(r)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: differs from the single-process mask (%v)", filepath.Base(r), err)
		}
	}

}

// checkChaosRecords checks the records of the runs: every CSV parses with the header's field
// count, no volume is committed twice, the clean run leaves none undone, and volumes.csv has
// every volume ok or skipped.
func checkChaosRecords(t *testing.T, out string, runIDs []string, volumes int) {
	t.Helper()
	okRows := map[string]int{}
	commits := map[string]int{}
	for _, id := range runIDs {
		d := records.RunDir(out, id)
		if _, err := os.Stat(d); err != nil {
			continue // killed before it made its folder
		}
		for _, name := range []string{records.TimingsName, records.SummaryName} {
			p := filepath.Join(d, name)
			if _, err := os.Stat(p); err != nil {
				continue // killed between making the folder and the file
			}
			assertWholeRecords(t, p)
		}
		sums, err := timing.ReadSummaries(filepath.Join(d, records.SummaryName))
		if err == nil {
			for _, s := range sums {
				if s.Status == timing.StatusOK {
					okRows[s.Volume]++
				}
				if id == "clean" && s.Status != timing.StatusOK && s.Status != timing.StatusSkipped {
					t.Errorf("clean run: %s is %s (%s %s)", s.Volume, s.Status, s.Reason, s.Error)
				}
			}
		}
		rows, err := timing.ReadRows(filepath.Join(d, records.TimingsName))
		if err == nil {
			for _, r := range rows {
				if r.Stage == "write" && r.Slab == -1 {
					commits[r.Volume]++
				}
			}
		}
	}
	for v, n := range okRows {
		if n > 1 {
			t.Errorf("%s: %d ok rows: segmented and committed more than once", v, n)
		}
	}
	for v, n := range commits {
		if n > 1 {
			t.Errorf("%s: committed %d times", v, n)
		}
	}
	vols, err := timing.ReadSummaries(filepath.Join(out, records.VolumesName))
	if err != nil || len(vols) != volumes {
		t.Fatalf("volumes.csv: %d rows, %v", len(vols), err)
	}
	for _, v := range vols {
		// skipped: the mask was committed by a process killed before it wrote its row.
		if v.Status != timing.StatusOK && v.Status != timing.StatusSkipped {
			t.Errorf("volumes.csv: %s %s", v.Volume, v.Status)
		}
	}

}

// checkNothingLeft checks that no temporaries, claims or staging folders are left in out.
func checkNothingLeft(t *testing.T, out string) {
	t.Helper()
	filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err == nil && (strings.Contains(d.Name(), ".tmp") || strings.HasSuffix(d.Name(), ".claim") || strings.HasPrefix(d.Name(), ".staging-")) {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})

}

// assertWholeRecords checks that every record of a CSV has the header's number of fields.
func assertWholeRecords(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := csv.NewReader(f) // FieldsPerRecord 0: every record as long as the first (the header)
	recs, err := r.ReadAll()
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if len(recs) == 0 {
		t.Errorf("%s: no header", path)
	}
}
