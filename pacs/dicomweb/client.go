package dicomweb

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// The defaults of Options' zero values.
const (
	DefaultTimeout = 30 * time.Second
	DefaultRetries = 4
	DefaultBackoff = 500 * time.Millisecond
	// MaxBackoff caps one computed backoff wait.
	MaxBackoff = 30 * time.Second
	// MaxRetryAfter caps a wait the server asks for with Retry-After.
	MaxRetryAfter = 5 * time.Minute
)

// Options configure a Client.
type Options struct {
	URL     string        // DICOMweb root, e.g. http://127.0.0.1:8042/dicom-web (a trailing slash or not)
	Auth    Auth          // Basic (User and Password) or Bearer (Token); zero: none
	CAFile  string        // PEM bundle: when set, the only certificates trusted for https
	Timeout time.Duration // the longest wait for response headers, and the longest a body may stall; 0: 30 s
	Retries int           // further attempts on 5xx, 429 and connection errors; 0: 4, negative: none
	Backoff time.Duration // base of the exponential backoff with full jitter; 0: 500 ms
	Observe func(Request) // called after every attempt (metrics); may be nil

	// For tests. Transport replaces the default transport (then CAFile must be empty); Sleep
	// waits between attempts (default: a timer, cut short by ctx); Now reads the clock for
	// Retry-After dates (default time.Now).
	Transport http.RoundTripper
	Sleep     func(ctx context.Context, d time.Duration) error
	Now       func() time.Time
}

// Auth holds credentials: User and Password for HTTP Basic, or Token for Bearer.
type Auth struct{ User, Password, Token string }

// Kind is the DICOMweb transaction of a request, a label in metrics.
type Kind string

// The request kinds.
const (
	QIDO Kind = "qido" // search
	WADO Kind = "wado" // retrieve
	STOW Kind = "stow" // store
	// REST is Orthanc's own REST API (its /changes feed), beside its DICOMweb root.
	REST Kind = "rest"
)

// ErrorClass says how an attempt failed, a label in metrics.
type ErrorClass string

// The error classes of an attempt.
const (
	ClassNone      ErrorClass = "none"      // it succeeded
	ClassStatus    ErrorClass = "status"    // the server answered an error status
	ClassConnect   ErrorClass = "connect"   // refused, DNS, reset, or another network error before an answer
	ClassTLS       ErrorClass = "tls"       // TLS handshake or certificate
	ClassTimeout   ErrorClass = "timeout"   // no headers, or a body stalled, within Timeout
	ClassStream    ErrorClass = "stream"    // the answer broke off midway
	ClassMalformed ErrorClass = "malformed" // the answer did not parse
	ClassStore     ErrorClass = "store"     // STOW answered failed instances
	ClassLocal     ErrorClass = "local"     // a local file could not be read or written
	ClassCanceled  ErrorClass = "canceled"  // the caller's context ended
)

// Request describes one attempt, for Observe. It holds no credentials.
type Request struct {
	Kind     Kind
	Method   string
	URL      string
	Status   int // 0 when no answer came
	Duration time.Duration
	Attempt  int // 1 for the first
	Class    ErrorClass
}

// Client speaks DICOMweb to one server. It is safe for concurrent use.
type Client struct {
	root    *url.URL // without a trailing slash
	hc      *http.Client
	auth    Auth
	secrets []string // to mask in error bodies
	timeout time.Duration
	retries int
	backoff time.Duration
	observe func(Request)
	sleep   func(context.Context, time.Duration) error
	now     func() time.Time
}

// New checks the options and makes a client. The URL must be http or https, without userinfo
// (credentials go in Auth) and without a query or fragment.
func New(o Options) (*Client, error) {
	root, err := parseRoot(o.URL)
	if err != nil {
		return nil, err
	}
	if o.Auth.Token != "" && (o.Auth.User != "" || o.Auth.Password != "") {
		return nil, errors.New("dicomweb: give a user and password or a token, not both")
	}
	if o.Auth.Password != "" && o.Auth.User == "" {
		return nil, errors.New("dicomweb: a password without a user")
	}
	if strings.ContainsAny(o.Auth.Token, "\r\n\x00") || strings.ContainsAny(o.Auth.User, "\r\n\x00:") {
		return nil, errors.New("dicomweb: the token or user holds a line break, NUL or (user) a colon")
	}
	c := &Client{root: root, auth: o.Auth, timeout: o.Timeout, retries: o.Retries,
		backoff: o.Backoff, observe: o.Observe, sleep: o.Sleep, now: o.Now}
	c.defaults()
	if o.Auth.Password != "" {
		basic := base64.StdEncoding.EncodeToString([]byte(o.Auth.User + ":" + o.Auth.Password))
		c.secrets = append(c.secrets, o.Auth.Password, basic)
	}
	if o.Auth.Token != "" {
		c.secrets = append(c.secrets, o.Auth.Token)
	}
	rt := o.Transport
	if rt == nil {
		if rt, err = transport(o.CAFile); err != nil {
			return nil, err
		}
	} else if o.CAFile != "" {
		return nil, errors.New("dicomweb: CAFile cannot apply to a given Transport")
	}
	c.hc = &http.Client{Transport: rt}
	return c, nil
}

// defaults fills the zero settings.
func (c *Client) defaults() {
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	switch {
	case c.retries == 0:
		c.retries = DefaultRetries
	case c.retries < 0:
		c.retries = 0
	}
	if c.backoff <= 0 {
		c.backoff = DefaultBackoff
	}
	if c.sleep == nil {
		c.sleep = sleepCtx
	}
	if c.now == nil {
		c.now = time.Now
	}
}

// parseRoot checks the DICOMweb root URL.
func parseRoot(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		// url.Parse's message quotes the input, which may hold a password: say less.
		return nil, errors.New("dicomweb: the URL does not parse")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("dicomweb: URL scheme %q: want http or https", u.Scheme)
	case u.User != nil:
		return nil, errors.New("dicomweb: the URL holds a user or password: give credentials with --user and --password-file (or VOXPIPE_PACS_PASSWORD), or --token-file")
	case u.Host == "":
		return nil, errors.New("dicomweb: the URL names no host")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return nil, errors.New("dicomweb: the URL holds a query or fragment: give the DICOMweb root only")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// transport is http.DefaultTransport's clone, trusting only caFile's certificates when given.
func transport(caFile string) (http.RoundTripper, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if caFile == "" {
		return t, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("dicomweb: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("dicomweb: CA file %s holds no PEM certificate", caFile)
	}
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}

// endpoint is the root joined with path segments (each escaped) and a query.
func (c *Client) endpoint(q url.Values, segments ...string) string {
	u := *c.root
	for _, s := range segments {
		u.Path += "/" + s
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// authorize sets the request's credentials.
func (c *Client) authorize(req *http.Request) {
	switch {
	case c.auth.Token != "":
		req.Header.Set("Authorization", "Bearer "+c.auth.Token)
	case c.auth.User != "":
		req.SetBasicAuth(c.auth.User, c.auth.Password)
	}
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
