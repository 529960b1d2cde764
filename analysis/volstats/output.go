package volstats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"voxpipe/internal/atomicfile"

	"github.com/gocarina/gocsv"
)

// Num is a float column of statistics.csv: shortest round-trip decimal, empty for NaN (what
// pandas and R read as missing).
type Num float64

// MarshalCSV implements gocsv.TypeMarshaller.
func (n Num) MarshalCSV() (string, error) {
	if math.IsNaN(float64(n)) {
		return "", nil
	}
	return strconv.FormatFloat(float64(n), 'f', -1, 64), nil
}

// UnmarshalCSV implements gocsv.TypeUnmarshaller.
func (n *Num) UnmarshalCSV(s string) error {
	if s == "" {
		*n = Num(math.NaN())
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	*n = Num(v)
	return err
}

// Row is one line of statistics.csv: one label of one volume. The bounding box is inclusive
// voxel indices, -1 for an absent label.
type Row struct {
	Volume          string `csv:"volume"`
	Label           int    `csv:"label"`
	Name            string `csv:"name"`
	Voxels          int64  `csv:"voxels"`
	VolumeML        Num    `csv:"volume_ml"`
	IntensityVoxels int64  `csv:"intensity_voxels"`
	IntensityMean   Num    `csv:"intensity_mean"`
	IntensityStd    Num    `csv:"intensity_std"`
	BBoxX0          int    `csv:"bbox_x0"`
	BBoxX1          int    `csv:"bbox_x1"`
	BBoxY0          int    `csv:"bbox_y0"`
	BBoxY1          int    `csv:"bbox_y1"`
	BBoxZ0          int    `csv:"bbox_z0"`
	BBoxZ1          int    `csv:"bbox_z1"`
	Components      int    `csv:"components"`
}

// Rows are v's lines of statistics.csv, one per label, background included, under the name
// volume (summary.csv's volume).
func (v *Volume) Rows(volume string) []Row {
	rows := make([]Row, len(v.Labels))
	for i, s := range v.Labels {
		rows[i] = Row{Volume: volume, Label: s.Value, Name: s.Name, Voxels: s.Voxels, VolumeML: Num(s.VolumeML),
			IntensityVoxels: s.IntensityVoxels, IntensityMean: Num(s.IntensityMean), IntensityStd: Num(s.IntensityStd),
			BBoxX0: s.BBoxMin[0], BBoxX1: s.BBoxMax[0], BBoxY0: s.BBoxMin[1], BBoxY1: s.BBoxMax[1],
			BBoxZ0: s.BBoxMin[2], BBoxZ1: s.BBoxMax[2], Components: s.Components}
	}
	return rows
}

// WriteCSV writes rows, with a header line, to path atomically: a temporary file in the same
// folder, synced, then renamed over path.
func WriteCSV(path string, rows []Row) error {
	if err := atomicfile.Write(path, func(w io.Writer) error { return gocsv.Marshal(&rows, w) }); err != nil {
		return fmt.Errorf("volstats: %w", err)
	}
	return nil
}

// ReadCSV reads a statistics.csv that WriteCSV wrote, to merge new rows into it.
func ReadCSV(r io.Reader) ([]Row, error) {
	var rows []Row
	if err := gocsv.Unmarshal(r, &rows); err != nil {
		return nil, fmt.Errorf("volstats: read statistics csv: %w", err)
	}
	return rows, nil
}

// Entry is one label in the per-volume JSON. Volume (mL) and Intensity (mean, scaled units)
// are TotalSegmentator's keys; the others are voxpipe's. Intensity and IntensityStd are null
// when the label has no finite image voxel; BBox is null for an absent label.
type Entry struct {
	Volume       float64    `json:"volume"`
	Intensity    *float64   `json:"intensity"`
	IntensityStd *float64   `json:"intensity_std"`
	Voxels       int64      `json:"voxels"`
	BBox         *[3][2]int `json:"bbox"` // [[x0, x1], [y0, y1], [z0, z1]], inclusive
	Components   int        `json:"components"`
}

// MarshalJSON writes v as statistics.json: an object keyed by label name, in label order, with
// the background (label 0) left out as in TotalSegmentator.
func (v *Volume) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("{")
	n := 0
	for _, s := range v.Labels {
		if s.Value == 0 {
			continue
		}
		e := Entry{Volume: s.VolumeML, Voxels: s.Voxels, Components: s.Components}
		if s.IntensityVoxels > 0 {
			mean, std := s.IntensityMean, s.IntensityStd
			e.Intensity, e.IntensityStd = &mean, &std
		}
		if s.Voxels > 0 {
			e.BBox = &[3][2]int{{s.BBoxMin[0], s.BBoxMax[0]}, {s.BBoxMin[1], s.BBoxMax[1]}, {s.BBoxMin[2], s.BBoxMax[2]}}
		}
		key, err := json.Marshal(s.Name)
		if err != nil {
			return nil, err
		}
		val, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("volstats: label %s: %w", s.Name, err)
		}
		if n > 0 {
			buf.WriteString(",")
		}
		buf.WriteString("\n  ")
		buf.Write(key)
		buf.WriteString(": ")
		buf.Write(val)
		n++
	}
	if n > 0 {
		buf.WriteString("\n")
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}

// WriteJSON writes v's statistics.json to path atomically (see WriteCSV).
func (v *Volume) WriteJSON(path string) error {
	b, err := v.MarshalJSON()
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, b)
}

// ReadJSON reads a statistics.json, keyed by label name.
func ReadJSON(r io.Reader) (map[string]Entry, error) {
	var m map[string]Entry
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		return nil, fmt.Errorf("volstats: read statistics json: %w", err)
	}
	return m, nil
}
