package dicomweb

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"voxpipe/internal/fullfs"
)

const seriesPath = "/dicom-web/studies/1.2.3/series/1.2.3.4"

// serveSeries answers the series' retrieve with parts under contentType (boundary b).
func serveSeries(t *testing.T, contentType, partType string, parts [][]byte) *http.ServeMux {
	t.Helper()
	body := multipartBody(t, "b0undary", partType, parts)
	mux := http.NewServeMux()
	mux.HandleFunc(seriesPath, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != retrieveAccept {
			http.Error(w, "Accept "+r.Header.Get("Accept"), http.StatusNotAcceptable)
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.Write(body)
	})
	return mux
}

// checkFiles fails unless paths hold want, in order, and dir holds nothing else.
func checkFiles(t *testing.T, dir string, paths []string, want [][]byte) {
	t.Helper()
	if len(paths) != len(want) {
		t.Fatalf("%d files, want %d", len(paths), len(want))
	}
	for i, p := range paths {
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, want[i]) {
			t.Errorf("file %d (%s): %d bytes, err %v; want %d bytes equal", i, p, len(b), err, len(want[i]))
		}
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, filepath.Join(dir, e.Name()))
	}
	if !slices.Equal(names, paths) {
		t.Errorf("folder holds %q, want only %q", names, paths)
	}
}

func TestRetrieveSeriesStreamsParts(t *testing.T) {
	t.Parallel()
	parts := instances(3)
	for name, ct := range map[string]string{
		"quoted":            `multipart/related; type="application/dicom"; boundary="b0undary"`,
		"unquoted":          `multipart/related; type=application/dicom; boundary=b0undary`,
		"spaces and case":   `Multipart/Related ;Boundary=b0undary ; TYPE="application/dicom"`,
		"transfer syntax":   `multipart/related; type="application/dicom"; transfer-syntax=1.2.840.10008.1.2.1; boundary=b0undary`,
		"no type parameter": `multipart/related; boundary=b0undary`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := server(t, serveSeries(t, ct, `application/dicom; transfer-syntax=1.2.840.10008.1.2.4.70`, parts).ServeHTTP)
			c, _ := testClient(t, srv.URL+"/dicom-web", nil)
			dir := filepath.Join(t.TempDir(), "in")
			paths, err := c.RetrieveSeries(context.Background(), "1.2.3", "1.2.3.4", dir)
			if err != nil {
				t.Fatal(err)
			}
			checkFiles(t, dir, paths, parts)
		})
	}
}

func TestRetrieveSeriesMalformed(t *testing.T) {
	t.Parallel()
	ok := `multipart/related; type="application/dicom"; boundary=b0undary`
	for _, tc := range []struct{ name, contentType, partType string }{
		{"not dicom part", ok, "application/octet-stream"},
		{"part without type", ok, ""},
		{"no boundary", `multipart/related; type="application/dicom"`, "application/dicom"},
		{"other boundary", `multipart/related; type="application/dicom"; boundary=other`, "application/dicom"},
		{"not multipart", "application/dicom", "application/dicom"},
		{"unterminated quote", `multipart/related; boundary="b0undary`, "application/dicom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := server(t, serveSeries(t, tc.contentType, tc.partType, instances(3)).ServeHTTP)
			c, rec := testClient(t, srv.URL+"/dicom-web", nil)
			dir := t.TempDir()
			paths, err := c.RetrieveSeries(context.Background(), "1.2.3", "1.2.3.4", dir)
			if !errors.Is(err, ErrMalformed) || paths != nil {
				t.Errorf("paths %q, err %v; want ErrMalformed", paths, err)
			}
			checkFiles(t, dir, nil, nil)
			if n := len(rec.requests()); n != 1 {
				t.Errorf("%d attempts, want 1", n)
			}
		})
	}
}

func TestRetrieveSeriesBrokenStreamRetriedWhole(t *testing.T) {
	t.Parallel()
	parts := instances(4)
	body := multipartBody(t, "b0undary", "application/dicom", parts)
	h, calls := countHandler(func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", `multipart/related; type="application/dicom"; boundary=b0undary`)
		if n == 1 { // two parts and a half, then the connection breaks
			w.Write(body[:len(parts[0])+len(parts[1])+len(parts[2])/2+300])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		w.Write(body)
	})
	srv := server(t, h)
	c, rec := testClient(t, srv.URL+"/dicom-web", nil)
	dir := t.TempDir()
	paths, err := c.RetrieveSeries(context.Background(), "1.2.3", "1.2.3.4", dir)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, dir, paths, parts)
	reqs := rec.requests()
	if calls() != 2 || len(reqs) != 2 || reqs[0].Class != ClassStream || reqs[0].Status != 200 || reqs[1].Class != ClassNone {
		t.Errorf("%d calls, attempts %+v; want a broken stream, then success", calls(), reqs)
	}
	if len(rec.waits()) != 1 {
		t.Errorf("waits %v, want one backoff", rec.waits())
	}
}

func TestRetrieveSeriesKeepsNothingOnError(t *testing.T) {
	t.Parallel()
	parts := instances(4)
	ct := `multipart/related; type="application/dicom"; boundary=b0undary`
	srv := server(t, serveSeries(t, ct, "application/dicom", parts).ServeHTTP)
	t.Run("name taken", func(t *testing.T) {
		t.Parallel()
		c, rec := testClient(t, srv.URL+"/dicom-web", nil)
		dir := t.TempDir()
		taken := filepath.Join(dir, "000003.dcm")
		os.WriteFile(taken, []byte("mine"), 0o644)
		paths, err := c.RetrieveSeries(context.Background(), "1.2.3", "1.2.3.4", dir)
		if err == nil || paths != nil || !strings.Contains(err.Error(), "000003.dcm") {
			t.Errorf("paths %q, err %v; want an error naming 000003.dcm", paths, err)
		}
		checkFiles(t, dir, []string{taken}, [][]byte{[]byte("mine")})
		if reqs := rec.requests(); len(reqs) != 1 || reqs[0].Class != ClassLocal {
			t.Errorf("attempts %+v, want one, local", reqs)
		}
	})
	t.Run("disk full", func(t *testing.T) {
		t.Parallel()
		c, _ := testClient(t, srv.URL+"/dicom-web", nil)
		dir := fullfs.New(t)
		paths, err := c.RetrieveSeries(context.Background(), "1.2.3", "1.2.3.4", dir)
		if err == nil || paths != nil {
			t.Errorf("paths %q, err %v; want an error", paths, err)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 || entries[0].Name() != ".filler" {
			t.Errorf("left %v on a full disk", entries)
		}
	})
	t.Run("unknown series", func(t *testing.T) {
		t.Parallel()
		c, _ := testClient(t, srv.URL+"/dicom-web", nil)
		dir := t.TempDir()
		_, err := c.RetrieveSeries(context.Background(), "1.2.3", "1.2.3.5", dir)
		var se *StatusError
		if !errors.Is(err, ErrNotFound) || !errors.As(err, &se) || se.Code != 404 {
			t.Errorf("err %v, want ErrNotFound with a 404 StatusError", err)
		}
		checkFiles(t, dir, nil, nil)
	})
}

func TestParseMediaType(t *testing.T) {
	t.Parallel()
	mt, p, err := parseMediaType(`multipart/related; type="application/dicom"; boundary="a \"b\";c"; x=y/z`)
	if err != nil || mt != "multipart/related" || p["type"] != "application/dicom" || p["boundary"] != `a "b";c` || p["x"] != "y/z" {
		t.Errorf("got %q %q %v", mt, p, err)
	}
	for _, bad := range []string{"", "dicom", "a/b; novalue", `a/b; x="open`} {
		if _, _, err := parseMediaType(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestRetrieveSeriesAlwaysBroken(t *testing.T) {
	t.Parallel()
	body := multipartBody(t, "b0undary", "application/dicom", instances(3))
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", `multipart/related; type="application/dicom"; boundary=b0undary`)
		w.Write(body[:len(body)-2000])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	})
	c, rec := testClient(t, srv.URL+"/dicom-web", func(o *Options) { o.Retries = 2 })
	dir := t.TempDir()
	paths, err := c.RetrieveSeries(context.Background(), "1.2.3", "1.2.3.4", dir)
	if !errors.Is(err, ErrUnreachable) || errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "broke off") || paths != nil {
		t.Errorf("paths %q, err %v; want ErrUnreachable, the answer broke off", paths, err)
	}
	checkFiles(t, dir, nil, nil)
	if n := len(rec.requests()); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}
}

func TestRetrieveSeriesCanceledMidway(t *testing.T) {
	t.Parallel()
	parts := instances(3)
	body := multipartBody(t, "b0undary", "application/dicom", parts)
	ctx, cancel := context.WithCancel(context.Background())
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", `multipart/related; type="application/dicom"; boundary=b0undary`)
		w.Write(body[:len(parts[0])+len(parts[1])+400]) // two whole parts
		w.(http.Flusher).Flush()
		cancel()
		<-r.Context().Done()
	})
	c, rec := testClient(t, srv.URL+"/dicom-web", nil)
	dir := t.TempDir()
	paths, err := c.RetrieveSeries(ctx, "1.2.3", "1.2.3.4", dir)
	if !errors.Is(err, context.Canceled) || paths != nil {
		t.Errorf("paths %q, err %v; want context.Canceled", paths, err)
	}
	checkFiles(t, dir, nil, nil)
	if reqs := rec.requests(); len(reqs) != 1 || reqs[0].Class != ClassCanceled {
		t.Errorf("attempts %+v, want one, canceled", reqs)
	}
}
