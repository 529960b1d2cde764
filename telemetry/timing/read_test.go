package timing

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"voxpipe/stage"
)

// The wire forms decode exactly the columns the schemas write.
func TestWireColumns(t *testing.T) {
	t.Parallel()
	if got, want := columnsOf[rowRecord](), columnsOf[Row](); !slices.Equal(got, want) {
		t.Errorf("rowRecord columns %v, Row's %v", got, want)
	}
	if got, want := columnsOf[summaryRecord](), columnsOf[Summary](); !slices.Equal(got, want) {
		t.Errorf("summaryRecord columns %v, Summary's %v", got, want)
	}
}

// What the writers write reads back as it was.
func TestReadBack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rows := []Row{
		{RunID: "r", Volume: "a", Stage: stage.Read, Slab: -1, Device: stage.Host, StartMS: 0, DurationMS: 12.25, Bytes: 1 << 40, Voxels: 7},
		{RunID: "r", Volume: "a,b \"q\"", Stage: stage.Kernels, Slab: 3, Device: "cuda:0", StartMS: 1.5, DurationMS: 0},
	}
	sums := []Summary{
		{RunID: "r", Volume: "a", Status: StatusOK, Dims: "2x2x2", Voxels: 8, Engine: "cpu", ReadMS: 1, WallMS: 10, QueueMS: 2.5, MVoxPerS: 0.5},
		{RunID: "r", Volume: "b", Status: StatusFailed, Error: "line 1\nline 2"},
	}
	tf, err := CreateCSV[Row](filepath.Join(dir, "timings.csv"))
	if err != nil {
		t.Fatal(err)
	}
	sf, err := CreateCSV[Summary](filepath.Join(dir, "summary.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(tf.Append(rows...), sf.Append(sums...), tf.Close(), sf.Close()); err != nil {
		t.Fatal(err)
	}
	gotRows, err := ReadRows(filepath.Join(dir, "timings.csv"))
	if err != nil || !slices.Equal(gotRows, rows) {
		t.Errorf("rows read back %+v, %v; want %+v", gotRows, err, rows)
	}
	gotSums, err := ReadSummaries(filepath.Join(dir, "summary.csv"))
	if err != nil || !slices.Equal(gotSums, sums) {
		t.Errorf("summaries read back %+v, %v; want %+v", gotSums, err, sums)
	}
}

// Fields that gocsv's own conversions would read as something else are refused, each naming its
// record and column.
func TestStrictFields(t *testing.T) {
	t.Parallel()
	const rowHeader = "run_id,volume,stage,slab,device,start_ms,duration_ms,bytes,voxels\n"
	// A summary.csv of the first schema (no optional columns) and queue_ms.
	const sumHeader = "run_id,volume,status,error,dims,voxels,engine,read_ms,stats_ms,segment_ms,h2d_ms,kernels_ms,d2h_ms,write_ms,wall_ms,mvox_per_s,output,queue_ms\n"
	sumRow := func(status, wall, queue string) string {
		return "r,v," + status + ",,,0,cpu,,,,,,,," + wall + ",,," + queue + "\n"
	}
	for _, tc := range []struct {
		name, csv string
		summary   bool
		want      string // the error, or "" for none
	}{
		{"fractional slab", rowHeader + "r,v,read,1.5,host,0,1,0,0\n", false, `record 2, column 4 (slab): not an integer: "1.5"`},
		{"slab below -1", rowHeader + "r,v,read,-2,host,0,1,0,0\n", false, `record 2, column 4 (slab): -2 is below -1`},
		{"negative bytes", rowHeader + "r,v,read,0,host,0,1,-1,0\n", false, `record 2, column 8 (bytes): -1 is below 0`},
		{"empty duration", rowHeader + "r,v,read,0,host,0,,0,0\n", false, `record 2, column 7 (duration_ms): empty; a number of milliseconds is required`},
		{"NaN start", rowHeader + "r,v,read,0,host,NaN,1,0,0\n", false, `record 2, column 6 (start_ms): "NaN" is not a finite non-negative number`},
		{"bad float", rowHeader + "r,v,read,0,host,0,2x,0,0\n", false, `record 2, column 7 (duration_ms): strconv.ParseFloat: parsing "2x": invalid syntax`},
		{"empty stage", rowHeader + "r,v,read,0,host,0,1,0,0\nr,v, ,0,host,0,1,0,0\n", false, `record 3, column 3 (stage): empty`},
		{"empty counts read as 0", rowHeader + "r,v,read,,host,0,1,,\n", false, ""},
		{"missing column", "run_id,volume,stage\nr,v,read\n", false, `record 1: missing column(s) slab, device, start_ms, duration_ms, bytes, voxels`},
		{"unknown status", sumHeader + sumRow("okay", "1", ""), true, `record 2, column 3 (status): unknown status "okay" (want ok, skipped, failed, busy, conflict)`},
		{"ok without wall_ms", sumHeader + sumRow("ok", "", ""), true, `record 2, column 15 (wall_ms): empty; a number of milliseconds is required`},
		{"queue over wall", sumHeader + sumRow("ok", "10", "12.5"), true, `record 2, column 18 (queue_ms): 12.5 ms is more than wall_ms (10 ms), which includes it`},
		{"failed without wall_ms", sumHeader + sumRow("failed", "", ""), true, ""},
		{"negative voxels", sumHeader + strings.Replace(sumRow("ok", "1", ""), ",0,cpu,", ",-5,cpu,", 1), true, `record 2, column 6 (voxels): -5 is below 0`},
	} {
		path := filepath.Join(t.TempDir(), "f.csv")
		if err := os.WriteFile(path, []byte(tc.csv), 0o644); err != nil {
			t.Fatal(err)
		}
		var err error
		if tc.summary {
			_, err = ReadSummaries(path)
		} else {
			_, err = ReadRows(path)
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want no error", tc.name, err)
		case tc.want != "" && (err == nil || !strings.HasSuffix(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ...%s", tc.name, err, tc.want)
		case tc.want != "":
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("%s: %T is not a *FieldError", tc.name, err)
			}
		}
	}
}
