package report

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"voxpipe/stage"
	"voxpipe/store/records"
	"voxpipe/telemetry/timing"
)

// ErrInput marks errors caused by the report's inputs (missing, unreadable or malformed CSVs,
// unknown volume or stage names): the CLI exits 2 on them.
var ErrInput = errors.New("report: bad input")

// CSVError locates a problem in a CSV file. Line is the 1-based line in the file where the
// record (or field) starts; Column is the 1-based field number, 0 when the whole record is at
// fault; Field is the column's header name when known.
type CSVError struct {
	File   string
	Line   int
	Column int
	Field  string
	Err    error
}

func (e *CSVError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ": line %d", e.Line)
	}
	if e.Column > 0 {
		fmt.Fprintf(&b, ", column %d", e.Column)
		if e.Field != "" {
			fmt.Fprintf(&b, " (%s)", e.Field)
		}
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *CSVError) Unwrap() error { return e.Err }

// Is makes every CSVError an input error.
func (e *CSVError) Is(target error) bool { return target == ErrInput }

// inputError wraps err so that errors.Is(err, ErrInput) holds.
func inputError(err error) error { return fmt.Errorf("%w: %w", ErrInput, err) }

// csvKind says which of the two schemas a file follows.
type csvKind int

const (
	kindTimings csvKind = iota + 1
	kindSummary
)

func (k csvKind) String() string {
	if k == kindTimings {
		return "timings"
	}
	return "summary"
}

// csvFile is one input file, found on the command line or in a folder.
type csvFile struct {
	path string
	kind csvKind // 0 until known (explicit files are classified by their header)
	// outDir: the file is a run's record under this voxpipe output folder (OUT/runs/<id>/),
	// whose runs are merged keeping each volume's latest outcome.
	outDir string
}

// discover expands the paths of one side into CSV files. A folder contributes the files named
// timings*.csv, *timings.csv, summary*.csv or *summary.csv in it and in its immediate
// subfolders (shards), and, when it is a voxpipe output folder, those of every run recorded in
// it (OUT/runs/<id>/); a file is classified later by its header.
func discover(paths []string) ([]csvFile, error) {
	var files []csvFile
	seen := map[string]bool{}
	add := func(f csvFile) {
		abs, err := filepath.Abs(f.path)
		if err != nil {
			abs = f.path
		}
		if seen[abs] {
			return
		}
		seen[abs] = true
		files = append(files, f)
	}
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, inputError(err)
		}
		if !info.IsDir() {
			add(csvFile{path: p})
			continue
		}
		found, err := csvFilesIn(p)
		if err != nil {
			return nil, err
		}
		runDirs, err := records.RunDirs(p)
		if err != nil {
			return nil, inputError(err)
		}
		for _, d := range runDirs {
			inRun, err := csvFilesIn(d)
			if err != nil {
				return nil, err
			}
			for _, f := range inRun {
				f.outDir = p
				found = append(found, f)
			}
		}
		if len(found) == 0 {
			return nil, inputError(fmt.Errorf("%s: no timings*.csv or summary*.csv in the folder, its subfolders or its runs/", p))
		}
		for _, f := range found {
			add(f)
		}
	}
	return files, nil
}

func csvFilesIn(dir string) ([]csvFile, error) {
	var out []csvFile
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, inputError(err)
	}
	var subdirs []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			subdirs = append(subdirs, filepath.Join(dir, name))
			continue
		}
		if k := kindFromName(name); k != 0 {
			out = append(out, csvFile{path: filepath.Join(dir, name), kind: k})
		}
	}
	for _, sub := range subdirs {
		if filepath.Base(sub) == records.RunsDir {
			continue // run records: discover reads them as one output folder's runs
		}
		entries, err := os.ReadDir(sub)
		if err != nil {
			return nil, inputError(err)
		}
		for _, e := range entries {
			if k := kindFromName(e.Name()); k != 0 && !e.IsDir() {
				out = append(out, csvFile{path: filepath.Join(sub, e.Name()), kind: k})
			}
		}
	}
	return out, nil
}

func kindFromName(name string) csvKind {
	base, ok := strings.CutSuffix(strings.ToLower(name), ".csv")
	if !ok {
		return 0
	}
	switch {
	case strings.HasPrefix(base, "timings") || strings.HasSuffix(base, "timings"):
		return kindTimings
	case strings.HasPrefix(base, "summary") || strings.HasSuffix(base, "summary"):
		return kindSummary
	}
	return 0
}

// table is a CSV file read with encoding/csv, keeping where each record starts so that errors
// found later (by the schema's decoders, timing.DecodeRows and DecodeSummaries, or by the
// report's own checks) can name the file's real line: quoted fields may
// span lines and blank lines are skipped, so record numbers are not line numbers.
type table struct {
	path    string
	header  []string
	records [][]string // without the header
	lines   [][]int    // lines[i][j] is the line where field j of records[i] starts
	col     map[string]int
}

func readTable(path string) (*table, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, inputError(err)
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // spreadsheets like to add a BOM
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1 // checked below, to say which field is missing
	t := &table{path: path}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, &CSVError{File: path, Line: pe.Line, Err: fmt.Errorf("byte %d: %w", pe.Column, pe.Err)}
			}
			return nil, inputError(fmt.Errorf("%s: %w", path, err))
		}
		line, _ := r.FieldPos(0)
		if t.header == nil {
			t.header = rec
			continue
		}
		if len(rec) != len(t.header) {
			col := min(len(rec), len(t.header)) + 1
			e := &CSVError{File: path, Line: line, Column: col,
				Err: fmt.Errorf("record has %d fields, the header has %d", len(rec), len(t.header))}
			if col <= len(t.header) {
				e.Field = t.header[col-1]
			}
			return nil, e
		}
		fieldLines := make([]int, len(rec))
		for j := range rec {
			fieldLines[j], _ = r.FieldPos(j)
		}
		t.records = append(t.records, rec)
		t.lines = append(t.lines, fieldLines)
	}
	if t.header == nil {
		return nil, &CSVError{File: path, Line: 1, Err: errors.New("empty file: no header")}
	}
	t.col = make(map[string]int, len(t.header))
	for i, h := range t.header {
		h = strings.TrimSpace(h)
		if _, dup := t.col[h]; dup {
			return nil, &CSVError{File: path, Line: 1, Column: i + 1, Field: h, Err: errors.New("repeated column name")}
		}
		t.col[h] = i
	}
	return t, nil
}

// kindFromHeader classifies a file given explicitly on the command line.
func (t *table) kindFromHeader() (csvKind, error) {
	_, hasStage := t.col["stage"]
	_, status := t.col["status"]
	switch {
	case hasStage && !status:
		return kindTimings, nil
	case status && !hasStage:
		return kindSummary, nil
	}
	return 0, &CSVError{File: t.path, Line: 1,
		Err: errors.New("neither a timings CSV (has a stage column) nor a summary CSV (has a status column)")}
}

// fieldError builds a CSVError for record i's column name.
func (t *table) fieldError(i int, name string, err error) *CSVError {
	j := t.col[name]
	return &CSVError{File: t.path, Line: t.lines[i][j], Column: j + 1, Field: name, Err: err}
}

// decodeError makes the schema's error (timing.FieldError, which counts records) a CSVError
// naming the field's line in the file.
func (t *table) decodeError(err error) error {
	var fe *timing.FieldError
	if !errors.As(err, &fe) {
		return inputError(fmt.Errorf("%s: %w", t.path, err))
	}
	e := &CSVError{File: t.path, Line: 1, Column: fe.Column, Field: fe.Field, Err: fe.Err}
	if i := fe.Record - 2; i >= 0 && i < len(t.lines) && fe.Column >= 1 && fe.Column <= len(t.lines[i]) {
		e.Line = t.lines[i][fe.Column-1]
	}
	return e
}

// records is the table as the schema decoders take it, the header first.
func (t *table) all() [][]string { return append([][]string{t.header}, t.records...) }

func readTimings(t *table) ([]timing.Row, error) {
	rows, err := timing.DecodeRows(t.all())
	if err != nil {
		return nil, t.decodeError(err)
	}
	for i, r := range rows {
		if st := stage.Stage(strings.TrimSpace(string(r.Stage))); st == EndToEnd || st == Service {
			// Its samples would be mixed into the report's own row of that name.
			return nil, t.fieldError(i, "stage", fmt.Errorf("%q is the name of a row the report computes, not a stage", st))
		}
	}
	return rows, nil
}

// summaryStageColumns maps summary.csv's per-stage columns to stage names, used when a run
// has no timings.csv.
var summaryStageColumns = []struct {
	stage stage.Stage
	value func(*timing.Summary) float64
}{
	{stage.Read, func(s *timing.Summary) float64 { return s.ReadMS }},
	{stage.Stats, func(s *timing.Summary) float64 { return s.StatsMS }},
	{stage.H2D, func(s *timing.Summary) float64 { return s.H2DMS }},
	{stage.Kernels, func(s *timing.Summary) float64 { return s.KernelsMS }},
	{stage.Segment, func(s *timing.Summary) float64 { return s.SegmentMS }},
	{stage.D2H, func(s *timing.Summary) float64 { return s.D2HMS }},
	{stage.Write, func(s *timing.Summary) float64 { return s.WriteMS }},
}

func readSummaries(t *table) ([]timing.Summary, error) {
	rows, err := timing.DecodeSummaries(t.all())
	if err != nil {
		return nil, t.decodeError(err)
	}
	return rows, nil
}

// hasQueue says whether the summary file has the queue_ms column (files written before it
// lack it: their volumes' queue is taken as 0).
func (t *table) hasQueue() bool {
	_, ok := t.col["queue_ms"]
	return ok
}

// queueKnown says whether record i of a summary file gives its queue_ms.
func (t *table) queueKnown(i int) bool {
	return t.hasQueue() && strings.TrimSpace(t.records[i][t.col["queue_ms"]]) != ""
}
