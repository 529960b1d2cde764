package timing

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"os"
	"sync"

	"github.com/gocarina/gocsv"
)

// CSVFile appends rows of one schema to a CSV file, header first, flushing after every Append so
// that a run killed at any point leaves a file that parses. Safe for concurrent use.
type CSVFile[T any] struct {
	mu     sync.Mutex
	path   string
	f      *os.File
	buf    *bufio.Writer
	w      *gocsv.SafeCSVWriter
	header bool
	err    error
}

// CreateCSV truncates (or creates) path and writes the schema's header line.
func CreateCSV[T any](path string) (*CSVFile[T], error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("timing: create %s: %w", path, err)
	}
	buf := bufio.NewWriter(f)
	c := &CSVFile[T]{path: path, f: f, buf: buf, w: gocsv.NewSafeCSVWriter(csv.NewWriter(buf))}
	// An empty batch still writes the header, so even a run with no volumes leaves a valid file.
	if err := c.Append(); err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// Append writes rows and flushes them to the operating system.
func (c *CSVFile[T]) Append(rows ...T) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if rows == nil {
		rows = []T{}
	}
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
	if err == nil {
		err = c.buf.Flush()
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
	err := c.buf.Flush()
	if serr := c.f.Sync(); err == nil {
		err = serr
	}
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	c.f = nil
	if err != nil && c.err == nil {
		c.err = fmt.Errorf("timing: close %s: %w", c.path, err)
	}
	return c.err
}

// ReadCSV parses a whole CSV file of one schema.
func ReadCSV[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("timing: %w", err)
	}
	defer f.Close()
	var rows []T
	if err := gocsv.UnmarshalFile(f, &rows); err != nil {
		return nil, fmt.Errorf("timing: parse %s: %w", path, err)
	}
	return rows, nil
}
