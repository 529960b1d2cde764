package inbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fsnotify/fsnotify"

	"voxpipe/internal/dicomtest"
	"voxpipe/jobs"
)

func testSeries(uid string, number int) dicomtest.Series {
	return dicomtest.Series{StudyUID: "1.2.826.0.1", SeriesUID: uid, Number: number, Rows: 10, Columns: 12,
		Description: "T1", PatientID: "P1"}
}

// checkSeriesJob checks a job reads the series' first n slices.
func checkSeriesJob(t *testing.T, d *testBox, j jobs.Job, s dicomtest.Series, n int) {
	t.Helper()
	if j.Series == nil || j.Err != nil {
		t.Fatalf("job %s: series %v, err %v", j.Name, j.Series, j.Err)
	}
	if j.Series.UID != s.SeriesUID || len(j.Series.Files) != n || j.Series.Dims() != [3]int{s.Columns, s.Rows, n} {
		t.Fatalf("job %s: series %s, %d files, dims %v; want %s, %d files", j.Name, j.Series.UID, len(j.Series.Files), j.Series.Dims(), s.SeriesUID, n)
	}
	if want := jobs.DICOMJobName(j.Series); j.Name != want || !strings.HasPrefix(j.Name, "series_") {
		t.Errorf("job name %q, want %q", j.Name, want)
	}
	if want := filepath.Join(d.out, "s"+strconv.Itoa(s.Number)+"_mask.nii.gz"); j.Output != want {
		t.Errorf("mask %s, want %s (--dicom-name)", j.Output, want)
	}
	for i, f := range j.Series.Files {
		if filepath.Base(f.Path) != dicomtest.FileName(i) {
			t.Errorf("file %d is %s", i, f.Path)
		}
	}
}

// A series copied in file by file, each file written in two parts, is handed out once: a
// settle time after its last file, with all its files, and never while files still arrive.
func TestDICOMSeriesHandedOnceSettled(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const settle, step = 2 * time.Second, 250 * time.Millisecond
		d := newTestBox(t, settle)
		s := testSeries("1.2.826.0.1.7", 7)
		var last time.Time
		for i := range 6 {
			data := s.Slice(i)
			d.write(t, dicomtest.FileName(i), data[:len(data)/2])
			d.quiet(t, step, 3*step, "half a file written")
			d.write(t, dicomtest.FileName(i), data)
			last = time.Now()
			d.quiet(t, step, 3*step, "a file of the series arrived 0.75 s ago")
		}
		j := d.next(t, step, 3*settle)
		if took := time.Since(last); took < settle || took > settle+step {
			t.Errorf("handed out %v after the last file, want the %v settle (ticks of %v)", took, settle, step)
		}
		checkSeriesJob(t, d, j, s, 6)
		if j.Arrived.IsZero() || j.Input != d.in {
			t.Errorf("job arrived %v, input %s", j.Arrived, j.Input)
		}
		d.quiet(t, step, 4*settle, "the same version again")
		d.rescan() // files seen again (network file systems): the same version
		d.quiet(t, step, 2*settle, "the same version after a rescan")
		if strings.Contains(d.logs.String(), "level=WARN") {
			t.Errorf("warnings:\n%s", d.logs.String())
		}
	})
}

// Two series in one folder settle apart: one complete series is handed out while another
// keeps arriving beside it. Files that are not DICOM are logged once and hold nothing up,
// even one rewritten all the time (a table).
func TestDICOMSeriesSettleApart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const settle, step = 2 * time.Second, 250 * time.Millisecond
		d := newTestBox(t, settle)
		a, b := testSeries("1.2.826.0.1.1", 1), testSeries("1.2.826.0.1.2", 2)
		for i := range 3 {
			d.write(t, "a"+dicomtest.FileName(i), a.Slice(i))
		}
		d.write(t, "notes.txt", []byte("not an image"))
		d.write(t, "scan.nii.gz.ready", nil) // a marker of no volume: not a DICOM candidate
		start := time.Now()
		var got jobs.Job
		for i := 0; got.Name == ""; i++ {
			if time.Since(start) > 3*settle {
				t.Fatal("series a not handed out while b arrives")
			}
			d.write(t, "b"+dicomtest.FileName(i), b.Slice(i))
			d.write(t, "table.csv", []byte(strings.Repeat("volume,status\n", 10+i)))
			d.tick(2 * step)
			if j, ok := d.taken(); ok {
				got = j
			}
		}
		if got.Series.UID != a.SeriesUID || len(got.Series.Files) != 3 {
			t.Fatalf("handed out %s with %d files, want series a with 3", got.Name, len(got.Series.Files))
		}
		if took := time.Since(start); took < settle || took > settle+2*step {
			t.Errorf("series a handed out after %v, settle %v", took, settle)
		}
		j := d.next(t, step, 3*settle)
		if j.Series.UID != b.SeriesUID {
			t.Fatalf("then %s, want series b", j.Name)
		}
		d.quiet(t, step, 2*settle, "both handed out")
		d.rescan()
		d.quiet(t, step, 2*settle, "after a rescan")
		logs := d.logs.String()
		for _, f := range []string{"notes.txt", "table.csv"} {
			if n := strings.Count(logs, "not a volume or DICOM file\" file="+filepath.Join(d.in, f)); n != 1 {
				t.Errorf("%s said %d times, want once:\n%s", f, n, logs)
			}
		}
		if strings.Contains(logs, ".ready") {
			t.Errorf("a marker was taken for a DICOM candidate:\n%s", logs)
		}
	})
}

// A series that grows after the pipeline took it is handed out again with its new files, and
// a warning says so; a version still queued is replaced by a newer one, not handed out too;
// files that go away hand nothing out.
func TestDICOMSeriesGrowthReported(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const settle, step = 2 * time.Second, 250 * time.Millisecond
		d := newTestBox(t, settle)
		s := testSeries("1.2.826.0.1.9", 9)
		if _, err := s.Write(d.in, 0, 4); err != nil {
			t.Fatal(err)
		}
		d.rescan()
		checkSeriesJob(t, d, d.next(t, step, 3*settle), s, 4) // taken by the pipeline
		if strings.Contains(d.logs.String(), "grew") {
			t.Fatalf("a warning before the series grew:\n%s", d.logs.String())
		}

		d.write(t, dicomtest.FileName(4), s.Slice(4))
		checkSeriesJob(t, d, d.next(t, step, 3*settle), s, 5)
		logs := d.logs.String()
		if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "grew or changed after it was handed out") ||
			!strings.Contains(logs, "files_before=4 files_now=5 new_files=IM0005") {
			t.Fatalf("no warning that the series grew:\n%s", logs)
		}
		if n := strings.Count(logs, "grew or changed"); n != 1 {
			t.Fatalf("%d warnings, want 1", n)
		}

		// Grows while its new version waits in the queue: the newer version replaces it.
		d.write(t, dicomtest.FileName(5), s.Slice(5))
		for d.Pending() == 0 {
			d.tick(step)
			synctest.Wait()
		}
		d.write(t, dicomtest.FileName(6), s.Slice(6))
		for range (settle + step) / step { // the pipeline takes nothing meanwhile
			d.tick(step)
		}
		j, ok := d.taken()
		if !ok {
			t.Fatal("nothing handed out")
		}
		checkSeriesJob(t, d, j, s, 7)
		d.quiet(t, step, 2*settle, "a replaced version")
		if !strings.Contains(d.logs.String(), "files_before=5 files_now=7") {
			t.Errorf("the warning does not compare with the version taken:\n%s", d.logs.String())
		}

		// Files removed (the inbox cleaned up): nothing to segment again.
		os.Remove(filepath.Join(d.in, dicomtest.FileName(6)))
		d.event(fsnotify.Event{Name: filepath.Join(d.in, dicomtest.FileName(6)), Op: fsnotify.Remove})
		d.quiet(t, step, 2*settle, "a file removed")
	})
}

// A series the pipeline found busy (claimed by a live process) is handed out again after the
// delay, not before, and without a warning: its files did not change.
func TestDICOMSeriesDeferred(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const settle, step = time.Second, 250 * time.Millisecond
		d := newTestBox(t, settle)
		s := testSeries("1.2.826.0.1.3", 3)
		if _, err := s.Write(d.in, 0, 3); err != nil {
			t.Fatal(err)
		}
		d.rescan()
		j := d.next(t, step, 3*settle)
		deferred := time.Now()
		d.Defer(j, 5*time.Second)
		j = d.next(t, step, 10*time.Second)
		if since := time.Since(deferred); since < 5*time.Second {
			t.Errorf("handed out again %v after Defer, before its 5 s", since)
		}
		checkSeriesJob(t, d, j, s, 3)
		d.quiet(t, step, 2*settle, "handed out again once")
		if strings.Contains(d.logs.String(), "level=WARN") {
			t.Errorf("warnings:\n%s", d.logs.String())
		}
	})
}
