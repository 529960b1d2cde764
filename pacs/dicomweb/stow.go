package dicomweb

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
)

// StoreResult is what a STOW-RS answer says.
type StoreResult struct {
	RetrieveURL string           // the study's, when the server gives it
	Referenced  []StoredInstance // stored
	Failed      []FailedInstance // refused
}

// StoredInstance is one item of ReferencedSOPSequence (0008,1199).
type StoredInstance struct{ ClassUID, InstanceUID, RetrieveURL string }

// FailedInstance is one item of FailedSOPSequence (0008,1198).
type FailedInstance struct {
	ClassUID, InstanceUID string
	Reason                int // FailureReason (0008,1197), a DIMSE status
}

// failureReasons names the FailureReason codes of PS3.18 and PS3.4 that servers send.
var failureReasons = map[int]string{
	0x0110: "processing failure",
	0x0111: "duplicate SOP instance",
	0x0117: "invalid object instance",
	0x0122: "SOP class not supported",
	0x0124: "refused: not authorized",
	0xA700: "out of resources",
	0xA900: "data set does not match SOP class",
	0xC000: "cannot understand",
	0xC122: "referenced transfer syntax not supported",
}

// ReasonText is the failure reason in words, with its code.
func (f FailedInstance) ReasonText() string {
	if s, ok := failureReasons[f.Reason]; ok {
		return fmt.Sprintf("0x%04X %s", f.Reason, s)
	}
	return fmt.Sprintf("0x%04X", f.Reason)
}

// maxStoreAnswer bounds the STOW answer read into memory (a few hundred bytes per instance).
const maxStoreAnswer = 16 << 20

// Store sends files with STOW-RS: one POST {root}/studies, multipart/related with one
// application/dicom part per file, streamed from the files (never loaded whole). It reads the
// answer's ReferencedSOPSequence and FailedSOPSequence; any failed instance makes the error an
// ErrStoreFailed naming their SOP Instance UIDs and reasons (the result is returned with it).
// Storing is retried like any request: storing an instance again is accepted by PACSs.
func (c *Client) Store(ctx context.Context, files ...string) (StoreResult, error) {
	if len(files) == 0 {
		return StoreResult{}, errors.New("dicomweb: store: no file")
	}
	sizes := make([]int64, len(files))
	for i, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			return StoreResult{}, fmt.Errorf("dicomweb: store: %w", err)
		}
		if !fi.Mode().IsRegular() {
			return StoreResult{}, fmt.Errorf("dicomweb: store: %s is not a regular file", f)
		}
		sizes[i] = fi.Size()
	}
	boundary, err := newBoundary()
	if err != nil {
		return StoreResult{}, err
	}
	u := c.endpoint(nil, "studies")
	var res StoreResult
	err = c.do(ctx, &call{kind: STOW, method: http.MethodPost, url: u, accept: "application/dicom+json",
		contentType: `multipart/related; type="application/dicom"; boundary=` + boundary,
		body: func() (io.ReadCloser, int64, error) {
			b, n := newStowBody(files, sizes, boundary)
			return b, n, nil
		},
		answer: func(code int) bool {
			return code/100 == 2 || code == http.StatusBadRequest || code == http.StatusConflict
		},
		handle: func(resp *http.Response) error {
			var err error
			res, err = c.readStoreAnswer(resp, u)
			return err
		}})
	return res, err
}

// readStoreAnswer parses a STOW-RS answer: 2xx, or 400 and 409 whose body may list the failed
// instances.
func (c *Client) readStoreAnswer(resp *http.Response, u string) (StoreResult, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxStoreAnswer))
	if err != nil {
		return StoreResult{}, fmt.Errorf("dicomweb: POST %s: reading the answer: %w", u, err)
	}
	var se *StatusError
	if resp.StatusCode/100 != 2 {
		se = &StatusError{Method: http.MethodPost, URL: u, Code: resp.StatusCode, Body: snippet(body, c.secrets)}
	}
	res, perr := parseStoreAnswer(body)
	switch {
	case perr != nil && se != nil:
		return res, se
	case perr != nil:
		return res, malformed(http.MethodPost, u, "%v", perr)
	case len(res.Failed) > 0:
		var b strings.Builder
		for i, f := range res.Failed {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s (%s)", f.InstanceUID, f.ReasonText())
		}
		if se != nil {
			return res, fmt.Errorf("%w: %d of %d instances refused: %s: %w", ErrStoreFailed,
				len(res.Failed), len(res.Failed)+len(res.Referenced), b.String(), se)
		}
		return res, fmt.Errorf("%w: POST %s: %d of %d instances refused: %s", ErrStoreFailed, u,
			len(res.Failed), len(res.Failed)+len(res.Referenced), b.String())
	case se != nil: // an error status that lists no failure
		return res, se
	}
	return res, nil
}

// parseStoreAnswer reads the DICOM JSON of a STOW-RS answer: one dataset, or an array of one
// (as some servers send); an empty body is an empty result.
func parseStoreAnswer(body []byte) (StoreResult, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return StoreResult{}, nil
	}
	var d dataset
	if body[0] == '[' {
		var ds []dataset
		if err := json.Unmarshal(body, &ds); err != nil {
			return StoreResult{}, err
		}
		if len(ds) != 1 {
			return StoreResult{}, fmt.Errorf("an array of %d datasets, want one", len(ds))
		}
		d = ds[0]
	} else if err := json.Unmarshal(body, &d); err != nil {
		return StoreResult{}, err
	}
	res := StoreResult{RetrieveURL: d.str(tagRetrieveURL)}
	refs, err := d.seq(tagReferencedSOPSeq)
	if err != nil {
		return res, fmt.Errorf("ReferencedSOPSequence: %w", err)
	}
	for _, r := range refs {
		res.Referenced = append(res.Referenced, StoredInstance{ClassUID: r.str(tagSOPClassUID),
			InstanceUID: r.str(tagSOPInstanceUID), RetrieveURL: r.str(tagRetrieveURL)})
	}
	failed, err := d.seq(tagFailedSOPSeq)
	if err != nil {
		return res, fmt.Errorf("FailedSOPSequence: %w", err)
	}
	for _, f := range failed {
		res.Failed = append(res.Failed, FailedInstance{ClassUID: f.str(tagSOPClassUID),
			InstanceUID: f.str(tagSOPInstanceUID), Reason: f.int(tagFailureReason)})
	}
	return res, nil
}

// newBoundary is a random multipart boundary.
func newBoundary() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("dicomweb: boundary: %w", err)
	}
	return "voxpipe-" + hex.EncodeToString(b), nil
}

// newStowBody is the multipart body of files, read lazily: each file is opened when the body
// reaches it. It returns the body's exact length, so that no chunked encoding is needed.
func newStowBody(files []string, sizes []int64, boundary string) (io.ReadCloser, int64) {
	b := &stowBody{}
	var readers []io.Reader
	var n int64
	for i, f := range files {
		head := "--" + boundary + "\r\nContent-Type: application/dicom\r\n\r\n"
		if i > 0 {
			head = "\r\n" + head
		}
		lf := &lazyFile{path: f, size: sizes[i]}
		b.files = append(b.files, lf)
		readers = append(readers, strings.NewReader(head), lf)
		n += int64(len(head)) + sizes[i]
	}
	tail := "\r\n--" + boundary + "--\r\n"
	readers = append(readers, strings.NewReader(tail))
	b.Reader = io.MultiReader(readers...)
	return b, n + int64(len(tail))
}

// stowBody closes the file being read when the transport closes the body.
type stowBody struct {
	io.Reader
	files []*lazyFile
}

func (b *stowBody) Close() error {
	for _, f := range b.files {
		f.close()
	}
	return nil
}

// lazyFile reads a file opened on the first read and closed at its end; a file whose length
// changed since it was measured fails, as the body's length would be wrong.
type lazyFile struct {
	path   string
	size   int64
	mu     sync.Mutex
	f      *os.File
	read   int64
	closed bool
}

func (l *lazyFile) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, io.EOF
	}
	if l.f == nil {
		f, err := os.Open(l.path)
		if err != nil {
			return 0, fmt.Errorf("dicomweb: store: %w", err)
		}
		l.f = f
	}
	n, err := l.f.Read(p)
	l.read += int64(n)
	if l.read > l.size || err == io.EOF && l.read != l.size {
		return n, fmt.Errorf("dicomweb: store: %s changed size while being sent", l.path)
	}
	if err == io.EOF {
		l.f.Close()
		l.closed = true
	} else if err != nil {
		err = fmt.Errorf("dicomweb: store: read %s: %w", l.path, err)
	}
	return n, err
}

func (l *lazyFile) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil && !l.closed {
		l.f.Close()
	}
	l.closed = true
}
