package dicomweb

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"
)

// The sentinel errors, for errors.Is. Every error the client returns wraps one of them or a
// local cause (a file that cannot be read, a cancelled context).
var (
	// ErrUnauthorized: the server answered 401 or 403.
	ErrUnauthorized = errors.New("dicomweb: the server refused the credentials (give them with --user and --password-file or VOXPIPE_PACS_PASSWORD, or with --token-file)")
	// ErrNotFound: the server answered 404 (an unknown study or series).
	ErrNotFound = errors.New("dicomweb: not found")
	// ErrUnreachable: no answer after the retries: connection refused, DNS, TLS handshake,
	// timeouts, or a connection that broke midway.
	ErrUnreachable = errors.New("dicomweb: server unreachable")
	// ErrMalformed: an answer that does not parse: bad JSON or multipart, a missing boundary, a
	// part that is not application/dicom.
	ErrMalformed = errors.New("dicomweb: malformed answer")
	// ErrStoreFailed: STOW-RS answered that some instances were not stored.
	ErrStoreFailed = errors.New("dicomweb: store failed")
)

// StatusError is an error status the server answered, for errors.As.
type StatusError struct {
	Method string
	URL    string // without userinfo or secrets (New refuses both)
	Code   int
	Body   string // the start of the answer's body, on one line, secrets masked
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s %s: HTTP %d %s", e.Method, e.URL, e.Code, http.StatusText(e.Code))
	if e.Body != "" {
		s += ": " + e.Body
	}
	return s
}

// retryable reports whether the status is worth another attempt: server errors and 429.
func (e *StatusError) retryable() bool {
	return e.Code >= 500 || e.Code == http.StatusTooManyRequests
}

// statusFailure wraps a final status error with the sentinel its code maps to.
func statusFailure(se *StatusError, attempts int) error {
	switch se.Code {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%w: %w", ErrUnauthorized, se)
	case http.StatusNotFound:
		return fmt.Errorf("%w: %w", ErrNotFound, se)
	}
	if attempts > 1 {
		return fmt.Errorf("dicomweb: %w (after %s)", se, plural(attempts, "attempt"))
	}
	return fmt.Errorf("dicomweb: %w", se)
}

// malformed is an ErrMalformed naming the request and what was wrong.
func malformed(method, url, format string, args ...any) error {
	return fmt.Errorf("%w: %s %s: %s", ErrMalformed, method, url, fmt.Sprintf(format, args...))
}

// snippetLen is how much of an error answer's body a StatusError keeps.
const snippetLen = 200

// snippet makes the start of an error body fit one line of a message, with the secrets masked
// in case a server echoes them.
func snippet(b []byte, secrets []string) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return ' '
		}
		if !unicode.IsPrint(r) {
			return -1
		}
		return r
	}, string(b))
	s = strings.Join(strings.Fields(s), " ")
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "***")
		}
	}
	if len(s) > snippetLen {
		s = strings.ToValidUTF8(s[:snippetLen], "") + "..."
	}
	return s
}
