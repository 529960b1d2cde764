package dicom

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"voxpipe/internal/regular"
)

// Skipped is a file a scan left out as not a DICOM image, and why: not DICOM (ErrNotDICOM),
// DICOM without an image (ErrNoPixels: a DICOMDIR, a report), or not a regular file (wrapping
// regular.ErrNotRegular: a FIFO, a socket, a device, never opened). A DICOM file that cannot be
// read is not skipped: it fails its series (see ScanFiles).
type Skipped struct {
	Path string
	Err  error
}

// Scan is what ScanPaths found.
type Scan struct {
	Series  []*Series
	Skipped []Skipped
}

// ScanPaths parses the files named by paths (folders are walked; hidden files and NIfTI
// volumes in them are not DICOM candidates) on workers goroutines (0: GOMAXPROCS), each file
// read only up to its pixel data, and groups them into series. A file named explicitly that
// is not DICOM, or cannot be read, is an error; in folders such files are listed in Skipped,
// or fail their series (see ScanFiles).
func ScanPaths(paths []string, workers int) (*Scan, error) {
	var files []string
	named := map[string]bool{}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			named[p] = true
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if path != p && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			// Links and special files too: a link is followed when opened, and a FIFO is
			// refused (regular.Open) and listed, not skipped silently.
			if !d.IsDir() && Candidate(d.Name()) {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for _, p := range files {
		if named[p] {
			if _, err := ParseFile(p); err != nil {
				return nil, err
			}
		}
	}
	return ScanFiles(files, workers), nil
}

// ScanFiles parses files on workers goroutines (0: GOMAXPROCS) and groups them into series.
// Files that are not DICOM images (see Skipped) are listed in Skipped. Every other file that
// cannot be read fails a series, named in its error with the reason: a DICOM file cut short
// or that does not parse, one that cannot be opened (permission denied, gone). Its series is
// the one of the SeriesInstanceUID read before the damage (its UIDs precede the pixel data),
// or, when none could be read (the damage is in its meta group, or it could not be opened),
// every series with a file in its folder; a broken file that fails no series is reported as
// a failed series of its own (see Group). Pixel data shorter than the image declares is such
// damage: found here, from the file's size (a deflated file is inflated through to its end).
func ScanFiles(files []string, workers int) *Scan {
	parsed, errs := ParseFiles(files, workers)
	scan := &Scan{}
	var ok []*File
	var bad []broken
	for i, f := range parsed {
		switch err := errs[i]; {
		case err == nil && f.SOPClassUID == segmentationClass:
			// a derived object (voxpipe's own output among them), not an image of a series
			scan.Skipped = append(scan.Skipped, Skipped{files[i], fmt.Errorf("%s: a DICOM Segmentation, not an image: %w", files[i], ErrNoPixels)})
		case err == nil && f.HasPixels():
			ok = append(ok, f)
		case err == nil:
			scan.Skipped = append(scan.Skipped, Skipped{files[i], fmt.Errorf("%s: %w", files[i], ErrNoPixels)})
		case errors.Is(err, ErrNotDICOM) || errors.Is(err, regular.ErrNotRegular):
			scan.Skipped = append(scan.Skipped, Skipped{files[i], err})
		default:
			bad = append(bad, broken{path: files[i], file: f, err: err})
		}
	}
	scan.Series = group(ok, bad)
	return scan
}

// Candidate reports whether a file in a folder may be DICOM: anything but hidden files and
// NIfTI volumes (DICOM files often have no extension at all).
func Candidate(name string) bool {
	lower := strings.ToLower(name)
	if strings.HasPrefix(name, ".") {
		return false
	}
	for _, ext := range []string{".nii", ".nii.gz", ".hdr", ".img", ".hdr.gz", ".img.gz"} {
		if strings.HasSuffix(lower, ext) {
			return false
		}
	}
	return true
}

// ParseFiles parses files on workers goroutines (0: GOMAXPROCS); result i is file i's. A
// file that is DICOM and fails to parse has both an error and a File holding what could be
// read of its identity (SeriesInstanceUID and the others, when they precede the damage).
func ParseFiles(files []string, workers int) ([]*File, []error) {
	out := make([]*File, len(files))
	errs := make([]error, len(files))
	forEach(len(files), workers, func(_, i int) error {
		out[i], errs[i] = parseFile(files[i])
		return nil
	})
	return out, errs
}

// forEach calls fn(worker, i) for i in 0..n-1 on workers goroutines (0: GOMAXPROCS), each
// taking the next i; it returns the first error, after which no new i is started.
func forEach(n, workers int, fn func(worker, i int) error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var next atomic.Int64
	var g errgroup.Group
	for w := range min(workers, n) {
		g.Go(func() error {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := fn(w, i); err != nil {
					next.Store(int64(n))
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}
