package dicomweb

import (
	"bytes"
	"context"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"sync"
	"testing"
	"time"
)

// recorder keeps what a client's injected Sleep and Observe saw.
type recorder struct {
	mu     sync.Mutex
	sleeps []time.Duration
	reqs   []Request
}

func (r *recorder) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.sleeps = append(r.sleeps, d)
	r.mu.Unlock()
	return ctx.Err()
}

func (r *recorder) observe(q Request) {
	r.mu.Lock()
	r.reqs = append(r.reqs, q)
	r.mu.Unlock()
}

func (r *recorder) waits() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.sleeps...)
}

func (r *recorder) requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

// testClient is a client of url whose waits and attempts rec records; edit changes the
// options before New.
func testClient(t *testing.T, url string, edit func(*Options)) (*Client, *recorder) {
	t.Helper()
	rec := &recorder{}
	o := Options{URL: url, Timeout: 2 * time.Second, Sleep: rec.sleep, Observe: rec.observe}
	if edit != nil {
		edit(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c, rec
}

// server is an httptest server closed with the test.
func server(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// instances are n fake DICOM files of different lengths and bytes.
func instances(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		b := bytes.Repeat([]byte{byte(i + 1)}, 1000+i*4097)
		copy(b[128:], "DICM")
		out[i] = b
	}
	return out
}

// multipartBody writes parts as multipart/related with boundary, each with partType.
func multipartBody(t *testing.T, boundary, partType string, parts [][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	if err := w.SetBoundary(boundary); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		if partType != "" {
			h.Set("Content-Type", partType)
		}
		h.Set("Content-Length", fmt.Sprint(len(p)))
		pw, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		pw.Write(p)
	}
	w.Close()
	return buf.Bytes()
}

// countHandler counts requests and serves them with h, given the 1-based request number.
func countHandler(h func(n int, w http.ResponseWriter, r *http.Request)) (http.HandlerFunc, func() int) {
	var mu sync.Mutex
	n := 0
	return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			n++
			k := n
			mu.Unlock()
			h(k, w, r)
		}, func() int {
			mu.Lock()
			defer mu.Unlock()
			return n
		}
}
