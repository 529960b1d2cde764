package timing

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"voxpipe/stage"

	"github.com/gocarina/gocsv"
)

// Reading the CSVs back is strict: every field is decoded by a type of its own (gocsv calls
// its UnmarshalCSV) that refuses what gocsv's conversions would let through ("1.5" for an
// integer becomes 1, "" becomes 0) and what voxpipe never writes (negative counts, NaN
// durations). ReadRows and ReadSummaries read a file; DecodeRows and DecodeSummaries decode
// records already read (the report reads them itself, to name a bad field's line).

// FieldError locates a field, or the header, that the schema refuses.
type FieldError struct {
	Record int    // 1-based, the header being record 1 (as gocsv counts)
	Column int    // 1-based; 0: the whole record (or the header)
	Field  string // the column's name, when known
	Err    error
}

func (e *FieldError) Error() string {
	if e.Column == 0 {
		return fmt.Sprintf("record %d: %v", e.Record, e.Err)
	}
	return fmt.Sprintf("record %d, column %d (%s): %v", e.Record, e.Column, e.Field, e.Err)
}

func (e *FieldError) Unwrap() error { return e.Err }

// ReadRows reads a timings.csv.
func ReadRows(path string) ([]Row, error) { return readFile(path, DecodeRows) }

// ReadSummaries reads a summary.csv (or volumes.csv).
func ReadSummaries(path string) ([]Summary, error) { return readFile(path, DecodeSummaries) }

func readFile[T any](path string, decode func([][]string) ([]T, error)) ([]T, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("timing: %w", err)
	}
	records, err := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(data, []byte("\ufeff")))).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("timing: parse %s: %w", path, err)
	}
	rows, err := decode(records)
	if err != nil {
		return nil, fmt.Errorf("timing: parse %s: %w", path, err)
	}
	return rows, nil
}

// DecodeRows decodes timings.csv records, the header first.
func DecodeRows(records [][]string) ([]Row, error) {
	wire, err := decode[rowRecord](records)
	if err != nil {
		return nil, err
	}
	rows := make([]Row, len(wire))
	for i, w := range wire {
		for _, ms := range []struct {
			name string
			v    msField
		}{{"start_ms", w.StartMS}, {"duration_ms", w.DurationMS}} {
			if !ms.v.set {
				return nil, fieldError(records[0], i, ms.name, errRequiredMS)
			}
		}
		rows[i] = Row{RunID: w.RunID, Volume: string(w.Volume), Stage: stage.Stage(w.Stage), Slab: int(w.Slab), Device: w.Device,
			StartMS: w.StartMS.v, DurationMS: w.DurationMS.v, Bytes: int64(w.Bytes), Voxels: int64(w.Voxels)}
	}
	return rows, nil
}

// DecodeSummaries decodes summary.csv records, the header first. Beyond each field's type: an
// ok volume has its wall_ms, and its queue_ms, part of wall_ms, is not more.
func DecodeSummaries(records [][]string) ([]Summary, error) {
	wire, err := decode[summaryRecord](records)
	if err != nil {
		return nil, err
	}
	rows := make([]Summary, len(wire))
	for i, w := range wire {
		ok := Status(w.Status) == StatusOK
		if ok && !w.WallMS.set {
			return nil, fieldError(records[0], i, "wall_ms", errRequiredMS)
		}
		if ok && w.QueueMS.v > w.WallMS.v {
			return nil, fieldError(records[0], i, "queue_ms",
				fmt.Errorf("%g ms is more than wall_ms (%g ms), which includes it", w.QueueMS.v, w.WallMS.v))
		}
		rows[i] = Summary{RunID: w.RunID, Volume: string(w.Volume), Status: Status(w.Status), Error: w.Error, Dims: w.Dims,
			Voxels: int64(w.Voxels), Engine: w.Engine, ReadMS: w.ReadMS.v, StatsMS: w.StatsMS.v, SegmentMS: w.SegmentMS.v,
			H2DMS: w.H2DMS.v, KernelsMS: w.KernelsMS.v, D2HMS: w.D2HMS.v, WriteMS: w.WriteMS.v, WallMS: w.WallMS.v,
			MVoxPerS: float64(w.MVoxPerS), Output: w.Output, Reason: w.Reason, FinishedAt: w.FinishedAt, Host: w.Host,
			Shard: w.Shard, QueueMS: w.QueueMS.v, Domain: w.Domain, Grid: w.Grid, DomainEvidence: w.Evidence, SEG: w.SEG}
	}
	return rows, nil
}

var errRequiredMS = errors.New("empty; a number of milliseconds is required")

// decode checks the header for the schema's columns (but OptionalColumns) and decodes the
// records with gocsv, its errors made FieldErrors.
func decode[W any](records [][]string) ([]W, error) {
	if len(records) == 0 {
		return nil, &FieldError{Record: 1, Err: errors.New("empty file: no header")}
	}
	var missing []string
	for _, name := range columnsOf[W]() {
		if !slices.Contains(records[0], name) && !slices.Contains(OptionalColumns, name) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, &FieldError{Record: 1, Err: fmt.Errorf("missing column(s) %s", strings.Join(missing, ", "))}
	}
	var out []W
	err := gocsv.UnmarshalCSV(&replay{records: records}, &out)
	if pe := (*csv.ParseError)(nil); errors.As(err, &pe) {
		e := &FieldError{Record: pe.Line, Column: pe.Column, Err: pe.Err}
		if pe.Column >= 1 && pe.Column <= len(records[0]) {
			e.Field = records[0][pe.Column-1]
		}
		return nil, e
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// columnsOf lists the csv tags of struct type T's fields, in order.
func columnsOf[T any]() []string {
	typ := reflect.TypeFor[T]()
	var tags []string
	for i := range typ.NumField() {
		if tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("csv"), ","); tag != "" && tag != "-" {
			tags = append(tags, tag)
		}
	}
	return tags
}

// fieldError is the FieldError of record i (0-based, after the header) in column name.
func fieldError(header []string, i int, name string, err error) *FieldError {
	return &FieldError{Record: i + 2, Column: slices.Index(header, name) + 1, Field: name, Err: err}
}

// replay hands records already read to gocsv.
type replay struct {
	records [][]string
	next    int
}

func (r *replay) Read() ([]string, error) {
	if r.next >= len(r.records) {
		return nil, io.EOF
	}
	r.next++
	return r.records[r.next-1], nil
}

func (r *replay) ReadAll() ([][]string, error) {
	rest := r.records[r.next:]
	r.next = len(r.records)
	return rest, nil
}

// The wire forms of Row and Summary: the same columns (TestWireColumns), strict field types.

type rowRecord struct {
	RunID      string       `csv:"run_id"`
	Volume     requiredText `csv:"volume"`
	Stage      requiredText `csv:"stage"`
	Slab       slabField    `csv:"slab"`
	Device     string       `csv:"device"`
	StartMS    msField      `csv:"start_ms"`
	DurationMS msField      `csv:"duration_ms"`
	Bytes      countField   `csv:"bytes"`
	Voxels     countField   `csv:"voxels"`
}

type summaryRecord struct {
	RunID      string       `csv:"run_id"`
	Volume     requiredText `csv:"volume"`
	Status     statusField  `csv:"status"`
	Error      string       `csv:"error"`
	Dims       string       `csv:"dims"`
	Voxels     countField   `csv:"voxels"`
	Engine     string       `csv:"engine"`
	ReadMS     msField      `csv:"read_ms"`
	StatsMS    msField      `csv:"stats_ms"`
	SegmentMS  msField      `csv:"segment_ms"`
	H2DMS      msField      `csv:"h2d_ms"`
	KernelsMS  msField      `csv:"kernels_ms"`
	D2HMS      msField      `csv:"d2h_ms"`
	WriteMS    msField      `csv:"write_ms"`
	WallMS     msField      `csv:"wall_ms"`
	MVoxPerS   numberField  `csv:"mvox_per_s"`
	Output     string       `csv:"output"`
	Reason     string       `csv:"reason"`
	FinishedAt string       `csv:"finished_at"`
	Host       string       `csv:"host"`
	Shard      string       `csv:"shard"`
	QueueMS    msField      `csv:"queue_ms"`
	Domain     string       `csv:"domain"`
	Grid       string       `csv:"grid"`
	Evidence   string       `csv:"domain_evidence"`
	SEG        string       `csv:"seg"`
}

// requiredText is a field that may not be empty (or blank).
type requiredText string

func (t *requiredText) UnmarshalCSV(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("empty")
	}
	*t = requiredText(s)
	return nil
}

// parseInt reads an integer field of at least minValue; empty reads as 0.
func parseInt(s string, minValue int64) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not an integer: %q", s)
	}
	if v < minValue {
		return 0, fmt.Errorf("%d is below %d", v, minValue)
	}
	return v, nil
}

// slabField is a slab index: -1 (the whole volume) or more.
type slabField int

func (f *slabField) UnmarshalCSV(s string) error {
	v, err := parseInt(s, -1)
	*f = slabField(v)
	return err
}

// countField is a count of bytes or voxels.
type countField int64

func (f *countField) UnmarshalCSV(s string) error {
	v, err := parseInt(s, 0)
	*f = countField(v)
	return err
}

// msField is a duration in milliseconds: finite and not negative; set is false when the field
// is empty (a stage the volume did not reach, a column of an older file).
type msField struct {
	v   float64
	set bool
}

func (f *msField) UnmarshalCSV(s string) error {
	s = strings.TrimSpace(s)
	if s == "" {
		*f = msField{}
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return err
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return fmt.Errorf("%q is not a finite non-negative number", s)
	}
	*f = msField{v: v, set: true}
	return nil
}

// numberField is a number; empty reads as 0.
type numberField float64

func (f *numberField) UnmarshalCSV(s string) error {
	s = strings.TrimSpace(s)
	if s == "" {
		*f = 0
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	*f = numberField(v)
	return err
}

// statusField is one of Statuses.
type statusField Status

func (f *statusField) UnmarshalCSV(s string) error {
	if !slices.Contains(Statuses, Status(s)) {
		names := make([]string, len(Statuses))
		for i, st := range Statuses {
			names[i] = string(st)
		}
		return fmt.Errorf("unknown status %q (want %s)", s, strings.Join(names, ", "))
	}
	*f = statusField(s)
	return nil
}
