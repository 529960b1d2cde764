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
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"voxpipe/io/dicom"
	"voxpipe/io/nifti"
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

// entry is what the inbox knows of one file.
type entry struct {
	root    string    // the inbox folder it is under
	size    int64     // last seen
	mtime   time.Time // last seen
	changed time.Time // when size or mtime last changed, as observed
	sent    bool      // this version (size, mtime) was handed out
	// notBefore: a deferred volume (Defer) is handed out again from then on.
	notBefore time.Time
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

func (b *Inbox) event(ev fsnotify.Event) {
	path := ev.Name
	name := filepath.Base(path)
	switch {
	case ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename):
		b.mu.Lock()
		delete(b.files, path)
		delete(b.dirs, path)
		delete(b.dcm, path)
		delete(b.noted, path)
		b.mu.Unlock()
	case strings.HasSuffix(name, b.opt.ReadySuffix):
		vol := strings.TrimSuffix(path, b.opt.ReadySuffix)
		if jobs.IsVolumeName(filepath.Base(vol)) {
			b.observe(vol, b.rootOf(filepath.Dir(path)), true)
		}
	case ev.Has(fsnotify.Create):
		root := b.rootOf(filepath.Dir(path))
		if st, err := os.Stat(path); err == nil && st.IsDir() {
			if b.opt.Recursive && root != "" {
				if err := b.watchTree(root, path); err != nil {
					b.opt.Log.Warn("inbox: cannot watch a new folder", "folder", path, "err", err)
				}
			} else if root != "" {
				b.noteUnwatched(path, st)
			}
			return
		}
		if jobs.IsVolumeName(name) {
			// A new file at this name: renamed in (complete at once) or a writer's new file.
			b.observeNew(path, root)
		} else if b.candidate(name) {
			b.observeDICOM(path, root)
		}
	case ev.Has(fsnotify.Write) || ev.Has(fsnotify.Chmod):
		if jobs.IsVolumeName(name) {
			b.observe(path, b.rootOf(filepath.Dir(path)), false)
		} else if b.candidate(name) {
			b.observeDICOM(path, b.rootOf(filepath.Dir(path)))
		}
	}
}

// observeNew looks at a file that a Create event announced: a version not seen before is
// judged as at its first sighting (complete: taken at once).
func (b *Inbox) observeNew(path, root string) {
	if st, err := os.Stat(path); err == nil {
		b.mu.Lock()
		if e, ok := b.files[path]; ok && (st.Size() != e.size || !st.ModTime().Equal(e.mtime)) {
			delete(b.files, path)
		}
		b.mu.Unlock()
	}
	b.observe(path, root, false)
}

// Defer hands the job's volume or DICOM series out again (its current version), at the
// earliest after delay: the pipeline found it claimed by a live process, which may yet fail
// or die.
func (b *Inbox) Defer(job jobs.Job, delay time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if job.Series != nil {
		if s, ok := b.series[job.Series.UID]; ok {
			s.retryAt = time.Now().Add(delay)
		}
		return
	}
	if e, ok := b.files[job.Input]; ok {
		e.sent, e.notBefore = false, time.Now().Add(delay)
	}
}

// observe looks at the volume file at path (under inbox root) and hands it out when it is
// complete (see the package doc). marked: its .ready marker appeared.
func (b *Inbox) observe(path, root string, marked bool) {
	if root == "" {
		return
	}
	st, err := os.Stat(path)
	if err != nil {
		b.mu.Lock()
		delete(b.files, path)
		b.mu.Unlock()
		return
	}
	now := time.Now()
	b.mu.Lock()
	e, known := b.files[path]
	if !known {
		e = &entry{root: root, size: st.Size(), mtime: st.ModTime(), changed: now}
		b.files[path] = e
	} else if st.Size() != e.size || !st.ModTime().Equal(e.mtime) {
		e.size, e.mtime, e.changed, e.sent, e.notBefore = st.Size(), st.ModTime(), now, false, time.Time{}
	}
	if e.sent || now.Before(e.notBefore) {
		b.mu.Unlock()
		return
	}
	settled := now.Sub(e.changed) >= b.opt.Settle
	deferred := !e.notBefore.IsZero()
	b.mu.Unlock()
	if deferred {
		b.hand(path, root, now) // complete before: it was handed out already
		return
	}

	// A volume with a file that is not regular (a FIFO .img) never completes: it is handed out
	// at once, and fails, named, without being opened.
	ready := marked || settled || !st.Mode().IsRegular() || jobs.CheckRegular(path) != nil
	if !ready && !marked {
		if _, err := os.Stat(path + b.opt.ReadySuffix); err == nil {
			ready = true
		}
	}
	if !ready && !known {
		ready = complete(path)
	}
	if ready {
		b.hand(path, root, now)
	}
}

// complete reports whether the file at path holds all the data its header declares.
func complete(path string) bool {
	h, err := nifti.ReadHeader(path)
	return err == nil && nifti.CheckComplete(path, h) == nil
}

// hand queues the job of the volume at path, once for this version.
func (b *Inbox) hand(path, root string, arrived time.Time) {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return
	}
	job, own := jobs.JobFor(path, rel, b.opt.OutDir, b.opt.MaskName)
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.files[path]
	if e == nil || e.sent {
		return
	}
	e.sent = true
	if own {
		if !b.ignored[path] {
			b.ignored[path] = true
			b.opt.Log.Info("inbox: left out a voxpipe mask", "file", path)
		}
		return
	}
	b.push(job, arrived, nil, nil)
}

// settle looks again at the files and series waiting to be complete.
func (b *Inbox) settle() {
	b.mu.Lock()
	var waiting []string
	roots := map[string]string{}
	for p, e := range b.files {
		if !e.sent {
			waiting = append(waiting, p)
			roots[p] = e.root
		}
	}
	b.mu.Unlock()
	for _, p := range waiting {
		b.observe(p, roots[p], false)
	}
	b.settleDICOM(time.Now())
}

// rescan walks the folders for files that events did not announce (network file systems,
// lost events, files there before the start).
func (b *Inbox) rescan() {
	b.mu.Lock()
	dirs := make(map[string]string, len(b.dirs))
	for d, root := range b.dirs {
		dirs[d] = root
	}
	b.mu.Unlock()
	for d, root := range dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, de := range entries {
			p := filepath.Join(d, de.Name())
			if de.IsDir() {
				if b.opt.Recursive && !b.watched(p) && !strings.HasPrefix(de.Name(), ".") {
					b.watchTree(root, p)
				} else if !b.opt.Recursive {
					if st, err := os.Stat(p); err == nil {
						b.noteUnwatched(p, st)
					}
				}
				continue
			}
			if jobs.IsVolumeName(de.Name()) {
				b.observe(p, root, false)
			} else if b.candidate(de.Name()) {
				b.observeDICOM(p, root)
			}
		}
	}
}

// noteUnwatched says once that a sub-folder of an inbox is not watched without -r (a DICOM
// series copied in as a folder, say), unless it is hidden or the output folder.
func (b *Inbox) noteUnwatched(dir string, st fs.FileInfo) {
	if strings.HasPrefix(filepath.Base(dir), ".") || b.outInfo != nil && os.SameFile(st, b.outInfo) {
		return
	}
	b.mu.Lock()
	seen := b.ignored[dir]
	b.ignored[dir] = true
	b.mu.Unlock()
	if !seen {
		b.opt.Log.Warn("inbox: a sub-folder is not watched: its files are not segmented (watch -r watches sub-folders)", "folder", dir)
	}
}

func (b *Inbox) watched(dir string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.dirs[dir]
	return ok
}

func (b *Inbox) rootOf(dir string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dirs[dir]
}

// watchTree watches dir (under inbox root) and, when recursive, its subfolders, but the output
// folder and hidden folders.
func (b *Inbox) watchTree(root, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != dir && (!b.opt.Recursive || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if info, err := d.Info(); err == nil && b.outInfo != nil && p != root && os.SameFile(info, b.outInfo) {
			return filepath.SkipDir
		}
		if err := b.watcher.Add(p); err != nil {
			return fmt.Errorf("inbox: watch %s: %w", p, err)
		}
		b.mu.Lock()
		b.dirs[p] = root
		b.mu.Unlock()
		return nil
	})
}
