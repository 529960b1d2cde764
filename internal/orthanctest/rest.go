package orthanctest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"voxpipe/internal/testexec"
)

// SeriesInfo is a series as Orthanc has it.
type SeriesInfo struct {
	ID                string // Orthanc's own identifier: /series/{ID}
	StudyID           string // Orthanc's identifier of the study: /studies/{StudyID}
	StudyInstanceUID  string
	SeriesInstanceUID string
	Modality          string
	Instances         int  // how many instances Orthanc holds
	IsStable          bool // no new instance for StableAge seconds
}

// Change is one event of Orthanc's /changes feed.
type Change struct {
	Seq          int
	ChangeType   string // NewInstance, NewSeries, StableSeries, StableStudy, Deleted, ...
	ResourceType string // Instance, Series, Study, Patient
	ID           string // Orthanc's identifier of the resource
	Path         string // its REST path, e.g. /series/{ID}
	Date         string
}

// do sends one request to Orthanc's REST API, with the server's credentials.
func (s *Server) do(ctx context.Context, method, path string, body io.Reader, contentType string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, body)
	if err != nil {
		return 0, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if s.User != "" {
		req.SetBasicAuth(s.User, s.Password)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// call is do that fails the test on an error or an answer other than 2xx.
func (s *Server) call(t testing.TB, method, path string, body io.Reader, contentType string) []byte {
	t.Helper()
	code, b, err := s.do(context.Background(), method, path, body, contentType)
	if err != nil {
		t.Fatalf("orthanctest: %s %s: %v", method, path, err)
	}
	if code/100 != 2 {
		t.Fatalf("orthanctest: %s %s: status %d: %.500s", method, path, code, b)
	}
	return b
}

// Get returns the body of an authenticated GET of an Orthanc REST path ("/statistics",
// "/series/{ID}", "/dicom-web/studies"...), failing the test on an error or a status other
// than 2xx.
func (s *Server) Get(t testing.TB, path string) []byte {
	t.Helper()
	return s.call(t, http.MethodGet, path, nil, "")
}

// Delete deletes an Orthanc resource by its REST path ("/series/{ID}", "/studies/{ID}"),
// failing the test on an error or a status other than 2xx.
func (s *Server) Delete(t testing.TB, path string) {
	t.Helper()
	s.call(t, http.MethodDelete, path, nil, "")
}

// Store stores DICOM files through Orthanc's REST API (POST /instances), one request a
// file, failing the test on an error or a file Orthanc refuses.
func (s *Server) Store(t testing.TB, files ...string) {
	t.Helper()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ans struct{ Status string }
		if err := json.Unmarshal(s.call(t, http.MethodPost, "/instances", bytes.NewReader(b), "application/dicom"), &ans); err != nil {
			t.Fatalf("orthanctest: storing %s: %v", f, err)
		}
		if ans.Status != "Success" && ans.Status != "AlreadyStored" {
			t.Fatalf("orthanctest: storing %s: Orthanc says %q", f, ans.Status)
		}
	}
}

// StoreSCU sends DICOM files to Orthanc by DIMSE C-STORE, as a modality does: dcmtk's
// storescu as VOXCLI, under the test's deadline. A missing storescu skips the test, or fails
// it where VOXPIPE_REQUIRE_TOOLS=1; a failed store fails it.
func (s *Server) StoreSCU(t testing.TB, files ...string) {
	t.Helper()
	bin := testexec.Tool(t, "storescu", "dcmtk")
	args := append([]string{"-aet", "VOXCLI", "-aec", s.AET, "127.0.0.1", strconv.Itoa(s.DicomPort)}, files...)
	out, err := testexec.Cmd(t, bin, args...).CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("E: ")) {
		t.Fatalf("orthanctest: storescu of %d files to %s@127.0.0.1:%d: %v\n%s", len(files), s.AET, s.DicomPort, err, out)
	}
}

// Series returns the series Orthanc holds, ordered by StudyInstanceUID, then
// SeriesInstanceUID.
func (s *Server) Series(t testing.TB) []SeriesInfo {
	t.Helper()
	out, err := s.series()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (s *Server) series() ([]SeriesInfo, error) {
	var studies []struct {
		ID            string
		MainDicomTags struct{ StudyInstanceUID string }
	}
	var series []struct {
		ID            string
		ParentStudy   string
		Instances     []string
		IsStable      bool
		MainDicomTags struct{ SeriesInstanceUID, Modality string }
	}
	if err := s.getJSON("/studies?expand", &studies); err != nil {
		return nil, err
	}
	if err := s.getJSON("/series?expand", &series); err != nil {
		return nil, err
	}
	uid := map[string]string{}
	for _, st := range studies {
		uid[st.ID] = st.MainDicomTags.StudyInstanceUID
	}
	out := make([]SeriesInfo, 0, len(series))
	for _, se := range series {
		out = append(out, SeriesInfo{
			ID: se.ID, StudyID: se.ParentStudy, StudyInstanceUID: uid[se.ParentStudy],
			SeriesInstanceUID: se.MainDicomTags.SeriesInstanceUID, Modality: se.MainDicomTags.Modality,
			Instances: len(se.Instances), IsStable: se.IsStable,
		})
	}
	slices.SortFunc(out, func(a, b SeriesInfo) int {
		if c := strings.Compare(a.StudyInstanceUID, b.StudyInstanceUID); c != 0 {
			return c
		}
		return strings.Compare(a.SeriesInstanceUID, b.SeriesInstanceUID)
	})
	return out, nil
}

func (s *Server) getJSON(path string, v any) error {
	code, b, err := s.do(context.Background(), http.MethodGet, path, nil, "")
	if err != nil {
		return fmt.Errorf("orthanctest: GET %s: %w", path, err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("orthanctest: GET %s: status %d: %.500s", path, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("orthanctest: GET %s: %w", path, err)
	}
	return nil
}

// WaitStable waits until Orthanc holds the series of that SeriesInstanceUID and marks it
// stable (StableAge seconds after its last instance), and returns it. It fails the test where
// that takes StableAge + 30 s.
func (s *Server) WaitStable(t testing.TB, seriesInstanceUID string) SeriesInfo {
	t.Helper()
	within := time.Duration(s.stableAge)*time.Second + 30*time.Second
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last []SeriesInfo
	for {
		select {
		case <-deadline.C:
			t.Fatalf("orthanctest: series %s not stable within %v; Orthanc has %+v", seriesInstanceUID, within, last)
		case <-tick.C:
		}
		all, err := s.series()
		if err != nil {
			t.Fatal(err)
		}
		last = all
		for _, se := range all {
			if se.SeriesInstanceUID == seriesInstanceUID && se.IsStable {
				return se
			}
		}
	}
}

// Changes returns Orthanc's changes after sequence number since (0: from the first), at most
// 100, with the last sequence number to pass as since next time and whether there are no
// more.
func (s *Server) Changes(t testing.TB, since int) (changes []Change, last int, done bool) {
	t.Helper()
	var ans struct {
		Changes []Change
		Last    int
		Done    bool
	}
	if err := s.getJSON(fmt.Sprintf("/changes?since=%d&limit=100", since), &ans); err != nil {
		t.Fatal(err)
	}
	return ans.Changes, ans.Last, ans.Done
}
