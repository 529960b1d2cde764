package dicomweb

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	password = "s3cret-Pa55"
	token    = "tok-0123456789abcdef"
)

func TestAuthHeaders(t *testing.T) {
	t.Parallel()
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("voxpipe:"+password))
	for _, tc := range []struct {
		name string
		auth Auth
		want string
	}{
		{"basic", Auth{User: "voxpipe", Password: password}, basic},
		{"bearer", Auth{Token: token}, "Bearer " + token},
		{"none", Auth{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := server(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != tc.want {
					w.Header().Set("WWW-Authenticate", `Basic realm="Orthanc Secure Area"`)
					w.WriteHeader(401)
					return
				}
				w.Write([]byte("[]"))
			})
			c, _ := testClient(t, srv.URL, func(o *Options) { o.Auth = tc.auth })
			if _, err := c.SearchSeries(context.Background(), SeriesQuery{}); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestSecretsNeverInErrors has servers refuse the credentials and echo them back, in every
// way a message could carry them.
func TestSecretsNeverInErrors(t *testing.T) {
	t.Parallel()
	echo := func(w http.ResponseWriter, r *http.Request, code int) {
		w.Header().Set("WWW-Authenticate", `Basic realm="Orthanc Secure Area"`)
		w.WriteHeader(code)
		u, p, _ := r.BasicAuth()
		w.Write([]byte("you sent " + r.Header.Get("Authorization") + " user " + u + " password " + p))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/401/", func(w http.ResponseWriter, r *http.Request) { echo(w, r, 401) })
	mux.HandleFunc("/403/", func(w http.ResponseWriter, r *http.Request) { echo(w, r, 403) })
	mux.HandleFunc("/500/", func(w http.ResponseWriter, r *http.Request) { echo(w, r, 500) })
	mux.HandleFunc("/400/", func(w http.ResponseWriter, r *http.Request) { echo(w, r, 400) })
	srv := server(t, mux.ServeHTTP)
	for _, path := range []string{"/401", "/403", "/500", "/400"} {
		for _, auth := range []Auth{{User: "voxpipe", Password: password}, {Token: token}} {
			rec := &recorder{}
			c, err := New(Options{URL: srv.URL + path, Auth: auth, Sleep: rec.sleep, Observe: rec.observe})
			if err != nil {
				t.Fatal(err)
			}
			_, err1 := c.SearchSeries(context.Background(), SeriesQuery{})
			_, err2 := c.RetrieveSeries(context.Background(), "1.2", "1.3", t.TempDir())
			_, err3 := c.Store(context.Background(), writeInstances(t, instances(1))...)
			for _, err := range []error{err1, err2, err3} {
				if err == nil {
					t.Fatalf("%s: no error", path)
				}
				if (path == "/401" || path == "/403") != errors.Is(err, ErrUnauthorized) {
					t.Errorf("%s: %v", path, err)
				}
				checkNoSecret(t, err.Error())
			}
			for _, r := range rec.requests() {
				checkNoSecret(t, r.URL)
			}
		}
	}
}

func checkNoSecret(t *testing.T, s string) {
	t.Helper()
	basic := base64.StdEncoding.EncodeToString([]byte("voxpipe:" + password))
	for _, secret := range []string{password, token, basic} {
		if strings.Contains(s, secret) {
			t.Errorf("%q shows a secret", s)
		}
	}
}

func TestUnauthorizedMessage(t *testing.T) {
	t.Parallel()
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="Orthanc Secure Area"`)
		w.WriteHeader(401)
	})
	c, _ := testClient(t, srv.URL, func(o *Options) { o.Auth = Auth{User: "x", Password: password} })
	_, err := c.SearchSeries(context.Background(), SeriesQuery{})
	for _, want := range []string{"refused the credentials", "--user", "--password-file", "VOXPIPE_PACS_PASSWORD", "--token-file", "401"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v lacks %q", err, want)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]Options{
		"userinfo":          {URL: "http://voxpipe:" + password + "@127.0.0.1:8042/dicom-web"},
		"user only":         {URL: "https://voxpipe@pacs/dicom-web"},
		"query":             {URL: "http://pacs/dicom-web?token=" + token},
		"scheme":            {URL: "ftp://pacs/dicom-web"},
		"no host":           {URL: "http:///dicom-web"},
		"bad escape":        {URL: "http://pacs/%zz" + password},
		"both auths":        {URL: "http://pacs", Auth: Auth{User: "u", Password: password, Token: token}},
		"password only":     {URL: "http://pacs", Auth: Auth{Password: password}},
		"token line break":  {URL: "http://pacs", Auth: Auth{Token: token + "\r\nX: y"}},
		"missing CA file":   {URL: "https://pacs", CAFile: "/nonexistent/ca.pem"},
		"CA with Transport": {URL: "https://pacs", CAFile: "ca.pem", Transport: http.DefaultTransport},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			checkNoSecret(t, err.Error())
			if !strings.HasPrefix(err.Error(), "dicomweb: ") {
				t.Errorf("%s: %q lacks the prefix", name, err)
			}
		}
	}
	c, err := New(Options{URL: "http://pacs:8042/dicom-web/"})
	if err != nil || c.endpoint(nil, "series") != "http://pacs:8042/dicom-web/series" {
		t.Errorf("trailing slash: %v", err)
	}
}

func TestTLS(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("[]"))
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	c, _ := testClient(t, srv.URL, func(o *Options) { o.CAFile = ca })
	if _, err := c.SearchSeries(context.Background(), SeriesQuery{}); err != nil {
		t.Errorf("with the CA file: %v", err)
	}
	c, rec := testClient(t, srv.URL, nil)
	_, err := c.SearchSeries(context.Background(), SeriesQuery{})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), srv.URL) || !strings.Contains(err.Error(), "--ca-file") {
		t.Errorf("without the CA file: %v; want ErrUnreachable naming the URL and --ca-file", err)
	}
	if reqs := rec.requests(); len(reqs) != 1 || reqs[0].Class != ClassTLS {
		t.Errorf("attempts %+v, want one TLS failure (never retried)", reqs)
	}
	notPEM := filepath.Join(dir, "not.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o644)
	if _, err := New(Options{URL: srv.URL, CAFile: notPEM}); err == nil {
		t.Error("a CA file without certificates was accepted")
	}
}
