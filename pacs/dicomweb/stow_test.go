package dicomweb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeInstances writes parts to files and returns their paths.
func writeInstances(t *testing.T, parts [][]byte) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for i, p := range parts {
		path := filepath.Join(dir, fmt.Sprintf("i%d.dcm", i))
		if err := os.WriteFile(path, p, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	return paths
}

// readStowRequest checks a STOW-RS request and returns its parts.
func readStowRequest(r *http.Request) ([][]byte, error) {
	if r.Method != http.MethodPost || r.URL.Path != "/dicom-web/studies" {
		return nil, fmt.Errorf("%s %s", r.Method, r.URL.Path)
	}
	if r.ContentLength <= 0 || r.Header.Get("Accept") != "application/dicom+json" {
		return nil, fmt.Errorf("Content-Length %d, Accept %q", r.ContentLength, r.Header.Get("Accept"))
	}
	mt, p, err := parseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/related" || p["type"] != "application/dicom" {
		return nil, fmt.Errorf("Content-Type %q", r.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(r.Body, p["boundary"])
	var parts [][]byte
	for {
		part, err := mr.NextRawPart()
		if err == io.EOF {
			return parts, nil
		}
		if err != nil {
			return nil, err
		}
		if part.Header.Get("Content-Type") != "application/dicom" {
			return nil, fmt.Errorf("part type %q", part.Header.Get("Content-Type"))
		}
		b, err := io.ReadAll(part)
		if err != nil {
			return nil, err
		}
		parts = append(parts, b)
	}
}

// stowAnswer is a STOW-RS answer's DICOM JSON: the referenced and failed SOP instances.
func stowAnswer(referenced []string, failed map[string]int) string {
	item := func(uid string, extra string) string {
		return `{"00081150":{"vr":"UI","Value":["1.2.840.10008.5.1.4.1.1.66.4"]},"00081155":{"vr":"UI","Value":["` +
			uid + `"]}` + extra + `}`
	}
	var refs, fails []string
	for _, u := range referenced {
		refs = append(refs, item(u, `,"00081190":{"vr":"UR","Value":["http://pacs/studies/1/series/2/instances/`+u+`"]}`))
	}
	for u, reason := range failed {
		fails = append(fails, item(u, fmt.Sprintf(`,"00081197":{"vr":"US","Value":[%d]}`, reason)))
	}
	s := `{"00081190":{"vr":"UR","Value":["http://pacs/studies/1"]}`
	if refs != nil {
		s += `,"00081199":{"vr":"SQ","Value":[` + strings.Join(refs, ",") + `]}`
	}
	if fails != nil {
		s += `,"00081198":{"vr":"SQ","Value":[` + strings.Join(fails, ",") + `]}`
	}
	return s + "}"
}

func TestStoreSendsEveryFile(t *testing.T) {
	t.Parallel()
	parts := instances(3)
	parts = append(parts, []byte{}) // an empty file is a part too
	files := writeInstances(t, parts)
	got := make(chan [][]byte, 1)
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		ps, err := readStowRequest(r)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		got <- ps
		w.Header().Set("Content-Type", "application/dicom+json")
		w.Write([]byte(stowAnswer([]string{"1.9.1", "1.9.2", "1.9.3", "1.9.4"}, nil)))
	})
	c, _ := testClient(t, srv.URL+"/dicom-web/", nil)
	res, err := c.Store(context.Background(), files...)
	if err != nil {
		t.Fatal(err)
	}
	sent := <-got
	if len(sent) != len(parts) {
		t.Fatalf("%d parts sent, want %d", len(sent), len(parts))
	}
	for i := range parts {
		if !bytes.Equal(sent[i], parts[i]) {
			t.Errorf("part %d: %d bytes, want %d equal", i, len(sent[i]), len(parts[i]))
		}
	}
	if len(res.Referenced) != 4 || res.Referenced[1].InstanceUID != "1.9.2" || res.Failed != nil ||
		res.RetrieveURL != "http://pacs/studies/1" || !strings.HasSuffix(res.Referenced[0].RetrieveURL, "/1.9.1") ||
		res.Referenced[0].ClassUID != "1.2.840.10008.5.1.4.1.1.66.4" {
		t.Errorf("result %+v", res)
	}
}

func TestStoreFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name              string
		code              int
		body              string
		failed, status    bool   // want ErrStoreFailed, a StatusError
		mention, mention2 string // in the message
	}{
		{"200 with a failure", 200, stowAnswer([]string{"1.9.1"}, map[string]int{"1.9.2": 0xA900}), true, false, "1.9.2", "0xA900 data set does not match SOP class"},
		{"202 with a failure", 202, stowAnswer(nil, map[string]int{"1.9.7": 0x0110}), true, false, "1.9.7", "processing failure"},
		{"400 with a failure", 400, stowAnswer([]string{"1.9.1"}, map[string]int{"1.9.3": 0xC000}), true, true, "1.9.3", "HTTP 400"},
		{"409 all failed", 409, stowAnswer(nil, map[string]int{"1.9.4": 0x0122}), true, true, "1.9.4", "0x0122 SOP class not supported"},
		{"400 without json", 400, "bad request: no DICM", false, true, "HTTP 400", "no DICM"},
		{"415", 415, "", false, true, "HTTP 415", "POST"},
		{"200 not json", 200, "<html>", false, false, "malformed", "POST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := server(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.WriteHeader(tc.code)
				w.Write([]byte(tc.body))
			})
			c, rec := testClient(t, srv.URL+"/dicom-web", nil)
			res, err := c.Store(context.Background(), writeInstances(t, instances(2))...)
			var se *StatusError
			if err == nil || errors.Is(err, ErrStoreFailed) != tc.failed || errors.As(err, &se) != tc.status {
				t.Fatalf("err %v; want ErrStoreFailed %v, StatusError %v", err, tc.failed, tc.status)
			}
			if se != nil && se.Code != tc.code {
				t.Errorf("status %d, want %d", se.Code, tc.code)
			}
			if tc.failed && len(res.Failed) != 1 {
				t.Errorf("result %+v, want one failed", res)
			}
			for _, m := range []string{tc.mention, tc.mention2} {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("%q does not mention %q", err, m)
				}
			}
			if n := len(rec.requests()); n != 1 {
				t.Errorf("%d attempts, want 1", n)
			}
		})
	}
}

func TestStoreLocalFiles(t *testing.T) {
	t.Parallel()
	h, calls := countHandler(func(_ int, w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
	srv := server(t, h)
	c, _ := testClient(t, srv.URL, nil)
	missing := filepath.Join(t.TempDir(), "gone.dcm")
	for name, files := range map[string][]string{"none": nil, "missing": {missing}, "folder": {t.TempDir()}} {
		if _, err := c.Store(context.Background(), files...); err == nil {
			t.Errorf("%s: stored", name)
		}
	}
	if calls() != 0 {
		t.Errorf("%d requests for files that cannot be sent", calls())
	}
	// A file whose length changed after it was measured fails: the body's length would lie.
	files := writeInstances(t, instances(1))
	for _, size := range []int64{500, 2000} {
		lf := &lazyFile{path: files[0], size: size}
		if _, err := io.ReadAll(lf); err == nil || !strings.Contains(err.Error(), "changed size") {
			t.Errorf("a %d-byte file measured as %d read with %v", 1000, size, err)
		}
	}
}

func TestStoreRetriedOn503(t *testing.T) {
	t.Parallel()
	parts := instances(2)
	h, calls := countHandler(func(n int, w http.ResponseWriter, r *http.Request) {
		ps, err := readStowRequest(r)
		if err != nil || len(ps) != 2 || !bytes.Equal(ps[1], parts[1]) {
			http.Error(w, fmt.Sprint("bad request ", err), 400)
			return
		}
		if n == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(stowAnswer([]string{"1.9.1", "1.9.2"}, nil)))
	})
	srv := server(t, h)
	c, rec := testClient(t, srv.URL+"/dicom-web", nil)
	res, err := c.Store(context.Background(), writeInstances(t, parts)...)
	if err != nil || len(res.Referenced) != 2 || calls() != 2 {
		t.Errorf("result %+v, err %v, %d calls; want 2 stored after a retry (the body sent again whole)", res, err, calls())
	}
	if reqs := rec.requests(); len(reqs) != 2 || reqs[0].Kind != STOW || reqs[0].Status != 503 || reqs[0].Class != ClassStatus {
		t.Errorf("attempts %+v", reqs)
	}
}
