package dicomweb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// ExplicitVRLittleEndian is the transfer syntax RetrieveSeries asks for.
const ExplicitVRLittleEndian = "1.2.840.10008.1.2.1"

// retrieveAccept is the Accept header of a retrieve.
const retrieveAccept = `multipart/related; type="application/dicom"; transfer-syntax=` + ExplicitVRLittleEndian

// RetrieveSeries fetches every instance of a series with WADO-RS (GET
// {root}/studies/{study}/series/{series}, asking for Explicit VR Little Endian and accepting
// whatever syntax comes) and streams each part of the multipart answer to its own file in dir
// (created if missing), named 000001.dcm, 000002.dcm, ... in the answer's order. A file is
// written under a temporary name and linked to its name only when whole; a name that exists
// already is an error, never overwritten. It returns the paths. On any error, the files of the
// call are removed; an answer that breaks off or stalls is retried whole.
func (c *Client) RetrieveSeries(ctx context.Context, study, series, dir string) ([]string, error) {
	if err := checkUID(study); err != nil {
		return nil, err
	}
	if err := checkUID(series); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("dicomweb: retrieve into %s: %w", dir, err)
	}
	u := c.endpoint(nil, "studies", study, "series", series)
	var paths []string
	err := c.do(ctx, &call{kind: WADO, method: http.MethodGet, url: u, accept: retrieveAccept,
		handle: func(resp *http.Response) error {
			var err error
			paths, err = writeParts(resp, u, dir)
			return err
		}})
	if err != nil {
		return nil, err
	}
	return paths, nil
}

// writeParts streams each part of a multipart/related answer to its own file in dir. On error
// it removes every file it wrote.
func writeParts(resp *http.Response, u, dir string) (paths []string, err error) {
	defer func() {
		if err != nil {
			for _, p := range paths {
				os.Remove(p)
			}
			paths = nil
		}
	}()
	mt, params, err := parseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case err != nil:
		return nil, malformed("GET", u, "Content-Type: %v", err)
	case mt != "multipart/related":
		return nil, malformed("GET", u, "Content-Type %s, want multipart/related", mt)
	case params["boundary"] == "":
		return nil, malformed("GET", u, "multipart answer without a boundary")
	}
	mr := multipart.NewReader(resp.Body, params["boundary"])
	for i := 1; ; i++ {
		part, err := mr.NextRawPart()
		if err == io.EOF { // the closing delimiter
			if len(paths) == 0 {
				return nil, malformed("GET", u, "the answer holds no instance")
			}
			return paths, nil
		}
		if err != nil {
			return paths, fmt.Errorf("%w: GET %s: part %d: %w", ErrMalformed, u, i, err)
		}
		if pt, _, err := parseMediaType(part.Header.Get("Content-Type")); err != nil || pt != "application/dicom" {
			return paths, malformed("GET", u, "part %d has Content-Type %q, want application/dicom", i, part.Header.Get("Content-Type"))
		}
		path := filepath.Join(dir, fmt.Sprintf("%06d.dcm", i))
		src := &readErr{r: part}
		if err := writeNew(path, src); err != nil {
			if src.err != nil {
				return paths, fmt.Errorf("%w: GET %s: part %d: %w", ErrMalformed, u, i, src.err)
			}
			return paths, err
		}
		paths = append(paths, path)
	}
}

// writeNew streams r into a temporary file beside path and links it to path when whole. An
// existing path is an error, never replaced.
func writeNew(path string, r io.Reader) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".part-*")
	if err != nil {
		return fmt.Errorf("dicomweb: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("dicomweb: write %s: %w", path, cerr)
	}
	if err != nil {
		return fmt.Errorf("dicomweb: write %s: %w", path, err)
	}
	if err := os.Link(tmp, path); err != nil {
		return fmt.Errorf("dicomweb: %w (retrieve into an empty folder)", err)
	}
	return nil
}

// parseMediaType reads a Content-Type header: the media type, lower case, and its parameters
// (names lower case). Unlike mime.ParseMediaType it accepts unquoted values with a '/', as in
// type=application/dicom, which DICOMweb servers send.
func parseMediaType(v string) (string, map[string]string, error) {
	mt, rest, _ := strings.Cut(v, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	if mt == "" || !strings.Contains(mt, "/") {
		return "", nil, fmt.Errorf("no media type in %q", v)
	}
	params := map[string]string{}
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		name, after, ok := strings.Cut(rest, "=")
		name = strings.ToLower(strings.TrimSpace(name))
		if !ok || name == "" {
			return "", nil, fmt.Errorf("bad parameter in %q", v)
		}
		value, tail, err := paramValue(strings.TrimSpace(after))
		if err != nil {
			return "", nil, fmt.Errorf("%v in %q", err, v)
		}
		params[name] = value
		rest = strings.TrimPrefix(strings.TrimSpace(tail), ";")
	}
	return mt, params, nil
}

// paramValue reads a parameter value, quoted (with backslash escapes) or up to the next ';'.
func paramValue(s string) (value, rest string, err error) {
	if !strings.HasPrefix(s, `"`) {
		value, rest, _ = strings.Cut(s, ";")
		return strings.TrimSpace(value), rest, nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		case '"':
			return b.String(), s[i+1:], nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", errors.New("unterminated quoted value")
}

// readErr keeps its reader's first error other than EOF, to tell a read failure from a write
// failure after io.Copy.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	return n, err
}
