package dicom

import (
	"math"
	"strconv"
	"strings"
)

// str is the attribute's text with padding (spaces, NULs) trimmed, "" when absent.
func (ds *DataSet) str(t Tag) string {
	v := ds.elems[t]
	if v == nil || v.raw == nil {
		return ""
	}
	return strings.TrimRight(strings.TrimLeft(string(v.raw), " "), " \x00")
}

// floats decodes a numeric attribute (DS, IS as text; FD, FL, US, SS, UL, SL as binary), nil
// when absent or unreadable.
func (ds *DataSet) floats(t Tag) []float64 {
	v := ds.elems[t]
	if v == nil || v.raw == nil {
		return nil
	}
	size := map[string]int{"FD": 8, "FL": 4, "US": 2, "SS": 2, "UL": 4, "SL": 4}[v.vr]
	if size == 0 { // DS, IS, or anything textual
		var out []float64
		for _, f := range strings.Split(ds.str(t), `\`) {
			x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return nil
			}
			out = append(out, x)
		}
		return out
	}
	out := make([]float64, 0, len(v.raw)/size)
	for i := 0; i+size <= len(v.raw); i += size {
		b := v.raw[i:]
		switch v.vr {
		case "FD":
			out = append(out, math.Float64frombits(ds.order.Uint64(b)))
		case "FL":
			out = append(out, float64(math.Float32frombits(ds.order.Uint32(b))))
		case "US":
			out = append(out, float64(ds.order.Uint16(b)))
		case "SS":
			out = append(out, float64(int16(ds.order.Uint16(b))))
		case "UL":
			out = append(out, float64(ds.order.Uint32(b)))
		case "SL":
			out = append(out, float64(int32(ds.order.Uint32(b))))
		}
	}
	return out
}

// float is the first value of a numeric attribute, or def.
func (ds *DataSet) float(t Tag, def float64) float64 {
	if v := ds.floats(t); len(v) > 0 && !math.IsNaN(v[0]) && !math.IsInf(v[0], 0) {
		return v[0]
	}
	return def
}

// integer is the first value of an integer attribute, or def.
func (ds *DataSet) integer(t Tag, def int) int {
	v := ds.float(t, math.NaN())
	if math.IsNaN(v) || v != math.Trunc(v) || math.Abs(v) > math.MaxInt32 {
		return def
	}
	return int(v)
}

// item is the first item of a kept sequence, nil when absent or empty.
func (ds *DataSet) item(t Tag) *DataSet {
	if v := ds.elems[t]; v != nil && len(v.items) > 0 {
		return v.items[0]
	}
	return nil
}

// has reports whether the attribute is present with a value.
func (ds *DataSet) has(t Tag) bool {
	v := ds.elems[t]
	return v != nil && (len(v.raw) > 0 || len(v.items) > 0)
}
