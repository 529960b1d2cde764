// Package records lays out the records of runs that share an output folder, so that no run can
// damage another's:
//
//	OUT/runs/<run_id>/timings.csv   one row per stage event of that run
//	OUT/runs/<run_id>/summary.csv   one row per volume of that run
//	OUT/volumes.csv                 one row per volume: its latest outcome over all runs
//
// A run creates its own folder exclusively and its CSVs with O_EXCL, and appends whole records
// in single writes as volumes finish; it never opens another run's files for writing.
// volumes.csv is derived from all runs' summary.csv: each run regenerates it at its end, under
// a lock, into a temporary file renamed over the old table, so readers see the old table or the
// new one, never a mix.
package records

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gocarina/gocsv"
	"github.com/gofrs/flock"

	"voxpipe/internal/atomicfile"
	"voxpipe/telemetry/timing"
)

// File and folder names under the output folder.
const (
	RunsDir     = "runs"
	TimingsName = "timings.csv"
	SummaryName = "summary.csv"
	VolumesName = "volumes.csv"
	// LockName serialises the regeneration of volumes.csv.
	LockName = ".voxpipe-records.lock"
)

// ErrRunExists: the run id names a run already recorded in this output folder.
var ErrRunExists = errors.New("records: run id already recorded in this output folder")

// TimeFormat is the format of summary.csv's finished_at: UTC, fixed width, so that the text
// sorts as the time does.
const TimeFormat = "2006-01-02T15:04:05.000000000Z"

// Stamp formats t for finished_at.
func Stamp(t time.Time) string { return t.UTC().Format(TimeFormat) }

// CheckRunID refuses run ids that are not a plain folder name.
func CheckRunID(id string) error {
	if id == "" || id == "." || id == ".." || filepath.Base(id) != id {
		return fmt.Errorf("records: run id %q must be a plain folder name (no /)", id)
	}
	return nil
}

// CheckNew reports, without writing anything, whether run id can be created under out: a
// plain folder name (CheckRunID) whose run folder does not exist (ErrRunExists).
func CheckNew(out, id string) error {
	if err := CheckRunID(id); err != nil {
		return err
	}
	if dir := RunDir(out, id); exists(dir) {
		return fmt.Errorf("%w: %s", ErrRunExists, dir)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// RunDir is the folder of run id's records.
func RunDir(out, id string) string { return filepath.Join(out, RunsDir, id) }

// Run is one run's record files.
type Run struct {
	ID, Dir string
	Timings *timing.CSVFile[timing.Row]
	Summary *timing.CSVFile[timing.Summary]
}

// Create makes run id's folder with its two CSVs, headers written, all at once: they are made
// in a hidden staging folder which is then renamed to runs/<id>, so no reader ever sees a
// run folder without both files, or a file without its header (a process killed midway leaves
// only the staging folder, which later runs remove). It fails with ErrRunExists when the run's
// folder exists, whoever made it.
func Create(out, id string) (*Run, error) {
	if err := CheckRunID(id); err != nil {
		return nil, err
	}
	runs := filepath.Join(out, RunsDir)
	if err := os.MkdirAll(runs, 0o755); err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	removeStaleStaging(runs, time.Now())
	dir := RunDir(out, id)
	if exists(dir) {
		return nil, fmt.Errorf("%w: %s", ErrRunExists, dir)
	}
	host, _ := os.Hostname()
	staging, err := os.MkdirTemp(runs, fmt.Sprintf("%s%s-%d-", stagingPrefix, host, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	os.Chmod(staging, 0o755)
	r, err := CreateAt(id, filepath.Join(staging, TimingsName), filepath.Join(staging, SummaryName))
	if err == nil {
		// Onto an existing run folder (made meanwhile) the rename fails: it is not empty.
		if err = os.Rename(staging, dir); err != nil {
			r.Close()
			if exists(dir) {
				err = fmt.Errorf("%w: %s", ErrRunExists, dir)
			}
		}
	}
	if err != nil {
		os.RemoveAll(staging)
		return nil, fmt.Errorf("records: %w", err)
	}
	r.Dir = dir
	r.Timings.Moved(filepath.Join(dir, TimingsName))
	r.Summary.Moved(filepath.Join(dir, SummaryName))
	return r, nil
}

// stagingPrefix names the staging folders of Create: ".staging-<host>-<pid>-<random>".
const stagingPrefix = ".staging-"

// staleStagingAge is when another host's staging folder is surely abandoned (Create takes
// milliseconds).
const staleStagingAge = time.Hour

// removeStaleStaging removes the staging folders under runs that processes killed in Create
// left: this host's whose process is gone, other hosts' older than staleStagingAge.
func removeStaleStaging(runs string, now time.Time) {
	entries, _ := os.ReadDir(runs)
	host, _ := os.Hostname()
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), stagingPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		p := filepath.Join(runs, e.Name())
		// rest is "<host>-<pid>-<random>"; host names may hold dashes, the other two do not.
		parts := strings.Split(rest, "-")
		stale := false
		if len(parts) >= 3 && strings.Join(parts[:len(parts)-2], "-") == host {
			pid, err := strconv.Atoi(parts[len(parts)-2])
			stale = err == nil && !processExists(pid)
		} else if info, err := e.Info(); err == nil {
			stale = now.Sub(info.ModTime()) > staleStagingAge
		}
		if stale {
			os.RemoveAll(p)
		}
	}
}

// processExists reports whether pid names a running process on this host.
func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// CreateAt creates the two CSVs at the paths given (the CLI's --timings and --summary), and
// their folders, failing if either file exists.
func CreateAt(id, timingsPath, summaryPath string) (*Run, error) {
	r := &Run{ID: id, Dir: filepath.Dir(summaryPath)}
	for _, p := range []string{timingsPath, summaryPath} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("records: %w", err)
		}
	}
	var err error
	if r.Timings, err = timing.CreateNewCSV[timing.Row](timingsPath); err != nil {
		return nil, err
	}
	if r.Summary, err = timing.CreateNewCSV[timing.Summary](summaryPath); err != nil {
		r.Timings.Close()
		return nil, err
	}
	return r, nil
}

// Close syncs and closes both files.
func (r *Run) Close() error {
	return errors.Join(r.Timings.Close(), r.Summary.Close())
}

// RunDirs lists the run folders under out, sorted by name.
func RunDirs(out string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(out, RunsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") { // not a staging folder
			dirs = append(dirs, filepath.Join(out, RunsDir, e.Name()))
		}
	}
	return dirs, nil
}

// decisive outcomes supersede the others: a later skipped row (the mask was found up to date)
// or busy row (another process had the volume) says nothing new about the volume's mask.
func decisive(s timing.Status) bool {
	return s == timing.StatusOK || s == timing.StatusFailed || s == timing.StatusConflict
}

// Latest reduces summary rows of any number of runs to one per volume: the latest decisive
// outcome (ok, failed, conflict) by finished_at, then run id; a volume with none has its
// latest row of any status. Rows of older runs without finished_at count as oldest. The result
// is sorted by volume.
func Latest(rows []timing.Summary) []timing.Summary {
	byVolume := map[string]timing.Summary{}
	newer := func(a, b timing.Summary) bool { // a is newer than b
		if da, db := decisive(a.Status), decisive(b.Status); da != db {
			return da
		}
		return cmp.Or(cmp.Compare(a.FinishedAt, b.FinishedAt), cmp.Compare(a.RunID, b.RunID)) > 0
	}
	for _, r := range rows {
		if prev, ok := byVolume[r.Volume]; !ok || newer(r, prev) {
			byVolume[r.Volume] = r
		}
	}
	out := make([]timing.Summary, 0, len(byVolume))
	for _, r := range byVolume {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b timing.Summary) int { return cmp.Compare(a.Volume, b.Volume) })
	return out
}

// ReadSummaries reads the summary.csv of every run under out. Files that cannot be read or
// parsed are left out and reported in the joined error; the rows of the others are returned.
func ReadSummaries(out string) ([]timing.Summary, error) {
	dirs, err := RunDirs(out)
	if err != nil {
		return nil, err
	}
	var rows []timing.Summary
	var errs []error
	for _, d := range dirs {
		rs, err := timing.ReadSummaries(filepath.Join(d, SummaryName))
		if errors.Is(err, fs.ErrNotExist) {
			continue // a run killed before it made its files
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rows = append(rows, rs...)
	}
	return rows, errors.Join(errs...)
}

// UpdateVolumes regenerates out/volumes.csv from every run's summary.csv, under the records
// lock, atomically. It writes the table also when some run's file could not be read, and
// returns that error.
func UpdateVolumes(out string) error {
	return WithLock(out, func() error { return updateVolumes(out) })
}

// WithLock runs f holding the records lock of the output folder out, which serialises the
// regeneration of the tables derived from several runs (volumes.csv, statistics.csv).
func WithLock(out string, f func() error) error {
	lock := flock.New(filepath.Join(out, LockName))
	if err := lock.Lock(); err != nil {
		return fmt.Errorf("records: lock %s: %w", lock.Path(), err)
	}
	defer lock.Unlock()
	return f()
}

func updateVolumes(out string) error {
	removeStaleStaging(filepath.Join(out, RunsDir), time.Now())
	// Temporaries of a regeneration killed midway: nobody else writes one while we hold the lock.
	if stale, err := filepath.Glob(filepath.Join(out, "."+VolumesName+".tmp-*")); err == nil {
		for _, s := range stale {
			os.Remove(s)
		}
	}
	rows, readErr := ReadSummaries(out)
	latest := Latest(rows)
	if err := writeAtomic(filepath.Join(out, VolumesName), latest); err != nil {
		return errors.Join(err, readErr)
	}
	return readErr
}

// Settled reports whether out/volumes.csv already says all that a run finding each of volumes
// up to date (skipped) could add to it: whether such a run may leave no trace. A skipped row
// changes a volume's entry only where the table has none (Latest puts decisive outcomes
// first), or its latest row is busy: a process that committed the mask was killed before its
// own row while another recorded the volume busy. It is false where the table is missing or
// unreadable.
func Settled(out string, volumes []string) bool {
	rows, err := timing.ReadSummaries(filepath.Join(out, VolumesName))
	if err != nil {
		return false
	}
	status := make(map[string]timing.Status, len(rows))
	for _, r := range rows {
		status[r.Volume] = r.Status
	}
	for _, v := range volumes {
		if s, ok := status[v]; !ok || s == timing.StatusBusy {
			return false
		}
	}
	return true
}

// writeAtomic replaces path with the table of rows.
func writeAtomic(path string, rows []timing.Summary) error {
	if err := atomicfile.Write(path, func(w io.Writer) error { return gocsv.Marshal(&rows, w) }); err != nil {
		return fmt.Errorf("records: %w", err)
	}
	return nil
}

// IgnoredName is the list of input files a run left out as not volumes (not NIfTI, not a
// DICOM image, not a regular file) or as exact duplicates, in the run's folder.
const IgnoredName = "ignored.csv"

// Ignored is a row of ignored.csv.
type Ignored struct {
	RunID  string `csv:"run_id"`
	Path   string `csv:"path"`
	Reason string `csv:"reason"`
}

// WriteIgnored writes rows as dir/ignored.csv, whole (a temporary file renamed).
func WriteIgnored(dir string, rows []Ignored) error {
	err := atomicfile.Write(filepath.Join(dir, IgnoredName), func(w io.Writer) error {
		return gocsv.Marshal(rows, w)
	})
	if err != nil {
		return fmt.Errorf("records: %s: %w", IgnoredName, err)
	}
	return nil
}
