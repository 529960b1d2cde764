package dicomweb

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRetryAfterServerError(t *testing.T) {
	t.Parallel()
	h, calls := countHandler(func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			http.Error(w, "try later", 500)
			return
		}
		w.Write([]byte("[]"))
	})
	srv := server(t, h)
	c, rec := testClient(t, srv.URL, func(o *Options) { o.Backoff = time.Second })
	if _, err := c.SearchSeries(context.Background(), SeriesQuery{}); err != nil {
		t.Fatal(err)
	}
	waits := rec.waits()
	if calls() != 2 || len(waits) != 1 || waits[0] < 0 || waits[0] > time.Second {
		t.Errorf("%d calls, waits %v; want 2 calls and one wait in [0, 1s]", calls(), waits)
	}
	reqs := rec.requests()
	if len(reqs) != 2 || reqs[0].Status != 500 || reqs[0].Class != ClassStatus || reqs[0].Attempt != 1 ||
		reqs[1].Status != 200 || reqs[1].Class != ClassNone || reqs[1].Attempt != 2 || reqs[1].Kind != QIDO {
		t.Errorf("attempts %+v", reqs)
	}
}

func TestRetryAfterHeader(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		header string
		want   time.Duration
	}{
		{"7", 7 * time.Second},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{"86400", MaxRetryAfter},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
	} {
		t.Run(tc.header, func(t *testing.T) {
			t.Parallel()
			h, calls := countHandler(func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 1 {
					w.Header().Set("Retry-After", tc.header)
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				w.Write([]byte("[]"))
			})
			srv := server(t, h)
			c, rec := testClient(t, srv.URL, func(o *Options) { o.Now = func() time.Time { return now } })
			if _, err := c.SearchSeries(context.Background(), SeriesQuery{}); err != nil {
				t.Fatal(err)
			}
			if w := rec.waits(); calls() != 2 || len(w) != 1 || w[0] != tc.want {
				t.Errorf("%d calls, waits %v; want 2 and [%v]", calls(), w, tc.want)
			}
		})
	}
}

func TestBackoffBounds(t *testing.T) {
	t.Parallel()
	c, _ := testClient(t, "http://127.0.0.1:1", func(o *Options) { o.Backoff = 100 * time.Millisecond })
	for attempt := 1; attempt <= 70; attempt++ {
		ceiling := min(MaxBackoff, 100*time.Millisecond<<min(attempt-1, 20))
		for range 20 {
			if d := c.backoffFor(attempt); d < 0 || d > ceiling {
				t.Fatalf("attempt %d: wait %v outside [0, %v]", attempt, d, ceiling)
			}
		}
	}
}

func TestClientErrorsNotRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code     int
		sentinel error
	}{{400, nil}, {401, ErrUnauthorized}, {403, ErrUnauthorized}, {404, ErrNotFound}, {406, nil}, {409, nil}} {
		t.Run(http.StatusText(tc.code), func(t *testing.T) {
			t.Parallel()
			h, calls := countHandler(func(_ int, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "no\n\tway", tc.code)
			})
			srv := server(t, h)
			c, rec := testClient(t, srv.URL, nil)
			_, err := c.SearchSeries(context.Background(), SeriesQuery{})
			var se *StatusError
			if !errors.As(err, &se) || se.Code != tc.code || se.Body != "no way" || se.Method != "GET" ||
				!strings.HasPrefix(se.URL, srv.URL+"/series?") {
				t.Errorf("err %v (%#v), want a StatusError %d", err, se, tc.code)
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Errorf("err %v, want %v", err, tc.sentinel)
			}
			if !strings.HasPrefix(err.Error(), "dicomweb: ") {
				t.Errorf("%q lacks the package prefix", err)
			}
			if calls() != 1 || len(rec.waits()) != 0 {
				t.Errorf("%d calls, waits %v: retried", calls(), rec.waits())
			}
		})
	}
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/dicom-web"
	l.Close()
	c, rec := testClient(t, url, func(o *Options) { o.Retries = 2 })
	_, err = c.RetrieveSeries(context.Background(), "1.2.3", "1.2.3.4", t.TempDir())
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), url+"/studies/1.2.3/series/1.2.3.4") ||
		!strings.Contains(err.Error(), "3 attempts") {
		t.Errorf("err %v, want ErrUnreachable naming the URL after 3 attempts", err)
	}
	reqs := rec.requests()
	if len(reqs) != 3 || len(rec.waits()) != 2 {
		t.Fatalf("attempts %+v, waits %v; want 3 and 2", reqs, rec.waits())
	}
	for i, r := range reqs {
		if r.Kind != WADO || r.Status != 0 || r.Class != ClassConnect || r.Attempt != i+1 {
			t.Errorf("attempt %d: %+v", i, r)
		}
	}
}

func TestTimeouts(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	mux := http.NewServeMux()
	mux.HandleFunc("/headers/series", func(w http.ResponseWriter, r *http.Request) {
		select { // headers never come
		case <-r.Context().Done():
		case <-release:
		}
	})
	mux.HandleFunc("/body/studies/1.2/series/1.3", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", `multipart/related; type="application/dicom"; boundary=b`)
		w.Write([]byte("--b\r\nContent-Type: application/dicom\r\n\r\nDICM..."))
		w.(http.Flusher).Flush()
		select { // then the body stalls
		case <-r.Context().Done():
		case <-release:
		}
	})
	srv := server(t, mux.ServeHTTP)
	const timeout = 200 * time.Millisecond
	for _, tc := range []struct {
		name string
		run  func(c *Client) error
	}{
		{"headers", func(c *Client) error {
			_, err := c.SearchSeries(context.Background(), SeriesQuery{})
			return err
		}},
		{"body", func(c *Client) error {
			_, err := c.RetrieveSeries(context.Background(), "1.2", "1.3", t.TempDir())
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, rec := testClient(t, srv.URL+"/"+tc.name, func(o *Options) {
				o.Timeout, o.Retries = timeout, 1
			})
			start := time.Now()
			err := tc.run(c)
			took := time.Since(start)
			if !errors.Is(err, ErrUnreachable) || errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "200ms") {
				t.Errorf("err %v, want ErrUnreachable after a 200ms timeout", err)
			}
			if took < 2*timeout || took > 2*timeout+time.Second {
				t.Errorf("took %v, want two attempts of %v", took, timeout)
			}
			for _, r := range rec.requests() {
				if r.Class != ClassTimeout || r.Duration < timeout {
					t.Errorf("attempt %+v, want a timeout", r)
				}
			}
		})
	}
}

func TestContextCanceled(t *testing.T) {
	t.Parallel()
	srv := server(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "busy", http.StatusServiceUnavailable) })
	ctx, cancel := context.WithCancel(context.Background())
	c, rec := testClient(t, srv.URL, func(o *Options) {
		o.Observe = func(Request) { cancel() }
	})
	_, err := c.SearchSeries(ctx, SeriesQuery{})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnreachable) {
		t.Errorf("err %v, want context.Canceled", err)
	}
	if len(rec.waits()) != 0 {
		t.Errorf("waited %v after the context ended", rec.waits())
	}
}

func TestObservePerAttempt(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /dw/series", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("[]")) })
	mux.HandleFunc("POST /dw/studies", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(stowAnswer([]string{"1.9"}, nil)))
	})
	srv := server(t, mux.ServeHTTP)
	c, rec := testClient(t, srv.URL+"/dw", nil)
	ctx := context.Background()
	c.SearchSeries(ctx, SeriesQuery{Modality: "MR"})
	c.RetrieveSeries(ctx, "1.2", "1.3", t.TempDir())
	c.Store(ctx, writeInstances(t, instances(1))...)
	want := []Request{
		{Kind: QIDO, Method: "GET", URL: srv.URL + "/dw/series?Modality=MR&limit=100&offset=0", Status: 200, Attempt: 1, Class: ClassNone},
		{Kind: WADO, Method: "GET", URL: srv.URL + "/dw/studies/1.2/series/1.3", Status: 404, Attempt: 1, Class: ClassStatus},
		{Kind: STOW, Method: "POST", URL: srv.URL + "/dw/studies", Status: 200, Attempt: 1, Class: ClassNone},
	}
	got := rec.requests()
	if len(got) != len(want) {
		t.Fatalf("%d attempts observed, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].Duration <= 0 {
			t.Errorf("attempt %d: duration %v", i, got[i].Duration)
		}
		got[i].Duration = 0
		if got[i] != want[i] {
			t.Errorf("attempt %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
