// Package timing holds the schemas of voxpipe's timing CSVs (timings.csv, summary.csv), shared
// by the pipeline that writes them and the report that reads them. Column names are stable.
package timing

import (
	"voxpipe/stage"
)

// Row is one line of timings.csv: one stage event.
type Row struct {
	RunID      string      `csv:"run_id"`
	Volume     string      `csv:"volume"`
	Stage      stage.Stage `csv:"stage"` // see package stage
	Slab       int         `csv:"slab"`  // -1 for whole-volume stages
	Device     string      `csv:"device"`
	StartMS    float64     `csv:"start_ms"` // since the run started, monotonic clock
	DurationMS float64     `csv:"duration_ms"`
	Bytes      int64       `csv:"bytes"`
	Voxels     int64       `csv:"voxels"`
}

// Summary is one line of summary.csv: one volume.
type Summary struct {
	RunID     string  `csv:"run_id"`
	Volume    string  `csv:"volume"`
	Status    Status  `csv:"status"`
	Error     string  `csv:"error"`
	Dims      string  `csv:"dims"` // NXxNYxNZ
	Voxels    int64   `csv:"voxels"`
	Engine    string  `csv:"engine"`
	ReadMS    float64 `csv:"read_ms"`
	StatsMS   float64 `csv:"stats_ms"`
	SegmentMS float64 `csv:"segment_ms"`
	H2DMS     float64 `csv:"h2d_ms"`
	KernelsMS float64 `csv:"kernels_ms"`
	D2HMS     float64 `csv:"d2h_ms"`
	WriteMS   float64 `csv:"write_ms"`
	WallMS    float64 `csv:"wall_ms"` // from the volume's first read to its mask's rename
	MVoxPerS  float64 `csv:"mvox_per_s"`
	Output    string  `csv:"output"`
	// Columns added after the first schema, at the end (readers find columns by name).
	Reason     string `csv:"reason"`      // why the volume was (re)done or not: "new", "input changed", "mask up to date"...
	FinishedAt string `csv:"finished_at"` // UTC wall-clock time the row was recorded (RFC 3339, ns)
	Host       string `csv:"host"`        // host that recorded the row
	Shard      string `csv:"shard"`       // "i/n" of a run split into shards (--shard), else empty
	// QueueMS is the part of WallMS the volume spent waiting rather than being worked on: for
	// an engine after its read; under watch, also from its arrival to its read. Service time
	// is WallMS - QueueMS.
	QueueMS float64 `csv:"queue_ms"`
	// Domain is the domain check's verdict: "ok", or its level ("warn", "out-of-domain") and
	// ": " and the reasons joined by "; " (model.CheckDomain, model.Verdict.String).
	Domain string `csv:"domain"`
	// Grid is how the volume met the model: its orientation, and "->" the model's when it was
	// reoriented; the voxel size "->" the model's when it was resampled.
	Grid string `csv:"grid"`
	// DomainEvidence is what the domain check measured: field of view, intensity histogram
	// distance, the model's confidence ("fov 240x240x192 mm; hist 0.031; margin 6.12; low 4.1 %;
	// fg 23.5 %", model.DomainInput.Evidence).
	DomainEvidence string `csv:"domain_evidence"`
	// SEG is the SOP Instance UID of the DICOM SEG written beside the mask of a DICOM series
	// (records.SEGPath: the mask's path, .nii.gz replaced by .seg.dcm; not the path itself,
	// which may hold patient data, as output shows no DICOM mask's path); empty when none was.
	SEG string `csv:"seg"`
}

// OptionalColumns are the summary.csv columns added after its first schema: files written
// before them lack them, and readers take them as empty.
var OptionalColumns = []string{"reason", "finished_at", "host", "shard", "queue_ms", "domain", "grid", "domain_evidence", "seg"}

// Status is a volume's outcome in summary.csv.
type Status string

// Status values.
const (
	StatusOK       Status = "ok"
	StatusSkipped  Status = "skipped"  // its mask exists, parses, and its provenance matches the input and model
	StatusFailed   Status = "failed"   // see the error column
	StatusBusy     Status = "busy"     // claimed by another live process, which is segmenting it
	StatusConflict Status = "conflict" // a file that voxpipe did not write is at the mask's path (kept; --overwrite replaces it)
)

// Statuses lists every Status value.
var Statuses = []Status{StatusOK, StatusSkipped, StatusFailed, StatusBusy, StatusConflict}
