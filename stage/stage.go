// Package stage names the stages of a run, as timings.csv's stage column, the engines' events
// and the metrics write them: typed constants shared by every package, so that no name is
// spelled twice.
package stage

// Stage names a pipeline stage, or an engine's part of the segment stage, as it appears in
// timings.csv's stage column.
type Stage string

// The host stages, in pipeline order.
const (
	Read    Stage = "read"    // decoding the input (a gzipped one inflated), statistics fused in
	Stats   Stage = "stats"   // the normalisation statistics (a merge when fused into the read)
	Segment Stage = "segment" // the engine call; the CPU engine's per-slab events
	Write   Stage = "write"   // writing the mask's planes; slab -1 is the commit
	// Geometry and analysis, when they apply: bringing the volume to the model's orientation and
	// spacing (after the read), its labels back to the input's grid (after the engine), and the
	// statistics and preview (before the commit).
	Prepare Stage = "prepare"
	Restore Stage = "restore"
	Analyse Stage = "analyse"
	// SEG is writing the DICOM SEG of a DICOM series' mask (slab -1), before the mask's commit.
	SEG Stage = "seg"
)

// The GPU engine's per-slab events, within the segment stage.
const (
	H2D     Stage = "h2d"     // the input slab's copy to the device
	Kernels Stage = "kernels" // the network's kernels on one slab
	D2H     Stage = "d2h"     // the labels' copy back to the host
)

// Host is the device column of the stages that run on the host (read, stats, write);
// engines' rows carry the engine's name ("cpu", "cuda:0").
const Host = "host"

// IsCopy reports whether a stage is a host<->device copy.
func (s Stage) IsCopy() bool { return s == H2D || s == D2H }
