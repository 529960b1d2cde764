// Package inbox watches folders for volumes and DICOM series that arrive and hands each one
// to the pipeline once it is complete, once per version (size and modification time) of its
// files.
//
// A volume (a NIfTI file) is complete when:
//   - it is complete the first time it is seen (its header parses and the file holds all the
//     data the header declares: nifti.CheckComplete), which is how a file moved in by rename,
//     or one already there at start, looks; it is taken at once;
//   - a marker file "<name>.ready" (Options.ReadySuffix) exists next to it; or
//   - it has been unchanged in size and mtime for Options.Settle (a writer filling it in place,
//     or anything the first two rules cannot judge, which the pipeline then accepts or fails).
//
// The other files (not hidden, not markers) are DICOM candidates. A DICOM series arrives file
// by file and no file says it is the last, so a series (the image files of one
// SeriesInstanceUID, across the folders) is complete when none of its files has been new or
// changed for Options.Settle; it has no marker. Its jobs are jobs.DICOMJobs', as `voxpipe
// run` makes them. A series that grows or changes after the pipeline took it is handed out
// again, with a warning (dicom.go). Files that are neither volumes nor DICOM images are logged
// once and left out.
//
// Changes are seen through inotify (github.com/fsnotify/fsnotify) and, because network file
// systems deliver no events, through a rescan of the folders every Options.Rescan (and, before
// a series is handed out, a listing of its folders).
package inbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"voxpipe/io/dicom"
	"voxpipe/jobs"
)

// Defaults of Options.
const (
	DefaultSettle      = 10 * time.Second
	DefaultRescan      = 30 * time.Second
	DefaultReadySuffix = ".ready"
)

// Options configures an Inbox.
type Options struct {
	Folders   []string
	Recursive bool
	// OutDir and MaskName name the masks as jobs.Discover does; the output folder is not
	// watched when it lies inside an inbox.
	OutDir, MaskName string
	// DICOMName names DICOM series' masks ({name} of MaskName; --dicom-name, default
	// dicom.DefaultName).
	DICOMName string
	// Settle: a volume unchanged this long, or a series none of whose files is new or
	// changed for this long, is complete.
	Settle      time.Duration
	Rescan      time.Duration
	ReadySuffix string
	Log         *slog.Logger
}

// Inbox hands complete volumes out on Jobs.
type Inbox struct {
	opt     Options
	watcher *fsnotify.Watcher
	outInfo fs.FileInfo
	jobs    chan jobs.Job
	wake    chan struct{}

	mu      sync.Mutex
	files   map[string]*entry // candidate volume files, by path
	dirs    map[string]string // watched folder -> its inbox root
	queue   []*queued
	next    int
	ignored map[string]bool       // own masks and unwatched sub-folders seen, said once
	dcm     map[string]*dcmFile   // DICOM candidates, by path (dicom.go)
	series  map[string]*dcmSeries // DICOM series, by SeriesInstanceUID
	noted   map[string]bool       // files left out, said once
}

// queued is a job waiting to be taken by the pipeline.
type queued struct {
	job jobs.Job
	// dropped: replaced by a newer version of its series before the pipeline took it.
	dropped bool
	series  *dcmSeries // a DICOM series' job: its series, and the version it reads
	ver     version
}

// New watches the folders (which must exist).
func New(opt Options) (*Inbox, error) {
	b, err := newInbox(opt)
	if err != nil {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	b.watcher = w
	for _, f := range opt.Folders {
		st, err := os.Stat(f)
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("inbox: %w", err)
		}
		if !st.IsDir() {
			w.Close()
			return nil, fmt.Errorf("inbox: %s is not a folder", f)
		}
		if err := b.watchTree(f, f); err != nil {
			w.Close()
			return nil, err
		}
	}
	return b, nil
}

// newInbox is an Inbox with its options' defaults, watching nothing yet.
func newInbox(opt Options) (*Inbox, error) {
	if opt.Settle <= 0 {
		opt.Settle = DefaultSettle
	}
	if opt.Rescan <= 0 {
		opt.Rescan = DefaultRescan
	}
	if opt.ReadySuffix == "" {
		opt.ReadySuffix = DefaultReadySuffix
	}
	if opt.DICOMName == "" {
		opt.DICOMName = dicom.DefaultName
	}
	if err := dicom.CheckName(opt.DICOMName); err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	b := &Inbox{opt: opt, jobs: make(chan jobs.Job), wake: make(chan struct{}, 1),
		files: map[string]*entry{}, dirs: map[string]string{}, ignored: map[string]bool{},
		dcm: map[string]*dcmFile{}, series: map[string]*dcmSeries{}, noted: map[string]bool{}}
	b.outInfo, _ = os.Stat(opt.OutDir)
	return b, nil
}

// Jobs is where complete volumes are handed out; it is closed when Run returns.
func (b *Inbox) Jobs() <-chan jobs.Job { return b.jobs }

// Pending is the number of complete volumes not yet taken from Jobs.
func (b *Inbox) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, q := range b.queue {
		if !q.dropped {
			n++
		}
	}
	return n
}

// Run scans the folders, then follows their events and rescans them until ctx is done; then it
// closes Jobs. onTick, when set, runs at every settle tick (a liveness signal: the systemd
// watchdog).
func (b *Inbox) Run(ctx context.Context, onTick func()) error {
	defer b.watcher.Close()
	feeder := make(chan struct{})
	go func() {
		defer close(feeder)
		b.feed(ctx)
	}()
	defer func() {
		<-feeder
		close(b.jobs)
	}()
	b.rescan()
	tick := time.NewTicker(min(max(b.opt.Settle/4, 20*time.Millisecond), time.Second))
	defer tick.Stop()
	rescan := time.NewTicker(b.opt.Rescan)
	defer rescan.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-b.watcher.Events:
			if !ok {
				return errors.New("inbox: the file watcher stopped")
			}
			b.event(ev)
		case err, ok := <-b.watcher.Errors:
			if !ok {
				return errors.New("inbox: the file watcher stopped")
			}
			// An overflow loses events: the rescan finds what they said.
			b.opt.Log.Warn("inbox: file events lost; rescanning", "err", err)
			b.rescan()
		case <-tick.C:
			b.settle()
			if onTick != nil {
				onTick()
			}
		case <-rescan.C:
			b.rescan()
		}
	}
}

// feed hands the queued jobs out in order, as the pipeline takes them, leaving out those a
// newer version of their series replaced. Only feed removes entries from the queue.
func (b *Inbox) feed(ctx context.Context) {
	for {
		b.mu.Lock()
		for len(b.queue) > 0 && b.queue[0].dropped {
			b.queue = b.queue[1:]
		}
		var q *queued
		if len(b.queue) > 0 {
			q = b.queue[0]
		}
		b.mu.Unlock()
		if q == nil {
			select {
			case <-b.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		select {
		case b.jobs <- q.job:
			b.mu.Lock()
			b.queue = b.queue[1:]
			var grew []any
			if q.series != nil {
				grew = b.sentSeries(q)
			}
			b.mu.Unlock()
			if grew != nil {
				b.opt.Log.Warn("inbox: a DICOM series grew or changed after it was handed out for segmentation; "+
					"segmenting it again (its mask, if one was made, is replaced: the records give the reason)", grew...)
			}
		case <-b.wake: // a job queued or dropped: look again
		case <-ctx.Done():
			return
		}
	}
}

// push queues a job (series, ver: a DICOM series' job and the version it reads); b.mu held.
func (b *Inbox) push(job jobs.Job, arrived time.Time, series *dcmSeries, ver version) *queued {
	job.Index = b.next
	job.Arrived = arrived
	b.next++
	q := &queued{job: job, series: series, ver: ver}
	b.queue = append(b.queue, q)
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return q
}
