package dicom

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// Skipped is a file a scan left out, and why (ErrNotDICOM, ErrNoPixels for DICOMDIRs and
// reports, a parse error).
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
// is not DICOM is an error; in folders such files are listed in Skipped.
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
			if d.Type().IsRegular() && Candidate(d.Name()) {
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

// ScanFiles parses files on workers goroutines (0: GOMAXPROCS) and groups them into series;
// files that are not DICOM images, or cannot be parsed, are listed in Skipped.
func ScanFiles(files []string, workers int) *Scan {
	parsed, errs := ParseFiles(files, workers)
	scan := &Scan{}
	var ok []*File
	for i, f := range parsed {
		switch {
		case errs[i] != nil:
			scan.Skipped = append(scan.Skipped, Skipped{files[i], errs[i]})
		case !f.HasPixels():
			scan.Skipped = append(scan.Skipped, Skipped{files[i], fmt.Errorf("%s: %w", files[i], ErrNoPixels)})
		default:
			ok = append(ok, f)
		}
	}
	scan.Series = Group(ok)
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

// ParseFiles parses files on workers goroutines (0: GOMAXPROCS); result i is file i's.
func ParseFiles(files []string, workers int) ([]*File, []error) {
	out := make([]*File, len(files))
	errs := make([]error, len(files))
	forEach(len(files), workers, func(_, i int) error {
		out[i], errs[i] = ParseFile(files[i])
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
