package inbox

// Following the folders: file events, rescans, and which folders are watched.

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"

	"voxpipe/jobs"
)

// event looks at the file a watcher event names: a volume, its marker or a DICOM candidate;
// a new sub-folder is watched (recursive) or noted.
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
