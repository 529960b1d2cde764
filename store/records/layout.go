package records

import (
	"path/filepath"
	"strings"
)

// Where a volume's statistics and preview go under the output folder: analysis writes them,
// the report links them.
const (
	StatisticsDir  = "statistics"     // <volume>.json and .csv
	PreviewsDir    = "previews"       // <volume>.png
	StatisticsName = "statistics.csv" // every volume's latest rows, merged (analysis.MergeStatistics)
)

// StatisticsPaths are where the statistics of the volume named name go.
func StatisticsPaths(out, name string) (jsonPath, csvPath string) {
	base := filepath.Join(out, StatisticsDir, filepath.FromSlash(name))
	return base + ".json", base + ".csv"
}

// PreviewPath is where the preview of the volume named name goes.
func PreviewPath(out, name string) string {
	return filepath.Join(out, PreviewsDir, filepath.FromSlash(name)+".png")
}

// SEGPath is where the DICOM SEG of the mask at maskPath goes: beside it, the mask's name
// without its .nii or .nii.gz and with .seg.dcm (x_mask.nii.gz: x_mask.seg.dcm).
func SEGPath(maskPath string) string {
	base := maskPath
	for _, ext := range []string{".nii.gz", ".nii"} {
		if len(base) > len(ext) && strings.EqualFold(base[len(base)-len(ext):], ext) {
			base = base[:len(base)-len(ext)]
			break
		}
	}
	return base + ".seg.dcm"
}
