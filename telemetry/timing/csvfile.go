package timing

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"sync"

	"github.com/gocarina/gocsv"
)

// CSVFile appends rows of one schema to a CSV file, header first. Each Append reaches the
// file in one write(2) of whole records, so that a run killed at any point (kill -9 included)
// leaves a file of whole records that parses. Safe for concurrent use.
type CSVFile[T any] struct {
	mu     sync.Mutex
	path   string
	f      *os.File
	buf    bytes.Buffer // the records of one Append
	w      *gocsv.SafeCSVWriter
	header bool
	err    error
}

// CreateCSV truncates (or creates) path and writes the schema's header line.
func CreateCSV[T any](path string) (*CSVFile[T], error) {
	return openCSV[T](path, os.O_TRUNC)
}

// CreateNewCSV creates path, failing (with an error wrapping fs.ErrExist) if it exists: a run's
// records never truncate or extend another's.
func CreateNewCSV[T any](path string) (*CSVFile[T], error) {
	return openCSV[T](path, os.O_EXCL)
}

func openCSV[T any](path string, mode int) (*CSVFile[T], error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|mode, 0o644)
	if err != nil {
		return nil, fmt.Errorf("timing: create %s: %w", path, err)
	}
	c := &CSVFile[T]{path: path, f: f}
	c.w = gocsv.NewSafeCSVWriter(csv.NewWriter(&c.buf))
	// An empty batch still writes the header, so even a run with no volumes leaves a valid file.
	if err := c.Append(); err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// Moved tells the file that its folder was renamed and it now lives at path (for messages).
func (c *CSVFile[T]) Moved(path string) {
	c.mu.Lock()
	c.path = path
	c.mu.Unlock()
}

// Append writes rows to the operating system, in one write.
func (c *CSVFile[T]) Append(rows ...T) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if c.f == nil {
		c.err = fmt.Errorf("timing: write %s: %w", c.path, os.ErrClosed)
		return c.err
	}
	if rows == nil {
		rows = []T{}
	}
	c.buf.Reset()
	var err error
	if !c.header {
		err = gocsv.MarshalCSV(rows, c.w)
		c.header = true
	} else if len(rows) > 0 {
		err = gocsv.MarshalCSVWithoutHeaders(rows, c.w)
	}
	if err == nil {
		c.w.Flush()
		err = c.w.Error()
	}
	if err == nil && c.buf.Len() > 0 {
		_, err = c.f.Write(c.buf.Bytes())
	}
	if err != nil {
		c.err = fmt.Errorf("timing: write %s: %w", c.path, err)
	}
	return c.err
}

// Close flushes, syncs and closes the file.
func (c *CSVFile[T]) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return c.err
	}
	err := c.f.Sync()
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	c.f = nil
	if err != nil && c.err == nil {
		c.err = fmt.Errorf("timing: close %s: %w", c.path, err)
	}
	return c.err
}
