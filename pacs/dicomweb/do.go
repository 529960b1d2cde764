package dicomweb

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// call is one logical request; do runs its attempts.
type call struct {
	kind        Kind
	method      string
	url         string
	show        string // the URL in messages and Observe, when shorter than url (no includefield)
	accept      string
	contentType string
	// body makes a fresh request body and its length for each attempt; nil: none.
	body func() (io.ReadCloser, int64, error)
	// answer reports whether a status goes to handle (default: 2xx); others are errors.
	answer func(code int) bool
	// handle reads an answer; the body stalls are watched. On error, the attempt is retried
	// when the body broke off or stalled, and fails otherwise.
	handle func(resp *http.Response) error
}

// shown is the URL to name in messages.
func (cl *call) shown() string {
	if cl.show != "" {
		return cl.show
	}
	return cl.url
}

// outcome is how one attempt ended.
type outcome struct {
	err        error
	class      ErrorClass
	status     int
	retry      bool
	retryAfter time.Duration // -1: none given
}

// errStalled is the cause of an attempt's context when the watchdog fired.
var errStalled = errors.New("no progress within the timeout")

// do runs the call's attempts until one succeeds, one fails for good or the retries run out.
func (c *Client) do(ctx context.Context, cl *call) error {
	for attempt := 1; ; attempt++ {
		start := time.Now()
		o := c.attempt(ctx, cl)
		if c.observe != nil {
			c.observe(Request{Kind: cl.kind, Method: cl.method, URL: cl.shown(), Status: o.status,
				Duration: time.Since(start), Attempt: attempt, Class: o.class})
		}
		if o.err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("dicomweb: %s %s: %w", cl.method, cl.shown(), context.Cause(ctx))
		}
		if !o.retry || attempt > c.retries {
			return c.final(cl, o, attempt)
		}
		wait := o.retryAfter
		if wait < 0 {
			wait = c.backoffFor(attempt)
		}
		if err := c.sleep(ctx, wait); err != nil {
			return fmt.Errorf("dicomweb: %s %s: waiting to retry: %w", cl.method, cl.shown(), err)
		}
	}
}

// final is the error returned when the last attempt failed.
func (c *Client) final(cl *call, o outcome, attempts int) error {
	var se *StatusError
	switch {
	case errors.As(o.err, &se) && o.class == ClassStatus:
		return statusFailure(se, attempts)
	case o.class == ClassConnect || o.class == ClassTLS || o.class == ClassTimeout || o.class == ClassStream:
		return fmt.Errorf("%w: %s %s (%s): %w", ErrUnreachable, cl.method, cl.shown(), plural(attempts, "attempt"), o.err)
	}
	return o.err
}

// backoffFor is the full-jitter wait after the attempt'th failure: uniform in
// [0, min(MaxBackoff, Backoff·2^(attempt-1))].
func (c *Client) backoffFor(attempt int) time.Duration {
	ceiling := MaxBackoff
	if attempt <= 30 {
		if d := c.backoff << (attempt - 1); d > 0 && d < ceiling {
			ceiling = d
		}
	}
	return rand.N(ceiling + 1)
}

// attempt sends the request once and handles its answer.
func (c *Client) attempt(parent context.Context, cl *call) outcome {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	wd := newWatchdog(c.timeout, cancel)
	defer wd.stop()
	req, err := http.NewRequestWithContext(ctx, cl.method, cl.url, nil)
	if err != nil {
		return outcome{err: fmt.Errorf("dicomweb: %s %s: %w", cl.method, cl.shown(), err), class: ClassLocal}
	}
	var body *watchedBody
	if cl.body != nil {
		rc, n, err := cl.body()
		if err != nil {
			return outcome{err: err, class: ClassLocal}
		}
		body = &watchedBody{rc: rc, wd: wd}
		req.Body, req.ContentLength = body, n
		req.Header.Set("Content-Type", cl.contentType)
	}
	if cl.accept != "" {
		req.Header.Set("Accept", cl.accept)
	}
	c.authorize(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		if body != nil && body.failed() != nil { // our file failed, not the network
			return outcome{err: body.failed(), class: ClassLocal}
		}
		return c.transportFailure(ctx, err)
	}
	wd.kick()
	rb := &watchedBody{rc: resp.Body, wd: wd}
	resp.Body = rb
	defer rb.Close()
	o := outcome{status: resp.StatusCode, retryAfter: -1}
	ok := cl.answer == nil && resp.StatusCode/100 == 2 || cl.answer != nil && cl.answer(resp.StatusCode)
	if !ok {
		se := &StatusError{Method: cl.method, URL: cl.shown(), Code: resp.StatusCode}
		b, _ := io.ReadAll(io.LimitReader(rb, 4*snippetLen))
		se.Body = snippet(b, c.secrets)
		o.err, o.class, o.retry = se, ClassStatus, se.retryable()
		if o.retry {
			o.retryAfter = c.retryAfter(resp.Header.Get("Retry-After"))
		}
		return o
	}
	if o.err = cl.handle(resp); o.err == nil {
		// Drain what a parser left (a trailing newline) so that the connection is reused.
		io.Copy(io.Discard, io.LimitReader(rb, 64<<10))
		o.class = ClassNone
		return o
	}
	return c.handleFailure(ctx, rb, o)
}

// handleFailure classes an error that handle returned.
func (c *Client) handleFailure(ctx context.Context, rb *watchedBody, o outcome) outcome {
	var se *StatusError
	switch {
	// A body that stalled or broke: the handler's error (a part cut short) says less than
	// the body's own.
	case ctx.Err() != nil && context.Cause(ctx) == errStalled:
		o.class, o.retry = ClassTimeout, true
		o.err = fmt.Errorf("the answer stalled for %v", c.timeout)
	case ctx.Err() != nil:
		o.class = ClassCanceled
	case rb.failed() != nil:
		o.class, o.retry = ClassStream, true
		o.err = fmt.Errorf("the answer broke off: %w", rb.failed())
	case errors.Is(o.err, ErrMalformed):
		o.class = ClassMalformed
	case errors.Is(o.err, ErrStoreFailed):
		o.class = ClassStore
	case errors.As(o.err, &se):
		o.class, o.retry = ClassStatus, se.retryable()
	default:
		o.class = ClassLocal
	}
	return o
}

// transportFailure classes an error from sending the request.
func (c *Client) transportFailure(ctx context.Context, err error) outcome {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text repeats the URL
	}
	o := outcome{err: err, retryAfter: -1, retry: true, class: ClassConnect}
	var uae x509.UnknownAuthorityError
	var he x509.HostnameError
	var cve *tls.CertificateVerificationError
	var rhe tls.RecordHeaderError
	var ne net.Error
	switch {
	case ctx.Err() != nil && context.Cause(ctx) == errStalled:
		o.class = ClassTimeout
		o.err = fmt.Errorf("no answer within %v", c.timeout)
	case ctx.Err() != nil:
		o.class, o.retry = ClassCanceled, false
	case errors.As(err, &uae) || errors.As(err, &he) || errors.As(err, &cve):
		// Retrying will not make the certificate trusted.
		o.class, o.retry = ClassTLS, false
		o.err = fmt.Errorf("%w (give the server's CA with --ca-file)", err)
	case errors.As(err, &rhe):
		o.class = ClassTLS
	case errors.As(err, &ne) && ne.Timeout():
		o.class = ClassTimeout
	}
	return o
}

// retryAfter reads a Retry-After header: seconds or an HTTP date; -1 when absent or unusable.
func (c *Client) retryAfter(h string) time.Duration {
	if h == "" {
		return -1
	}
	var d time.Duration
	if s, err := strconv.Atoi(h); err == nil {
		d = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = t.Sub(c.now())
	} else {
		return -1
	}
	return min(max(d, 0), MaxRetryAfter)
}

// watchdog cancels an attempt when nothing moves for its timeout.
type watchdog struct {
	mu    sync.Mutex
	t     *time.Timer
	d     time.Duration
	fired bool
}

func newWatchdog(d time.Duration, cancel context.CancelCauseFunc) *watchdog {
	w := &watchdog{d: d}
	w.t = time.AfterFunc(d, func() {
		w.mu.Lock()
		w.fired = true
		w.mu.Unlock()
		cancel(errStalled)
	})
	return w
}

// kick restarts the countdown: something moved.
func (w *watchdog) kick() {
	w.mu.Lock()
	if !w.fired {
		w.t.Reset(w.d)
	}
	w.mu.Unlock()
}

func (w *watchdog) stop() { w.t.Stop() }

// watchedBody kicks the watchdog on every read that moves bytes and keeps the first read error
// (other than EOF), to tell a broken stream from a malformed one.
// A request body is read by the transport's goroutine: failed is safe to call meanwhile.
type watchedBody struct {
	rc  io.ReadCloser
	wd  *watchdog
	mu  sync.Mutex
	err error
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.wd.kick()
	}
	if err != nil && err != io.EOF {
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return n, err
}

// failed is the first read error other than EOF, or nil.
func (b *watchedBody) failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *watchedBody) Close() error { return b.rc.Close() }

// plural is "1 attempt", "2 attempts".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
