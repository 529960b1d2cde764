package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"voxpipe/internal/testexec"
	"voxpipe/io/nifti"
	"voxpipe/model"
	"voxpipe/store/claim"
	"voxpipe/store/provenance"
	"voxpipe/store/records"
	"voxpipe/telemetry/timing"
)

// smallVolumes generates n small phantoms (format nii or nii.gz) and returns their folder.
func smallVolumes(t *testing.T, n int, format string) string {
	t.Helper()
	dir := t.TempDir()
	genRun(t, "--out", dir, "--dims", "20x16x10", "--count", strconv.Itoa(n), "--seed", "3", "--format", format)
	return filepath.Join(dir, "volumes")
}

// snapshot maps every file under dir to its bytes.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			m[p] = b
		}
		return nil
	})
	return m
}

func assertUnchanged(t *testing.T, before map[string][]byte) {
	t.Helper()
	for p, b := range before {
		now, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(now, b) {
			t.Errorf("input %s changed (%v)", p, err)
		}
	}
}

// runArgs is a quiet CPU run with the test model.
func runArgs(modelPath string, rest ...string) []string {
	return append([]string{"voxpipe", "run", "-q", "--engine", "cpu", "--model", modelPath}, rest...)
}

// A mask path that is an input, by name, symbolic link or hard link, is a usage error before
// any work, whatever the flags.
func TestRunNeverWritesInputs(t *testing.T) {
	t.Parallel()
	modelPath, _ := testModel(t)
	in := smallVolumes(t, 2, "nii")
	before := snapshot(t, in)
	for _, extra := range [][]string{{"--overwrite"}, nil} {
		args := runArgs(modelPath, append([]string{in, "-o", in, "--mask-name", "{name}.nii"}, extra...)...)
		if code := run(args); code != exitUsage {
			t.Errorf("mask named as the input %v: exit %d, want %d", extra, code, exitUsage)
		}
	}
	assertUnchanged(t, before)
	assertNoTemps(t, in)

	input := filepath.Join(in, "phantom_000.nii")
	links := map[string]func(string) error{
		"symlink":   func(p string) error { return os.Symlink(input, p) },
		"hard link": func(p string) error { return os.Link(input, p) },
	}
	for name, link := range links {
		out := t.TempDir()
		if err := link(filepath.Join(out, "phantom_000_mask.nii")); err != nil {
			t.Fatal(err)
		}
		if code := run(runArgs(modelPath, in, "-o", out, "--mask-name", "{name}_mask.nii", "--overwrite")); code != exitUsage {
			t.Errorf("%s to an input at the mask's path: exit %d, want %d", name, code, exitUsage)
		}
	}
	assertUnchanged(t, before)

	// A .hdr/.img pair: the mask path is a hard link of the .img.
	pair := t.TempDir()
	h, data := readRaw(t, input)
	h.Magic = "ni1"
	if err := nifti.Write(filepath.Join(pair, "p.hdr"), h, data[h.VoxOffset:], nifti.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	os.Link(filepath.Join(pair, "p.img"), filepath.Join(out, "p_mask.nii"))
	pairBefore := snapshot(t, pair)
	if code := run(runArgs(modelPath, pair, "-o", out, "--mask-name", "{name}_mask.nii", "--overwrite")); code != exitUsage {
		t.Errorf("mask path a hard link of a pair's .img: exit %d, want %d", code, exitUsage)
	}
	assertUnchanged(t, pairBefore)
}

// Output folders in or equal to the input folder: reruns never segment masks or nest folders.
func TestRunOutputInsideInputs(t *testing.T) {
	t.Parallel()
	modelPath, _ := testModel(t)
	in := smallVolumes(t, 2, "nii.gz")
	for i := range 3 {
		if code := run(runArgs(modelPath, in, "-o", in)); code != 0 {
			t.Fatalf("run %d into the input folder: exit %d", i, code)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(in, "*_mask_mask*")); len(m) > 0 {
		t.Errorf("masks of masks: %v", m)
	}
	if m, _ := filepath.Glob(filepath.Join(in, "*_mask.nii.gz")); len(m) != 2 {
		t.Errorf("%d masks, want 2", len(m))
	}

	in = smallVolumes(t, 2, "nii.gz")
	out := filepath.Join(in, "out")
	for i := range 3 {
		if code := run(runArgs(modelPath, "-r", in, "-o", out)); code != 0 {
			t.Fatalf("recursive run %d: exit %d", i, code)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "out")); err == nil {
		t.Error("the output folder was searched as an input: out/out exists")
	}
	if m, _ := filepath.Glob(filepath.Join(out, "*_mask.nii.gz")); len(m) != 2 {
		t.Errorf("%d masks, want 2", len(m))
	}
}

// A rerun trusts a mask only when it parses and its provenance matches; anything else at the
// mask's path is a conflict, kept unless --overwrite.
func TestRunResumeTrustsOnlyCheckedMasks(t *testing.T) {
	t.Parallel()
	modelPath, _ := testModel(t)
	in := smallVolumes(t, 5, "nii.gz")
	out := t.TempDir()
	id := 0
	runID := func() string { id++; return "r" + strconv.Itoa(id) }
	must := func(want int, extra ...string) []timing.Summary {
		t.Helper()
		rid := runID()
		if code := run(runArgs(modelPath, append([]string{in, "-o", out, "--run-id", rid}, extra...)...)); code != want {
			t.Fatalf("run %s: exit %d, want %d", rid, code, want)
		}
		return runSummary(t, out, rid)
	}
	must(0)
	mask := func(i int) string { return filepath.Join(out, "phantom_00"+strconv.Itoa(i)+"_mask.nii.gz") }
	h, err := nifti.ReadHeader(mask(0))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(h.Descrip, "voxpipe voxpipe") || !strings.HasPrefix(h.Descrip, "voxpipe ") || !strings.Contains(h.Descrip, "model ") {
		t.Errorf("descrip %q", h.Descrip)
	}

	// A 0-byte file, garbage and a folder at mask paths: conflicts, left as they are.
	os.WriteFile(mask(0), nil, 0o644)
	os.WriteFile(mask(1), []byte("garbage, not a mask"), 0o644)
	os.Remove(mask(2))
	os.Mkdir(mask(2), 0o755)
	// Input 3 touched, input 4 replaced by other content.
	later := time.Now().Add(time.Minute)
	os.Chtimes(filepath.Join(in, "phantom_003.nii.gz"), later, later)
	b, _ := os.ReadFile(filepath.Join(in, "phantom_000.nii.gz"))
	os.WriteFile(filepath.Join(in, "phantom_004.nii.gz"), b, 0o644)

	s := statusByVolume(must(exitFailed))
	for i, want := range []timing.Status{timing.StatusConflict, timing.StatusConflict, timing.StatusConflict, timing.StatusOK, timing.StatusOK} {
		v := s["phantom_00"+strconv.Itoa(i)]
		if v.Status != want {
			t.Errorf("phantom_00%d: %s (%s), want %s", i, v.Status, v.Reason, want)
		}
	}
	if r := s["phantom_003"].Reason; !strings.Contains(r, "input changed") {
		t.Errorf("touched input redone because %q", r)
	}
	if st, err := os.Stat(mask(0)); err != nil || st.Size() != 0 {
		t.Error("the 0-byte file at a mask path was replaced without --overwrite")
	}
	// --overwrite replaces the files, not the folder.
	s = statusByVolume(must(exitFailed, "--overwrite"))
	if s["phantom_000"].Status != timing.StatusOK || s["phantom_001"].Status != timing.StatusOK || s["phantom_002"].Status != timing.StatusConflict {
		t.Errorf("--overwrite: %v %v %v", s["phantom_000"].Status, s["phantom_001"].Status, s["phantom_002"].Status)
	}
	os.Remove(mask(2))
	must(0)
	// Another model: everything is redone, and the summary says why.
	other := filepath.Join(t.TempDir(), "other.safetensors")
	data, err := model.RandomModel(8, 4, 8).MarshalSafetensors()
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(other, data, 0o644)
	rid := runID()
	if code := run([]string{"voxpipe", "run", "-q", "--engine", "cpu", "--model", other, in, "-o", out, "--run-id", rid}); code != 0 {
		t.Fatalf("other modelPath: exit %d", code)
	}
	for _, v := range runSummary(t, out, rid) {
		if v.Status != timing.StatusOK || !strings.Contains(v.Reason, "model changed") {
			t.Errorf("%s with another modelPath: %s %q", v.Volume, v.Status, v.Reason)
		}
	}
	// The mask records its provenance.
	_, rec, err := provenance.Read(mask(0))
	if err != nil || rec.Model.Name != "other.safetensors" || rec.Engine != "cpu" || rec.Input.XXH3 == "" || rec.Version == "" {
		t.Errorf("provenance %+v %v", rec, err)
	}
}

// What a process killed with -9 leaves (mask temporaries, its claim, a half-made claim) is
// removed by the next run, which then does the volume.
func TestRunRemovesWhatDeadProcessesLeft(t *testing.T) {
	t.Parallel()
	modelPath, _ := testModel(t)
	in := smallVolumes(t, 2, "nii.gz")
	out := t.TempDir()
	dead := testexec.Cmd(t, "true")
	dead.Run()
	host, _ := os.Hostname()
	bootID, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	holder := claim.Holder{Host: host, BootID: strings.TrimSpace(string(bootID)), PID: dead.Process.Pid, RunID: "killed", Token: "dead"}
	hb, _ := json.Marshal(holder)
	mask := filepath.Join(out, "phantom_000_mask.nii.gz")
	left := []string{
		filepath.Join(out, ".phantom_000_mask.nii.gz.tmp-12345"),
		filepath.Join(out, ".phantom_001_mask.nii.gz.tmp-999"),
		claim.Path(mask),
		claim.Path(mask) + ".dead.tmp",
	}
	for _, p := range left {
		os.WriteFile(p, hb, 0o644)
	}
	if code := run(runArgs(modelPath, in, "-o", out, "--run-id", "next")); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, p := range left {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left in place", p)
		}
	}
	if n := countStatus(runSummary(t, out, "next"), timing.StatusOK); n != 2 {
		t.Errorf("%d volumes ok, want 2", n)
	}
}

// A volume claimed by a live process is busy: not done, not failed, exit 0.
func TestRunBusyVolume(t *testing.T) {
	t.Parallel()
	modelPath, _ := testModel(t)
	in := smallVolumes(t, 2, "nii.gz")
	out := t.TempDir()
	m, err := claim.NewManager(out, claim.Options{RunID: "other"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Acquire(filepath.Join(out, "phantom_001_mask.nii.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if code := run(runArgs(modelPath, in, "-o", out, "--run-id", "r")); code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	s := statusByVolume(runSummary(t, out, "r"))
	if s["phantom_001"].Status != timing.StatusBusy || !strings.Contains(s["phantom_001"].Reason, "other") {
		t.Errorf("claimed volume: %+v", s["phantom_001"])
	}
	if s["phantom_000"].Status != timing.StatusOK {
		t.Errorf("free volume: %s", s["phantom_000"].Status)
	}
	if _, err := os.Stat(c.Path()); err != nil {
		t.Error("the other process's claim was removed")
	}
}

// A FIFO among the inputs is refused without being opened; the run ends.
func TestRunRefusesFIFO(t *testing.T) {
	t.Parallel()
	modelPath, _ := testModel(t)
	in := smallVolumes(t, 1, "nii.gz")
	if err := syscall.Mkfifo(filepath.Join(in, "pipe.nii"), 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	out := t.TempDir()
	done := make(chan int, 1)
	go func() { done <- run(runArgs(modelPath, in, "-o", out, "--run-id", "r")) }()
	select {
	case code := <-done:
		if code != exitFailed {
			t.Errorf("exit %d, want %d", code, exitFailed)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the run blocked on a FIFO")
	}
	s := statusByVolume(runSummary(t, out, "r"))
	if s["pipe"].Status != timing.StatusFailed || !strings.Contains(s["pipe"].Error, "not a regular file") {
		t.Errorf("FIFO: %+v", s["pipe"])
	}
	if s["phantom_000"].Status != timing.StatusOK {
		t.Errorf("phantom_000: %s", s["phantom_000"].Status)
	}
}

// Shards split a folder: together they do every volume once, and their rows say which shard.
func TestRunShards(t *testing.T) {
	modelPath, _ := testModel(t)
	in := smallVolumes(t, 6, "nii.gz")
	out := t.TempDir()
	done := map[string]string{}
	for i := range 3 {
		id := "shard" + strconv.Itoa(i)
		t.Setenv("SLURM_ARRAY_TASK_ID", strconv.Itoa(10+i))
		t.Setenv("SLURM_ARRAY_TASK_MIN", "10")
		t.Setenv("SLURM_ARRAY_TASK_COUNT", "3")
		if code := run(runArgs(modelPath, in, "-o", out, "--shard", "auto", "--run-id", id)); code != 0 {
			t.Fatalf("shard %d: exit %d", i, code)
		}
		if _, err := os.Stat(records.RunDir(out, id)); err != nil {
			continue // no volume fell in this shard
		}
		for _, s := range runSummary(t, out, id) {
			if prev, dup := done[s.Volume]; dup {
				t.Errorf("%s done by %s and %s", s.Volume, prev, s.Shard)
			}
			if s.Status != timing.StatusOK || s.Shard != strconv.Itoa(i)+"/3" {
				t.Errorf("%s: %s in shard %q, want ok in %d/3", s.Volume, s.Status, s.Shard, i)
			}
			done[s.Volume] = s.Shard
		}
	}
	if len(done) != 6 {
		t.Errorf("%d of 6 volumes done by the shards", len(done))
	}
	if code := run(runArgs(modelPath, in, "-o", out, "--shard", "3/3")); code != exitUsage {
		t.Errorf("--shard 3/3: exit %d, want %d", code, exitUsage)
	}
}

// Without a terminal, progress lines come every --progress-interval; with --log-format json
// every stderr line is JSON, the last one (why the command failed) too.
func TestRunLogsWithoutATerminal(t *testing.T) {
	t.Parallel()
	bin := testBinary(t)
	modelPath, _ := testModel(t)
	dir := t.TempDir()
	genRun(t, "--out", dir, "--dims", "96x96x48", "--count", "3", "--seed", "6")
	in := filepath.Join(dir, "volumes")
	os.WriteFile(filepath.Join(in, "broken.nii"), []byte("not a volume"), 0o644)
	cmd := testexec.Cmd(t, bin, "run", "--engine", "cpu", "--workers", "1", "--model", modelPath, "--log-format", "json",
		"--progress-interval", "100ms", in, "-o", t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != exitFailed {
		t.Fatalf("exit %d, want %d\n%s", code, exitFailed, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	progress := 0
	for _, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("not JSON: %q", line)
			continue
		}
		if m["msg"] == "progress" {
			progress++
		}
	}
	if progress == 0 {
		t.Errorf("no progress line:\n%s", stderr.String())
	}
	var last map[string]any
	json.Unmarshal([]byte(lines[len(lines)-1]), &last)
	if last["exit_code"] != float64(exitFailed) || !strings.Contains(last["msg"].(string), "failed") {
		t.Errorf("last line %v", last)
	}
}

// Bad mask names, unwritable trace and output paths are usage errors found before any work.
func TestRunChecksBeforeWork(t *testing.T) {
	t.Parallel()
	modelPath, _ := testModel(t)
	in := smallVolumes(t, 1, "nii.gz")
	file := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(file, nil, 0o644)
	cases := map[string][]string{
		"png mask":            {"--mask-name", "{name}.png"},
		"mask outside OUT":    {"--mask-name", "../{name}.nii.gz"},
		"trace under a file":  {"--trace", filepath.Join(file, "trace.json")},
		"timings that exists": {"--timings", file},
		"bad max-memory":      {"--max-memory", "lots"},
		"run id with a slash": {"--run-id", "a/b"},
	}
	for name, extra := range cases {
		out := t.TempDir()
		if code := run(runArgs(modelPath, append([]string{in, "-o", out}, extra...)...)); code != exitUsage {
			t.Errorf("%s: exit %d, want %d", name, code, exitUsage)
		}
		if m, _ := filepath.Glob(filepath.Join(out, "*.nii*")); len(m) > 0 {
			t.Errorf("%s: work was done: %v", name, m)
		}
	}
	if code := run(runArgs(modelPath, in, "-o", filepath.Join(file, "out"))); code != exitUsage {
		t.Errorf("output under a file: exit %d, want %d", code, exitUsage)
	}
	// A read-only output folder, where this test may mount one.
	ro := t.TempDir()
	if err := syscall.Mount("tmpfs", ro, "tmpfs", syscall.MS_RDONLY, "size=1m"); err == nil {
		defer syscall.Unmount(ro, 0)
		if code := run(runArgs(modelPath, in, "-o", ro)); code != exitUsage {
			t.Errorf("read-only output folder: exit %d, want %d", code, exitUsage)
		}
	} else {
		t.Logf("read-only mount not possible here (%v): that case is not run", err)
	}
}
