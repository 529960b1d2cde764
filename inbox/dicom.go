package inbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"voxpipe/io/dicom"
	"voxpipe/jobs"
)

// DICOM series in the inbox. Every file that is not a volume, not hidden and not a marker is
// a DICOM candidate (dicom.Candidate). Each version of a candidate is parsed once, up to its
// pixel data, at the settle tick after it is seen; the files that parse as DICOM images are
// grouped by SeriesInstanceUID across the inbox's folders (as `run` groups the files of its
// inputs). A series is handed out once it is settled: none of its files new or changed for
// Options.Settle, no candidate in its folders still unreadable and changing, and a fresh
// listing of its folders showing nothing new. Its jobs are made by jobs.DICOMJobs, as
// `run` makes them. Each version of a series (its files' sizes and mtimes) is handed out
// once; a version queued but not yet taken is replaced by a newer one. A series that grows or
// changes after a version of it was taken by the pipeline is handed out again with a warning
// (and the pipeline records the redo with the reason, provenance.Check); files that merely
// disappear hand nothing out.

// fileVersion is a file's size and modification time, as last seen.
type fileVersion struct {
	size  int64
	mtime time.Time
}

func versionOf(st fs.FileInfo) fileVersion { return fileVersion{st.Size(), st.ModTime()} }

func (v fileVersion) same(o fileVersion) bool { return v.size == o.size && v.mtime.Equal(o.mtime) }

// version is a series' files and their versions.
type version map[string]fileVersion

// dcmFile is what the inbox knows of one DICOM candidate.
type dcmFile struct {
	root    string
	ver     fileVersion
	changed time.Time // when it was first seen or last changed, as observed
	parsed  bool      // ver was parsed: uid or err holds the outcome
	uid     string    // SeriesInstanceUID of an image file
	err     error     // why it is not an image file
	// stable: part of a version handed out, or found not to be a DICOM image once settled;
	// settle ticks look again only at the files that are not.
	stable bool
}

// dcmSeries is what the inbox knows of one series (a SeriesInstanceUID).
type dcmSeries struct {
	queued  version   // the version last queued; nil: none
	sent    version   // the version last taken by the pipeline; nil: none
	retryAt time.Time // Defer: hand out again from then on
	entries []*queued // its queued entries (dropped when a newer version is queued)
}

// part10Prefix is the length of a Part 10 file's preamble and "DICM": a file this long that
// does not parse as DICOM is none (a shorter one may be one still being written).
const part10Prefix = 132

// anyLeft reports whether a file of v is still a candidate; b.mu held.
func (b *Inbox) anyLeft(v version) bool {
	for p := range v {
		if _, ok := b.dcm[p]; ok {
			return true
		}
	}
	return false
}

// changes lists the files of now that base lacks (added) or holds in another version.
func changes(now, base version) (added, changed []string) {
	for p, v := range now {
		if b, ok := base[p]; !ok {
			added = append(added, filepath.Base(p))
		} else if !b.same(v) {
			changed = append(changed, filepath.Base(p))
		}
	}
	slices.Sort(added)
	slices.Sort(changed)
	return added, changed
}

// candidate reports whether a file name may be DICOM: not a volume, not hidden, not a marker.
func (b *Inbox) candidate(name string) bool {
	return dicom.Candidate(name) && !jobs.IsVolumeName(name) && !strings.HasSuffix(name, b.opt.ReadySuffix)
}

// observeDICOM looks at the DICOM candidate at path (under inbox root) and reports whether it
// is new or changed.
func (b *Inbox) observeDICOM(path, root string) bool {
	if root == "" {
		return false
	}
	st, err := os.Stat(path)
	if err != nil {
		b.forgetDICOM(path)
		return false
	}
	if st.IsDir() {
		return false
	}
	if !st.Mode().IsRegular() {
		b.note(path, slog.LevelInfo, "inbox: left out a file that is not a regular file", "type", st.Mode().Type().String())
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seenDICOM(path, root, versionOf(st), time.Now())
}

// seenDICOM records a version of a candidate file; b.mu held.
func (b *Inbox) seenDICOM(path, root string, v fileVersion, now time.Time) bool {
	f, ok := b.dcm[path]
	if !ok {
		b.dcm[path] = &dcmFile{root: root, ver: v, changed: now}
		return true
	}
	if f.ver.same(v) {
		return false
	}
	*f = dcmFile{root: root, ver: v, changed: now}
	return true
}

// forgetDICOM forgets a file that is gone: a new file at its path is judged, and said, anew.
func (b *Inbox) forgetDICOM(path string) {
	b.mu.Lock()
	delete(b.dcm, path)
	delete(b.noted, path)
	b.mu.Unlock()
}

// note logs a file left out, once per path.
func (b *Inbox) note(path string, level slog.Level, msg string, args ...any) {
	b.mu.Lock()
	said := b.noted[path]
	b.noted[path] = true
	b.mu.Unlock()
	if !said {
		b.opt.Log.Log(context.Background(), level, msg, append([]any{"file", path}, args...)...)
	}
}

// readySeries is a settled series to hand out.
type readySeries struct {
	uid   string
	s     *dcmSeries
	files []string // its image files
	extra []string // unreadable DICOM files in its folders, for DICOMJobs to judge as run does
	dirs  []string
	cur   version
}

// settleDICOM looks again at the candidates not yet judged and hands out the series that have
// settled (see the top of this file).
func (b *Inbox) settleDICOM(now time.Time) {
	b.lookAgainDICOM()
	b.parseDICOM()
	b.mu.Lock()
	g := b.groupDICOM(now)
	for uid, s := range b.series {
		if len(g.members[uid]) == 0 && !b.anyLeft(s.queued) {
			delete(b.series, uid) // its files are gone
		}
	}
	var ready []readySeries
	for uid, files := range g.members {
		if r, ok := b.settledSeries(uid, files, g, now); ok {
			ready = append(ready, r)
		}
	}
	b.mu.Unlock()

	for _, l := range g.leftOut {
		switch {
		case errors.Is(l.err, dicom.ErrNotDICOM):
			b.note(l.path, slog.LevelInfo, "inbox: left out a file that is not a volume or DICOM file")
		case errors.Is(l.err, dicom.ErrNoPixels):
			b.note(l.path, slog.LevelInfo, "inbox: left out a DICOM file that holds no image")
		default:
			b.note(l.path, slog.LevelWarn, "inbox: cannot read a DICOM file", "err", l.err)
		}
	}
	for _, r := range ready {
		b.handSeries(r, now)
	}
}

// lookAgainDICOM looks again at the files not yet judged: events may be missing (network file
// systems).
func (b *Inbox) lookAgainDICOM() {
	b.mu.Lock()
	var look []string
	for p, f := range b.dcm {
		if !f.stable {
			look = append(look, p)
		}
	}
	b.mu.Unlock()
	for _, p := range look {
		b.mu.Lock()
		f, ok := b.dcm[p]
		var root string
		if ok {
			root = f.root
		}
		b.mu.Unlock()
		if ok {
			b.observeDICOM(p, root)
		}
	}
}

// dcmGroups is the candidates as a settle tick finds them, once parsed.
type dcmGroups struct {
	members map[string][]string // image files, by SeriesInstanceUID
	// busy: folders that hold a candidate not (yet) readable and still changing, unless it is
	// long enough to tell it is no DICOM file (a table being rewritten must not hold series up).
	busy       map[string]bool
	unreadable map[string][]string // settled DICOM files that cannot be read, by folder
	leftOut    []leftOutFile       // files found, at this tick, to be no DICOM image
}

// leftOutFile is a settled candidate that is no DICOM image, and why.
type leftOutFile struct {
	path string
	err  error
}

// groupDICOM groups the parsed candidates by series and finds the busy folders; b.mu held.
func (b *Inbox) groupDICOM(now time.Time) dcmGroups {
	g := dcmGroups{members: map[string][]string{}, busy: map[string]bool{}, unreadable: map[string][]string{}}
	for p, f := range b.dcm {
		switch {
		case !f.parsed: // changed while it was parsed: parsed again at the next tick
			g.busy[filepath.Dir(p)] = true
		case f.err == nil:
			g.members[f.uid] = append(g.members[f.uid], p)
		case now.Sub(f.changed) < b.opt.Settle:
			if !errors.Is(f.err, dicom.ErrNotDICOM) || f.ver.size < part10Prefix {
				g.busy[filepath.Dir(p)] = true
			}
		case !f.stable:
			f.stable = true
			g.leftOut = append(g.leftOut, leftOutFile{p, f.err})
			fallthrough
		default:
			if !errors.Is(f.err, dicom.ErrNotDICOM) && !errors.Is(f.err, dicom.ErrNoPixels) {
				g.unreadable[filepath.Dir(p)] = append(g.unreadable[filepath.Dir(p)], p)
			}
		}
	}
	return g
}

// settledSeries reports whether the series uid, with these image files, is settled and has a
// version not queued yet: then it returns it, to hand out; b.mu held.
func (b *Inbox) settledSeries(uid string, files []string, g dcmGroups, now time.Time) (readySeries, bool) {
	s := b.series[uid]
	if s == nil {
		s = &dcmSeries{}
		b.series[uid] = s
	}
	var last time.Time
	dirs := map[string]bool{}
	cur := version{}
	for _, p := range files {
		f := b.dcm[p]
		if f.changed.After(last) {
			last = f.changed
		}
		dirs[filepath.Dir(p)] = true
		cur[p] = f.ver
	}
	waiting := now.Sub(last) < b.opt.Settle || (!s.retryAt.IsZero() && now.Before(s.retryAt))
	for d := range dirs {
		waiting = waiting || g.busy[d]
	}
	if waiting {
		return readySeries{}, false
	}
	if s.retryAt.IsZero() && s.queued != nil {
		if added, changed := changes(cur, s.queued); len(added)+len(changed) == 0 {
			for _, p := range files {
				b.dcm[p].stable = true // the version handed out, or what is left of it
			}
			return readySeries{}, false
		}
	}
	r := readySeries{uid: uid, s: s, files: files, cur: cur, dirs: slices.Sorted(maps.Keys(dirs))}
	for _, d := range r.dirs {
		r.extra = append(r.extra, g.unreadable[d]...)
	}
	return r, true
}

// parseDICOM parses, in parallel, the candidates whose current version has not been parsed.
func (b *Inbox) parseDICOM() {
	b.mu.Lock()
	var paths []string
	var vers []fileVersion
	for p, f := range b.dcm {
		if !f.parsed {
			paths = append(paths, p)
			vers = append(vers, f.ver)
		}
	}
	b.mu.Unlock()
	if len(paths) == 0 {
		return
	}
	files, errs := dicom.ParseFiles(paths, 0)
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, p := range paths {
		f := b.dcm[p]
		if f == nil || !f.ver.same(vers[i]) {
			continue // gone or changed meanwhile: parsed again at a later tick
		}
		f.parsed, f.err = true, errs[i]
		switch {
		case f.err != nil:
		case !files[i].HasPixels():
			f.err = fmt.Errorf("%s: %w", p, dicom.ErrNoPixels)
		default:
			f.uid = files[i].SeriesInstanceUID
		}
	}
}

// handSeries queues the jobs of a settled series, after a listing of its folders shows no
// file that events did not announce.
func (b *Inbox) handSeries(r readySeries, now time.Time) {
	fresh := false
	for _, d := range r.dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, de := range entries {
			if !de.IsDir() && b.candidate(de.Name()) && b.observeDICOM(filepath.Join(d, de.Name()), b.rootOf(d)) {
				fresh = true
			}
		}
	}
	if fresh {
		return // looked at again once the new files are judged
	}
	slices.Sort(r.files)
	batch, err := jobs.DICOMJobs(append(slices.Clone(r.files), r.extra...), b.opt.OutDir, b.opt.MaskName, b.opt.DICOMName)
	if err != nil {
		b.opt.Log.Error("inbox: DICOM series", "err", err)
		return
	}
	b.mu.Lock()
	if b.series[r.uid] != r.s {
		b.mu.Unlock()
		return // gone meanwhile
	}
	for _, q := range r.s.entries {
		if !q.dropped {
			q.dropped = true // a newer version replaces one the pipeline has not taken
		}
	}
	r.s.entries = r.s.entries[:0]
	r.s.queued, r.s.retryAt = r.cur, time.Time{}
	for _, p := range r.files {
		if f := b.dcm[p]; f != nil {
			f.stable = true
		}
	}
	var names []string
	for _, job := range batch {
		if job.Series == nil || job.Series.UID != r.uid {
			continue // an unreadable neighbour's own outcome is its series' business
		}
		r.s.entries = append(r.s.entries, b.push(job, now, r.s, r.cur))
		names = append(names, job.Name)
	}
	b.mu.Unlock()
	if len(names) > 0 {
		b.opt.Log.Info("inbox: DICOM series complete", "series", names, "files", len(r.files))
	}
}

// sentSeries records that the pipeline took a series' job; b.mu held. It returns the warning
// to log when an earlier version of the series was taken before: the series grew or changed
// after it was handed out, and is segmented again.
func (b *Inbox) sentSeries(q *queued) []any {
	s := q.series
	before := s.sent
	s.sent = q.ver
	if before == nil {
		return nil
	}
	added, changed := changes(q.ver, before)
	if len(added)+len(changed) == 0 {
		return nil
	}
	attrs := []any{"series", q.job.Name, "files_before", len(before), "files_now", len(q.ver)}
	if len(added) > 0 {
		attrs = append(attrs, "new_files", clip(added))
	}
	if len(changed) > 0 {
		attrs = append(attrs, "changed_files", clip(changed))
	}
	return attrs
}

// clip shortens a list of file names for a log line.
func clip(names []string) string {
	const most = 5
	if len(names) > most {
		return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
	}
	return strings.Join(names, ", ")
}
