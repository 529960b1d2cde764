// Package analysis turns a segmented volume into what its reader looks at besides the mask:
// per-label statistics (analysis/volstats) and a preview picture (analysis/preview), written
// under the output folder before the mask is committed, and the merged statistics table. The
// pipeline calls it through its Analyser interface (Outputs implements it).
package analysis

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"voxpipe/analysis/preview"
	"voxpipe/analysis/volstats"
	"voxpipe/internal/regular"
	"voxpipe/io/nifti"
	"voxpipe/model"
	"voxpipe/store/records"
)

// Outputs writes a volume's statistics and preview as asked, and removes the ones not asked for:
// they would describe another mask. A volume whose mask is committed has what was asked for,
// and a failure to write it fails the volume (a rerun redoes it).
type Outputs struct {
	Dir                 string        // the output folder
	Statistics, Preview bool          // --statistics, --preview
	Labels              []model.Label // name and colour the classes
}

// NeedsInput reports whether Analyse reads the input's values: statistics or a preview are asked
// for.
func (o *Outputs) NeedsInput() bool { return o.Statistics || o.Preview }

// Analyse writes the statistics and preview of the volume named name (header hdr, values vol,
// mask on the input's grid) as asked, and removes the stale ones. vol may be nil when
// NeedsInput is false.
func (o *Outputs) Analyse(name string, hdr *nifti.Header, vol *model.Volume, mask []uint8) error {
	jsonPath, csvPath := records.StatisticsPaths(o.Dir, name)
	pngPath := records.PreviewPath(o.Dir, name)
	var stale []string
	if o.Statistics {
		if err := writeStatistics(name, hdr, vol, mask, o.Labels, jsonPath, csvPath); err != nil {
			return fmt.Errorf("statistics of %s: %w", name, err)
		}
	} else {
		stale = append(stale, jsonPath, csvPath)
	}
	if o.Preview {
		if err := writePreview(name, hdr, vol, mask, o.Labels, pngPath); err != nil {
			return fmt.Errorf("preview of %s: %w", name, err)
		}
	} else {
		stale = append(stale, pngPath)
	}
	return removeStale(stale...)
}

// Missing names what is asked for that the volume named name lacks ("statistics are",
// "preview is", "statistics and preview are"), or is empty: an up-to-date mask is then done
// again, to make them.
func (o *Outputs) Missing(name string) string {
	var missing []string
	if o.Statistics {
		jsonPath, csvPath := records.StatisticsPaths(o.Dir, name)
		if !isFile(jsonPath) || !isFile(csvPath) {
			missing = append(missing, "statistics")
		}
	}
	if o.Preview && !isFile(records.PreviewPath(o.Dir, name)) {
		missing = append(missing, "preview")
	}
	switch len(missing) {
	case 0:
		return ""
	case 1:
		if missing[0] == "preview" {
			return "preview is"
		}
		return "statistics are"
	}
	return "statistics and preview are"
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// writeStatistics computes the volume's per-label statistics and writes them as JSON and CSV.
func writeStatistics(name string, hdr *nifti.Header, vol *model.Volume, mask []uint8, labels []model.Label, jsonPath, csvPath string) error {
	var st *volstats.Volume
	var err error
	if g := volstats.GridOf(hdr); vol.I16 != nil {
		st, err = volstats.Compute(mask, vol.I16, g, labels, volstats.Options{})
	} else {
		st, err = volstats.Compute(mask, vol.F32, g, labels, volstats.Options{})
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(jsonPath), 0o755); err != nil {
		return err
	}
	if err := st.WriteJSON(jsonPath); err != nil {
		return err
	}
	return volstats.WriteCSV(csvPath, st.Rows(name))
}

// writePreview renders the volume's preview and writes it as a PNG.
func writePreview(name string, hdr *nifti.Header, vol *model.Volume, mask []uint8, labels []model.Label, pngPath string) error {
	var p *preview.Preview
	var err error
	g, opts := preview.GeometryOf(hdr), preview.Options{Title: name}
	if vol.I16 != nil {
		p, err = preview.Render(vol.I16, mask, g, labels, opts)
	} else {
		p, err = preview.Render(vol.F32, mask, g, labels, opts)
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(pngPath), 0o755); err != nil {
		return err
	}
	return preview.WritePNG(pngPath, p.Image)
}

func removeStale(paths ...string) error {
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove stale %s: %w", p, err)
		}
	}
	return nil
}

// MergeStatistics regenerates OUT/statistics.csv from every volume's statistics/<volume>.csv
// (one per volume, its latest), under the records lock, by rename: readers see the old table or
// the new one. When no volume has statistics, the table is removed.
func MergeStatistics(out string) error {
	dir := filepath.Join(out, records.StatisticsDir)
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".csv") && !strings.HasPrefix(d.Name(), ".") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("merge statistics: %w", err)
	}
	merged := filepath.Join(out, records.StatisticsName)
	if len(files) == 0 {
		// None left (volumes redone without --statistics): no table, rather than a stale one.
		return records.WithLock(out, func() error { return removeStale(merged) })
	}
	slices.Sort(files)
	return records.WithLock(out, func() error {
		var rows []volstats.Row
		for _, f := range files {
			b, _, err := regular.Open(f)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue // removed by a run that redid the volume without statistics
				}
				return fmt.Errorf("merge statistics: %w", err)
			}
			rs, err := volstats.ReadCSV(b)
			b.Close()
			if err != nil {
				return fmt.Errorf("merge statistics: %s: %w", f, err)
			}
			rows = append(rows, rs...)
		}
		return volstats.WriteCSV(merged, rows)
	})
}
