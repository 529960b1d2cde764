package orthanctest

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"voxpipe/internal/dicomtest"
)

const study = "1.2.826.0.1.3680043.8.498.7001"

// writeSeries writes n slices of a small MR series of the study into a folder of its own.
func writeSeries(t *testing.T, seriesUID string, n int) []string {
	t.Helper()
	files, err := dicomtest.Series{
		StudyUID: study, SeriesUID: seriesUID, Number: 1, Rows: 8, Columns: 8, PatientID: "P7001",
	}.Write(t.TempDir(), 0, n)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// qido sends a QIDO-RS request as a client would (plain net/http) and returns its status and
// DICOM JSON answer.
func qido(t *testing.T, url, user, password string) (int, []map[string]struct{ Value []any }) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	req.Header.Set("Accept", "application/dicom+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans []map[string]struct{ Value []any }
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, ans
}

func TestStoreQueryDelete(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{})
	s.Store(t, writeSeries(t, study+".1", 3)...)

	got := s.Series(t)
	want := SeriesInfo{ID: got[0].ID, StudyID: got[0].StudyID, StudyInstanceUID: study,
		SeriesInstanceUID: study + ".1", Modality: "MR", Instances: 3, IsStable: got[0].IsStable}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("Series: %+v, want [%+v]", got, want)
	}

	code, ans := qido(t, s.DICOMweb+"/series?Modality=MR", s.User, s.Password)
	if code != http.StatusOK || len(ans) != 1 {
		t.Fatalf("QIDO-RS: status %d, %v", code, ans)
	}
	if uid, n := ans[0]["0020000E"].Value, ans[0]["00201209"].Value; len(uid) != 1 || uid[0] != study+".1" || len(n) != 1 || n[0] != 3.0 {
		t.Errorf("QIDO-RS: series %v with %v instances, want %s.1 with 3", uid, n, study)
	}
	for _, c := range []struct{ user, password string }{{s.User, "wrong"}, {"", ""}, {"intruder", s.Password}} {
		if code, _ := qido(t, s.DICOMweb+"/series", c.user, c.password); code != http.StatusUnauthorized {
			t.Errorf("QIDO-RS as %q/%q: status %d, want 401", c.user, c.password, code)
		}
	}

	var stats struct{ CountInstances, CountSeries int }
	if err := json.Unmarshal(s.Get(t, "/statistics"), &stats); err != nil || stats.CountInstances != 3 || stats.CountSeries != 1 {
		t.Errorf("/statistics: %+v (%v), want 3 instances in 1 series", stats, err)
	}
	s.Delete(t, "/series/"+got[0].ID)
	if got := s.Series(t); len(got) != 0 {
		t.Errorf("Series after the delete: %+v", got)
	}
}

// A series sent by DIMSE is seen, becomes stable after StableAge, and the /changes feed has
// its NewSeries then its StableSeries.
func TestStoreSCUStableChanges(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{StableAge: 1})
	sent := time.Now()
	s.StoreSCU(t, writeSeries(t, study+".2", 4)...)
	se := s.WaitStable(t, study+".2")
	if se.Instances != 4 || se.Modality != "MR" || se.StudyInstanceUID != study {
		t.Errorf("series sent by storescu: %+v", se)
	}
	t.Logf("stable %.1f s after storescu began", time.Since(sent).Seconds())

	var all []Change
	for since, done := 0, false; !done; {
		var page []Change
		page, since, done = s.Changes(t, since)
		all = append(all, page...)
	}
	seq := map[string]int{}
	for _, c := range all {
		if c.ID == se.ID && c.ResourceType == "Series" {
			seq[c.ChangeType] = c.Seq
		}
	}
	if seq["NewSeries"] == 0 || seq["StableSeries"] <= seq["NewSeries"] {
		t.Errorf("changes of series %s: %v, want NewSeries then StableSeries; all: %+v", se.ID, seq, all)
	}
	if n := strings.Count(string(s.Get(t, "/series/"+se.ID+"/instances")), `"ID"`); n != 4 {
		t.Errorf("/series/%s/instances lists %d instances, want 4", se.ID, n)
	}
}

// gone checks that the process is no more and that nothing answers on the port.
func gone(t *testing.T, pid int, url string) {
	t.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("Orthanc's pid %d after Stop: kill -0 says %v, want no such process", pid, err)
	}
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), 5*time.Second)
	if err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Stop", url)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dialing %s after Stop: %v, want connection refused", url, err)
	}
}

// Stop takes the server away (process gone, port refused), a second Stop is harmless, a port
// taken meanwhile is told apart, and Restart brings the server back with what it stored.
func TestStopRestart(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{NoAuth: true})
	if code, _ := qido(t, s.DICOMweb+"/studies", "", ""); code != http.StatusOK {
		t.Fatalf("QIDO-RS without credentials where authentication is off: status %d", code)
	}
	s.Store(t, writeSeries(t, study+".3", 1)...)
	pid := s.PID()
	http.DefaultClient.CloseIdleConnections()
	begin := time.Now()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Stop took %.1f s", time.Since(begin).Seconds())
	gone(t, pid, s.URL)
	if err := s.Stop(); err != nil || s.PID() != 0 {
		t.Errorf("second Stop: %v, PID %d", err, s.PID())
	}

	l, err := net.Listen("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.launch(t); !errors.Is(err, errPortInUse) {
		t.Errorf("Orthanc on a port taken: %v, want errPortInUse", err)
	}
	l.Close()

	begin = time.Now()
	s.Restart(t)
	t.Logf("Restart took %.1f s", time.Since(begin).Seconds())
	if got := s.Series(t); len(got) != 1 || got[0].Instances != 1 {
		t.Errorf("Series after Restart: %+v, want the one stored before", got)
	}
}

// A server the test did not stop is stopped when the test ends.
func TestCleanupStops(t *testing.T) {
	t.Parallel()
	var pid int
	var url string
	t.Run("leaves it running", func(t *testing.T) {
		s := Start(t, Options{})
		pid, url = s.PID(), s.URL
		s.Get(t, "/system")
	})
	if pid == 0 {
		t.Skip("no Orthanc was started (the subtest says why)")
	}
	gone(t, pid, url)
}

// An Orthanc whose HTTP port another Orthanc holds is not taken for ready because the other
// one answers: Start would then try other ports.
func TestPortHeldByAnotherOrthanc(t *testing.T) {
	t.Parallel()
	a, b := Start(t, Options{}), Start(t, Options{})
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(strings.TrimPrefix(a.URL, "http://127.0.0.1:"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.configure(port, b.DicomPort, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := b.launch(t); !errors.Is(err, errPortInUse) {
		t.Errorf("Orthanc on the HTTP port of another: %v, want errPortInUse", err)
	}
	if b.PID() != 0 {
		t.Errorf("the Orthanc that could not start still runs as pid %d", b.PID())
	}
}
