package inbox

// Volumes (NIfTI files) in the inbox: when each version of one is complete (see the package
// doc), and handing it out.

import (
	"os"
	"path/filepath"
	"time"

	"voxpipe/io/nifti"
	"voxpipe/jobs"
)

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
