package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
)

// csvHeader is report.csv's header: one row per stage (then service and end_to_end, the
// turnaround), A's and B's columns side by side; empty fields where a side lacks the stage or
// a value is unknown. speedup_too_few_volumes: true when the speedup rests on fewer volumes on
// a side than the report's limit (--min-volumes), whose interval is then no evidence.
var csvHeader = []string{"stage",
	"a_count", "a_mean_ms", "a_p50_ms", "a_p90_ms", "a_p95_ms", "a_p99_ms", "a_max_ms", "a_vol_per_min", "a_mvox_per_s",
	"b_count", "b_mean_ms", "b_p50_ms", "b_p90_ms", "b_p95_ms", "b_p99_ms", "b_max_ms", "b_vol_per_min", "b_mvox_per_s",
	"speedup", "speedup_ci_low", "speedup_ci_high", "speedup_method", "speedup_n", "speedup_too_few_volumes"}

// WriteCSV writes the comparison table.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	for _, row := range r.Rows {
		rec := []string{string(row.Stage)}
		rec = append(rec, statsFields(row.A)...)
		rec = append(rec, statsFields(row.B)...)
		if sp := row.Speedup; sp != nil {
			method, n := "paired", strconv.Itoa(sp.N)
			if !sp.Paired {
				method, n = "unpaired", fmt.Sprintf("%d/%d", sp.N, sp.NB)
			}
			rec = append(rec, field(sp.Value, 4), field(sp.Low, 4), field(sp.High, 4), method, n, strconv.FormatBool(sp.TooFew))
		} else {
			rec = append(rec, "", "", "", "", "", "")
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func statsFields(st *Stats) []string {
	if st == nil {
		return make([]string, 9)
	}
	return []string{strconv.Itoa(st.Count), field(st.Mean, 3), field(st.P50, 3), field(st.P90, 3), field(st.P95, 3),
		field(st.P99, 3), field(st.Max, 3), field(st.VolPerMin, 3), field(st.MVoxPerS, 4)}
}

func field(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}
