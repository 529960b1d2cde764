package pipeline

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"voxpipe/io/dicomseg"

	"voxpipe/engine/engine"
	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/model"
	"voxpipe/store/claim"
	"voxpipe/store/provenance"
	"voxpipe/telemetry/timing"
)

// Config describes one batch run.
type Config struct {
	Input   Input
	Engines []engine.Engine // one worker per engine, all pulling from one queue
	Prepare Prepare
	Workers Workers
	Output  Output
	// FailFast stops the batch at the first failed volume.
	FailFast  bool
	Telemetry Telemetry
}

// Input is what a run segments.
type Input struct {
	Jobs []jobs.Job
	// Source, when set, hands the jobs in instead of Jobs, for as long as it stays open (the
	// watch service): Run returns once it is closed and its jobs are done.
	Source <-chan jobs.Job
	// Volume, when set, is the volume (0-based) of 4D inputs to segment; nil: 4D inputs fail
	// (nifti.ErrMultiVolume).
	Volume *int
}

// Prepare is how volumes are brought to the model before segmentation (prepare.go).
type Prepare struct {
	// Card is the model's card (nil: the model has none): the orientation and spacing volumes
	// are brought to, and the domain they are checked against.
	Card *model.Card
	// Resample lets volumes whose voxel size differs from the card's by more than
	// geometry.SpacingTolerance be resampled to it (--resample auto); false: they are only
	// reoriented.
	Resample bool
	// StrictDomain fails volumes the domain check judges out of domain; warnings never fail
	// a volume.
	StrictDomain bool
}

// Workers sizes the stages and bounds their host memory.
type Workers struct {
	Slab    int // z-slices per slab for reading and segmenting
	Readers int // volumes read in parallel
	// ReadThreads is how many goroutines read one volume: an uncompressed one by position (see
	// readers.readAt), a gzipped one of a few MiB or more by inflating it whole on that many
	// (nifti.WithInflateThreads, then read by position from memory); 0: the default rule of
	// Config.readThreads. With one thread, gzipped volumes stream in order.
	ReadThreads int
	Writers     int // masks written in parallel
	// MaxMemory bounds the bytes of host buffers (input and mask pools, inflate scratch)
	// allocated at once; a volume that needs more than that alone fails before anything is
	// allocated for it. 0: no bound.
	MaxMemory int64
	// LeaveBuffers leaves the pool buffers allocated when Run returns, for a process that
	// exits right after it: the exit reclaims them faster than freeing them one by one
	// (page-locked ones especially, docs/perf.md). Anyone else leaks them.
	LeaveBuffers bool
}

// Output is what a run writes beside each mask, and when it skips or claims one.
type Output struct {
	Classes int    // labels written are 0..Classes-1
	Descrip string // descrip field of the written masks ("voxpipe <model>")
	Write   nifti.WriteOptions
	// Overwrite redoes every volume, up-to-date masks and files voxpipe did not write
	// included (default: skip up-to-date masks, report the others as conflicts).
	Overwrite bool
	// VerifyInputs makes the rerun check re-hash each input whose size and mtime match.
	VerifyInputs bool
	// Claims, when set, makes the run claim each volume before working on it, so that several
	// processes can share the output folder; volumes claimed by live processes are recorded
	// busy. nil: no claims (tests, benchmarks).
	Claims *claim.Manager
	// OnBusy, when set, takes the jobs claimed by live processes instead of a busy row (the
	// watch service hands them out again later).
	OnBusy func(jobs.Job)
	// Provenance is recorded in every mask, its Input filled in per volume; its Model decides
	// whether an existing mask is up to date. Generator is set by Run.
	Provenance provenance.Record
	// Analyser, when set, makes each volume's statistics and preview, or removes stale ones,
	// before its mask is committed (package analysis); nil: none (tests, benchmarks).
	Analyser Analyser
	// SEG, when set, makes a DICOM SEG of each DICOM series' mask beside it
	// (records.SEGPath), before the mask's commit; its Segments describe the model's labels.
	// nil: none.
	SEG *dicomseg.Options
}

// Telemetry is where a run reports: its records, its log and its observers, each may be nil.
type Telemetry struct {
	RunID    string
	Host     string // summary.csv's host column
	Shard    string // summary.csv's shard column
	Timings  *timing.CSVFile[timing.Row]
	Summary  *timing.CSVFile[timing.Summary]
	Trace    *timing.Trace
	Log      *slog.Logger
	Progress Progress
	Observer Observer
}

// readThreads is ReadThreads, or by default the cores shared among the readers that can be
// busy at once: max(1, GOMAXPROCS / min(Readers, len(Jobs))). One volume alone gets every
// core; a batch read by 2 readers on 16 cores, 8 goroutines each. A service (Input.Source)
// gets every core for each read: its volumes mostly arrive one at a time, and each waits for
// its read (arrival to mask is what counts there); reads that do overlap share the cores.
func (c *Config) readThreads() int {
	if c.Workers.ReadThreads > 0 {
		return c.Workers.ReadThreads
	}
	if c.Input.Source != nil {
		return runtime.GOMAXPROCS(0)
	}
	return max(1, runtime.GOMAXPROCS(0)/max(1, min(c.Workers.Readers, c.jobCount())))
}

// jobCount is the number of jobs, or for a Source as many as can be in flight at once.
func (c *Config) jobCount() int {
	if c.Input.Source != nil {
		return c.Workers.Readers + len(c.Engines) + c.Workers.Writers
	}
	return len(c.Input.Jobs)
}

// analysesInput reports whether the writers need the input (Analyser.NeedsInput).
func (c *Config) analysesInput() bool {
	return c.Output.Analyser != nil && c.Output.Analyser.NeedsInput()
}

func (c *Config) validate() error {
	switch {
	case len(c.Engines) == 0:
		return errors.New("pipeline: no engine")
	case c.Workers.Slab < 1:
		return fmt.Errorf("pipeline: slab must be at least 1, got %d", c.Workers.Slab)
	case c.Workers.Readers < 1 || c.Workers.Writers < 1:
		return fmt.Errorf("pipeline: need at least one reader and one writer (got %d, %d)", c.Workers.Readers, c.Workers.Writers)
	case c.Workers.ReadThreads < 0:
		return fmt.Errorf("pipeline: read threads must be 0 (automatic) or more, got %d", c.Workers.ReadThreads)
	case c.Output.Classes < 1 || c.Output.Classes > 256:
		return fmt.Errorf("pipeline: %d classes do not fit uint8 labels", c.Output.Classes)
	}
	return nil
}
