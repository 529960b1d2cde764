package pipeline

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"voxpipe/analysis/preview"
	"voxpipe/analysis/volstats"
	"voxpipe/internal/regular"
	"voxpipe/model"
	"voxpipe/report"
	"voxpipe/stage"
	"voxpipe/store/records"
)

// The analyse step runs in the writer once the mask is whole and before it is committed, while
// the writer still holds the input (the engine worker leaves it to the writer when
// Config.Statistics or Config.Preview is set): per-label statistics from the final mask on the
// input's grid, and the preview. They are written before the commit, so a volume whose mask is
// committed has them, and a failure to write them fails the volume (a rerun redoes it).
// A volume segmented without them has any older ones removed: they would describe another mask.

// Where the analyse step writes, under Config.OutDir.
func statisticsPaths(out, name string) (jsonPath, csvPath string) {
	base := filepath.Join(out, report.StatisticsDir, filepath.FromSlash(name))
	return base + ".json", base + ".csv"
}

func previewPath(out, name string) string {
	return filepath.Join(out, report.PreviewsDir, filepath.FromSlash(name)+".png")
}

// analyses reports whether the writers need the input: statistics or previews are asked for.
func (c *Config) analyses() bool { return c.Statistics || c.Preview }

// analyse writes the volume's statistics and preview (as asked), or removes stale ones.
func (r *writers) analyse(w *work, track string) error {
	cfg := &r.cfg
	jsonPath, csvPath := statisticsPaths(cfg.OutDir, w.job.Name)
	pngPath := previewPath(cfg.OutDir, w.job.Name)
	if !cfg.analyses() {
		return removeStale(jsonPath, csvPath, pngPath)
	}
	start := time.Now()
	if w.plan.inPlace() { // the input as read, for the intensities and the picture
		flipVolume(&w.vol, w.plan)
	}
	voxels := w.vol.NX * w.vol.NY * w.vol.NZ
	mask := w.mask.bytes[:voxels]
	var stale []string
	if cfg.Statistics {
		if err := writeStatistics(w, mask, cfg.Labels, jsonPath, csvPath); err != nil {
			return fmt.Errorf("statistics of %s: %w", w.job.Name, err)
		}
	} else {
		stale = append(stale, jsonPath, csvPath)
	}
	if cfg.Preview {
		if err := writePreview(w, mask, cfg.Labels, pngPath); err != nil {
			return fmt.Errorf("preview of %s: %w", w.job.Name, err)
		}
	} else {
		stale = append(stale, pngPath)
	}
	r.span(w, span{stage: stage.Analyse, slab: -1, device: stage.Host, track: track,
		start: start, end: time.Now(), voxels: int64(voxels)})
	return removeStale(stale...)
}

// writeStatistics computes the volume's per-label statistics and writes them as JSON and CSV.
func writeStatistics(w *work, mask []uint8, labels []model.Label, jsonPath, csvPath string) error {
	var st *volstats.Volume
	var err error
	if g := volstats.GridOf(w.hdr); w.vol.I16 != nil {
		st, err = volstats.Compute(mask, w.vol.I16, g, labels, volstats.Options{})
	} else {
		st, err = volstats.Compute(mask, w.vol.F32, g, labels, volstats.Options{})
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
	return volstats.WriteCSV(csvPath, st.Rows(w.job.Name))
}

// writePreview renders the volume's preview and writes it as a PNG.
func writePreview(w *work, mask []uint8, labels []model.Label, pngPath string) error {
	var p *preview.Preview
	var err error
	g, opts := preview.GeometryOf(w.hdr), preview.Options{Title: w.job.Name}
	if w.vol.I16 != nil {
		p, err = preview.Render(w.vol.I16, mask, g, labels, opts)
	} else {
		p, err = preview.Render(w.vol.F32, mask, g, labels, opts)
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

// StatisticsName is the merged statistics table under the output folder.
const StatisticsName = "statistics.csv"

// MergeStatistics regenerates OUT/statistics.csv from every volume's statistics/<volume>.csv
// (one per volume, its latest), under the records lock, by rename: readers see the old table or
// the new one. When no volume has statistics, the table is removed.
func MergeStatistics(out string) error {
	dir := filepath.Join(out, report.StatisticsDir)
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
	merged := filepath.Join(out, StatisticsName)
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
