package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"voxpipe/internal/dicomtest"
	"voxpipe/internal/orthanctest"
	"voxpipe/internal/testexec"
)

// pacsSync runs the built voxpipe (testBinary, as cliRun) with args; it returns stderr and
// the exit code.
func pacsSync(t *testing.T, args ...string) (string, int) {
	t.Helper()
	code, _, stderr := cliRun(t, append([]string{"pacs", "sync"}, args...)...)
	return stderr, code
}

// startPACSWatch starts `voxpipe pacs watch` with the fixture's flags and more; the test
// stops it (SIGTERM), or the test's end kills it.
func (f *pacsFixture) startPACSWatch(t *testing.T, more ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := testexec.Cmd(t, testBinary(t), append(append([]string{"pacs", "watch"}, more...), f.args...)...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stderr
}

// pacsFixture is an Orthanc holding small MR series, and the flags to sync from it.
type pacsFixture struct {
	pacs *orthanctest.Server
	work string
	args []string // --url, credentials, -o WORK, CPU engine
}

func newPACSFixture(t *testing.T, series ...dicomtest.Series) *pacsFixture {
	t.Helper()
	return newPACSFixtureWith(t, orthanctest.Options{}, series...)
}

func newPACSFixtureWith(t *testing.T, o orthanctest.Options, series ...dicomtest.Series) *pacsFixture {
	t.Helper()
	f := &pacsFixture{pacs: orthanctest.Start(t, o), work: filepath.Join(t.TempDir(), "work")}
	pw := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pw, []byte(f.pacs.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.args = []string{"--url", f.pacs.DICOMweb, "--user", f.pacs.User, "--password-file", pw, "-o", f.work,
		"--engine", "cpu", "--resample", "off", "--log-format", "json", "--progress-interval", "0",
		"--all"} // the series are dated 2024: a sync without --all searches from today
	for _, s := range series {
		f.store(t, s, 0, 12)
	}
	return f
}

// store writes slices [from, to) of s and stores them in the PACS.
func (f *pacsFixture) store(t *testing.T, s dicomtest.Series, from, to int) {
	t.Helper()
	paths, err := s.Write(t.TempDir(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	f.pacs.Store(t, paths...)
}

// sync runs `voxpipe pacs sync` with the fixture's flags and more.
func (f *pacsFixture) sync(t *testing.T, more ...string) (string, int) {
	t.Helper()
	return pacsSync(t, append(f.args, more...)...)
}

// segs counts the SEG instances the PACS holds, by study.
func (f *pacsFixture) segs(t *testing.T) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, s := range f.pacs.Series(t) {
		if s.Modality == "SEG" {
			n[s.StudyInstanceUID] += s.Instances
		}
	}
	return n
}

func mrSeries(k int) dicomtest.Series {
	return dicomtest.Series{StudyUID: fmt.Sprintf("1.2.826.0.1.3680043.10.543.35.%d", k), SeriesUID: fmt.Sprintf("1.2.826.0.1.3680043.10.543.35.%d.1", k),
		Number: k + 1, Rows: 32, Columns: 32, Description: "T1", PatientID: "PID35"}
}

// The whole loop against a real Orthanc: a sync segments each MR series and stores its SEG
// into the series' study, once; a second sync finds them done and stores nothing; the masks
// and SEGs in WORKDIR are named by the series ID (no patient data).
func TestPACSSyncLoop(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a real Orthanc and several voxpipe processes: the full suite only")
	}
	f := newPACSFixture(t, mrSeries(1), mrSeries(2))
	stderr, code := f.sync(t)
	if code != 0 {
		t.Fatalf("sync: exit %d\n%s", code, stderr)
	}
	segs := f.segs(t)
	if len(segs) != 2 || segs[mrSeries(1).StudyUID] != 1 || segs[mrSeries(2).StudyUID] != 1 {
		t.Fatalf("SEGs in the PACS by study: %v, want one in each of the two studies", segs)
	}
	done, _ := filepath.Glob(filepath.Join(f.work, "pacs", "done", "*.json"))
	masks, _ := filepath.Glob(filepath.Join(f.work, "*_mask.seg.dcm"))
	if len(done) != 2 || len(masks) != 2 {
		t.Fatalf("ledger %v, SEGs %v", done, masks)
	}
	for _, m := range masks {
		if strings.Contains(m, "PID35") || strings.Contains(m, "T1") {
			t.Errorf("%s: patient data in a file name", m)
		}
	}
	if stderr, code = f.sync(t); code != 0 || !strings.Contains(stderr, `"done":2`) {
		t.Fatalf("second sync: exit %d, want the two series done\n%s", code, stderr)
	}
	if again := f.segs(t); again[mrSeries(1).StudyUID] != 1 || again[mrSeries(2).StudyUID] != 1 {
		t.Errorf("a second sync stored again: %v", again)
	}
}

// Concurrent syncs on one work folder store exactly one SEG per series.
func TestPACSConcurrentSyncs(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a real Orthanc and several voxpipe processes: the full suite only")
	}
	f := newPACSFixture(t, mrSeries(3), mrSeries(4), mrSeries(5))
	var wg sync.WaitGroup
	codes := make([]int, 3)
	logs := make([]string, 3)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			logs[i], codes[i] = f.sync(t, "--run-id", fmt.Sprintf("sync%d", i))
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != 0 {
			t.Errorf("sync %d: exit %d\n%s", i, c, logs[i])
		}
	}
	segs := f.segs(t)
	for _, k := range []int{3, 4, 5} {
		if segs[mrSeries(k).StudyUID] != 1 {
			t.Errorf("study %d: %d SEGs, want 1 (%v)", k, segs[mrSeries(k).StudyUID], segs)
		}
	}
}

// A series that cannot be segmented (a slice missing) fails the sync (exit 1) and stores
// nothing, while the other series is done; once its slice arrives the next sync does it.
func TestPACSFailedSeriesRetried(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a real Orthanc and several voxpipe processes: the full suite only")
	}
	f := newPACSFixture(t, mrSeries(6))
	broken := mrSeries(7)
	f.store(t, broken, 0, 5)
	f.store(t, broken, 6, 12)
	stderr, code := f.sync(t)
	if code != 1 || !strings.Contains(stderr, "1 of 2 new series failed") {
		t.Fatalf("sync: exit %d, want 1 naming one failed series\n%s", code, stderr)
	}
	if segs := f.segs(t); segs[mrSeries(6).StudyUID] != 1 || segs[broken.StudyUID] != 0 {
		t.Fatalf("SEGs %v: want the good series' only", segs)
	}
	f.store(t, broken, 5, 6)
	if stderr, code = f.sync(t); code != 0 {
		t.Fatalf("sync after the slice arrived: exit %d\n%s", code, stderr)
	}
	if segs := f.segs(t); segs[broken.StudyUID] != 1 || segs[mrSeries(6).StudyUID] != 1 {
		t.Fatalf("SEGs %v after the retry", segs)
	}
}

// Wrong credentials exit 1 with a message about them (the password never printed); a PACS that
// cannot be reached exits 1 naming its URL.
func TestPACSCredentialsAndUnreachable(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a real Orthanc and several voxpipe processes: the full suite only")
	}
	f := newPACSFixture(t)
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("not-the-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr, code := pacsSync(t, "--url", f.pacs.DICOMweb, "--user", f.pacs.User, "--password-file", bad, "-o", f.work)
	if code != 1 || !strings.Contains(stderr, "credentials") || strings.Contains(stderr, "not-the-password") {
		t.Errorf("wrong password: exit %d\n%s", code, stderr)
	}
	url := f.pacs.DICOMweb
	if err := f.pacs.Stop(); err != nil {
		t.Fatal(err)
	}
	stderr, code = pacsSync(t, "--url", url, "--retries", "1", "--user", f.pacs.User, "--password-file", bad, "-o", f.work)
	if code != 1 || !strings.Contains(stderr, strings.TrimSuffix(url, "/dicom-web")) {
		t.Errorf("unreachable PACS: exit %d, want 1 naming %s\n%s", code, url, stderr)
	}
}

// A series sent to the PACS over DIMSE (C-STORE by storescu) is picked up like any other.
func TestPACSDIMSESeriesPickedUp(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a real Orthanc and several voxpipe processes: the full suite only")
	}
	f := newPACSFixture(t)
	paths, err := mrSeries(8).Write(t.TempDir(), 0, 12)
	if err != nil {
		t.Fatal(err)
	}
	f.pacs.StoreSCU(t, paths...)
	if stderr, code := f.sync(t); code != 0 {
		t.Fatalf("sync: exit %d\n%s", code, stderr)
	}
	if segs := f.segs(t); segs[mrSeries(8).StudyUID] != 1 {
		t.Fatalf("SEGs %v", segs)
	}
}

// pacs watch takes a series once settled and stores its SEG within seconds; the same series
// re-sent (Orthanc stores each instance again) gets no second SEG; its metrics count the
// series, the PACS requests and the volumes; SIGTERM ends it at once with exit 0.
func TestPACSWatch(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a real Orthanc and several voxpipe processes: the full suite only")
	}
	f := newPACSFixtureWith(t, orthanctest.Options{Overwrite: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd, stderr := f.startPACSWatch(t, "--interval", "1s", "--settle", "2s", "--metrics-addr", addr)
	s := mrSeries(9)
	start := time.Now()
	f.store(t, s, 0, 12)
	if !poll(time.Now().Add(time.Minute), func() bool { return f.segs(t)[s.StudyUID] == 1 }) {
		cmd.Process.Kill()
		t.Fatalf("no SEG a minute after the series was stored\n%s", stderr.String())
	}
	t.Logf("stored to SEG in the PACS: %v", time.Since(start).Round(100*time.Millisecond))
	f.store(t, s, 0, 12) // re-sent
	poll(time.Now().Add(5*time.Second), func() bool { return f.segs(t)[s.StudyUID] > 1 })
	if n := f.segs(t)[s.StudyUID]; n != 1 {
		t.Errorf("%d SEGs after the series was re-sent, want 1", n)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`voxpipe_pacs_series_total{outcome="stored"} 1`, `voxpipe_pacs_requests_total{class="none",kind="stow"} 1`,
		`voxpipe_pacs_request_duration_seconds_count{kind="qido"}`, `voxpipe_volumes_total{status="ok"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	stop := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("watch after SIGTERM: %v, want exit 0\n%s", err, stderr.String())
	}
	if d := time.Since(stop); d > 5*time.Second {
		t.Errorf("watch took %v to stop", d)
	}
}

// pacs watch --orthanc takes each series at Orthanc's StableSeries event and stores its SEG
// once: a series stored over DIMSE after the watch started, then re-sent (StableSeries fires
// again), gets one SEG.
func TestPACSWatchOrthancFeed(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a real Orthanc and several voxpipe processes: the full suite only")
	}
	f := newPACSFixtureWith(t, orthanctest.Options{Overwrite: true, StableAge: 1})
	cmd, stderr := f.startPACSWatch(t, "--orthanc", "--interval", "500ms")
	if !poll(time.Now().Add(30*time.Second), func() bool { return strings.Contains(stderr.String(), "following Orthanc") }) {
		cmd.Process.Kill()
		t.Fatalf("the watch did not start following the feed\n%s", stderr.String())
	}
	s := mrSeries(10)
	paths, err := s.Write(t.TempDir(), 0, 12)
	if err != nil {
		t.Fatal(err)
	}
	f.pacs.StoreSCU(t, paths...)
	if !poll(time.Now().Add(time.Minute), func() bool { return f.segs(t)[s.StudyUID] == 1 }) {
		cmd.Process.Kill()
		t.Fatalf("no SEG a minute after the series was sent\n%s", stderr.String())
	}
	f.pacs.StoreSCU(t, paths...) // re-sent: a second StableSeries
	f.pacs.WaitStable(t, s.SeriesUID)
	poll(time.Now().Add(3*time.Second), func() bool { return f.segs(t)[s.StudyUID] > 1 })
	if n := f.segs(t)[s.StudyUID]; n != 1 {
		t.Errorf("%d SEGs after the series was re-sent, want 1", n)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("watch after SIGTERM: %v\n%s", err, stderr.String())
	}
}

// A PACS that answers a retrieve with a malformed multipart body fails the series (exit 1),
// and nothing is stored or recorded; so does one that goes away in the middle of the answer
// (nothing of it kept); one that never answers fails within --timeout (small fake DICOMweb
// servers).
func TestPACSMalformedAndSlowServers(t *testing.T) {
	t.Parallel()
	series := `[{"0020000D":{"vr":"UI","Value":["1.2.3"]},"0020000E":{"vr":"UI","Value":["1.2.3.4"]},"00080060":{"vr":"CS","Value":["MR"]},"00201209":{"vr":"IS","Value":[2]}}]`
	var stores atomic.Int32
	malformed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost:
			stores.Add(1)
		case strings.HasSuffix(r.URL.Path, "/series"):
			w.Header().Set("Content-Type", "application/dicom+json")
			io.WriteString(w, series)
		default: // the retrieve: a multipart body cut inside its first part, without its end
			w.Header().Set("Content-Type", `multipart/related; type="application/dicom"; boundary=xyz`)
			io.WriteString(w, "--xyz\r\nContent-Type: application/dicom\r\n\r\nDICM-but-not-quite\r\n--xy")
		}
	}))
	defer malformed.Close()
	work := filepath.Join(t.TempDir(), "work")
	stderr, code := pacsSync(t, "--url", malformed.URL+"/dicom-web", "--all", "--retries", "0", "-o", work, "--engine", "cpu")
	if code != 1 || !strings.Contains(stderr, "malformed") || stores.Load() != 0 {
		t.Errorf("malformed retrieve: exit %d, %d stores\n%s", code, stores.Load(), stderr)
	}
	if done, _ := filepath.Glob(filepath.Join(work, "pacs", "done", "*")); len(done) != 0 {
		t.Errorf("recorded done: %v", done)
	}

	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/series") {
			w.Header().Set("Content-Type", "application/dicom+json")
			io.WriteString(w, series)
			return
		}
		// the retrieve: the server goes away in the middle of the answer
		w.Header().Set("Content-Type", `multipart/related; type="application/dicom"; boundary=xyz`)
		io.WriteString(w, "--xyz\r\nContent-Type: application/dicom\r\n\r\nDICM")
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer gone.Close()
	stderr, code = pacsSync(t, "--url", gone.URL+"/dicom-web", "--all", "--retries", "1", "-o", work, "--engine", "cpu")
	if code != 1 || !strings.Contains(stderr, "1 of 1 new series failed") {
		t.Errorf("PACS gone mid-retrieve: exit %d\n%s", code, stderr)
	}
	if left, _ := os.ReadDir(filepath.Join(work, "pacs", "incoming")); len(left) != 0 {
		t.Errorf("files of the broken retrieve left: %v", left)
	}

	stall := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // answers nothing until the client gives up or the test ends
		case <-r.Context().Done():
		case <-stall:
		}
	}))
	defer slow.Close()
	defer close(stall)
	start := time.Now()
	stderr, code = pacsSync(t, "--url", slow.URL+"/dicom-web", "--timeout", "300ms", "--retries", "1", "-o", work)
	if code != 1 || !strings.Contains(stderr, slow.URL) || time.Since(start) > 20*time.Second {
		t.Errorf("stalled PACS: exit %d after %v\n%s", code, time.Since(start), stderr)
	}
}
