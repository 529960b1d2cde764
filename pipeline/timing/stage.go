package timing

// Stage names a pipeline stage, or an engine's part of the segment stage, as it appears in
// timings.csv's stage column.
type Stage string

// The host stages, in pipeline order.
const (
	StageRead    Stage = "read"    // decoding the input (a gzipped one inflated), statistics fused in
	StageStats   Stage = "stats"   // the normalisation statistics (a merge when fused into the read)
	StageSegment Stage = "segment" // the engine call; the CPU engine's per-slab events
	StageWrite   Stage = "write"   // writing the mask's planes; slab -1 is the commit
	// Geometry and analysis, when they apply: bringing the volume to the model's orientation and
	// spacing (after the read), its labels back to the input's grid (after the engine), and the
	// statistics and preview (before the commit).
	StagePrepare Stage = "prepare"
	StageRestore Stage = "restore"
	StageAnalyse Stage = "analyse"
)

// The GPU engine's per-slab events, within the segment stage.
const (
	StageH2D     Stage = "h2d"     // the input slab's copy to the device
	StageKernels Stage = "kernels" // the network's kernels on one slab
	StageD2H     Stage = "d2h"     // the labels' copy back to the host
)

// DeviceHost is the device column of the stages that run on the host (read, stats, write);
// engines' rows carry the engine's name ("cpu", "cuda:0").
const DeviceHost = "host"
