package kernels

// The fused tensor-core kernel's compile-time sizes and weight layout (fused_config.cuh; a test
// reads the .cu file and checks that these match its #defines).
const (
	FusedTileX = 16 // VF_TX: output voxels along x per tile row (the mma's M)
	// Tile rows along y (VF_ROWS) of the sm_90 code and of the others (sm_80-89 and the PTX);
	// the rows, threads and shared memory of the code a GPU runs come from the loaded module
	// (Module.FusedGeometry).
	FusedRowsSM90 = 16
	FusedRowsSM80 = 12
	// FusedNarrowClasses (VF_NARROW_CLASSES): models of at most this many classes run the
	// fused_* kernels (one n8 tile of logits); more take fused_*_k16.
	FusedNarrowClasses = 8

	// Float32 offsets in the weight buffer (VF_OFF_*); convs are [tap][co][ci].
	fusedOffW1      = 0
	fusedOffB1      = 432
	fusedOffW2      = 448
	fusedOffB2      = 7360
	fusedOffWG      = 7376
	fusedOffBG      = 14288
	fusedOffGateX   = 14304
	fusedOffGateXB  = 14432
	fusedOffGateG   = 14440
	fusedOffGateGB  = 14568
	fusedOffPsi     = 14576
	fusedOffPsiB    = 14584
	fusedOffHead    = 14592
	fusedOffHeadB   = 14848
	FusedWeightsLen = 14864 // VF_WEIGHTS
)

// PackFused lays w out as the fused kernel reads it, zero-padded to Channels channels,
// GateWidth gate units and MaxClasses classes (padding changes no label: padded channels are
// exactly 0 and carry weight 0; padded classes are never compared). w must be valid (check).
func PackFused(w *Weights) []float32 {
	c, k, g := w.Channels, w.Classes, w.Channels/2
	p := make([]float32, FusedWeightsLen)
	for co := 0; co < c; co++ {
		for t := 0; t < 27; t++ {
			p[fusedOffW1+t*Channels+co] = w.C1W[co*27+t]
		}
		p[fusedOffB1+co], p[fusedOffB2+co], p[fusedOffBG+co] = w.C1B[co], w.C2B[co], w.CGB[co]
		for ci := 0; ci < c; ci++ {
			for t := 0; t < 27; t++ {
				p[fusedOffW2+(t*Channels+co)*Channels+ci] = w.C2W[(co*c+ci)*27+t]
				p[fusedOffWG+(t*Channels+co)*Channels+ci] = w.CGW[(co*c+ci)*27+t]
			}
		}
	}
	for j := 0; j < g; j++ {
		copy(p[fusedOffGateX+j*Channels:], w.WXW[j*c:(j+1)*c])
		copy(p[fusedOffGateG+j*Channels:], w.WGW[j*c:(j+1)*c])
		p[fusedOffGateXB+j], p[fusedOffGateGB+j], p[fusedOffPsi+j] = w.WXB[j], w.WGB[j], w.PsiW[j]
	}
	p[fusedOffPsiB] = w.PsiB[0]
	for kk := 0; kk < k; kk++ {
		copy(p[fusedOffHead+kk*Channels:], w.HeadW[kk*c:(kk+1)*c])
		p[fusedOffHeadB+kk] = w.HeadB[kk]
	}
	return p
}

// FusedZChunk is how many output planes of an nzOut-plane slab one block of the fused kernel
// (rows tile rows) streams through: the whole slab when its x-y tiles alone give every
// multiprocessor at least two blocks, else thinner chunks (each costs 4 extra e planes) down to 8
// planes.
func FusedZChunk(nx, ny, nzOut, rows, multiprocessors int32) int32 {
	tiles := int64(ceilDiv(nx, FusedTileX)) * int64(ceilDiv(ny, rows))
	want := 2 * int64(max(multiprocessors, 1))
	if tiles >= want || nzOut <= 8 {
		return max(nzOut, 1)
	}
	chunks := (want + tiles - 1) / tiles
	return max(8, int32((int64(nzOut)+chunks-1)/chunks))
}

func ceilDiv(a, b int32) int { return int((int64(a) + int64(b) - 1) / int64(b)) }

// MarginPlanes is the number of planes among z0..z0+n-1 whose margins are counted (MarginStride).
func MarginPlanes(z0, n int64) int64 {
	return (z0+n+MarginStride-1)/MarginStride - (z0+MarginStride-1)/MarginStride
}

// FusedLogitWords is the number of fp16 pairs the fused kernel stores per voxel of a sampled
// plane (fused_config.cuh's VF_LOGIT_WORDS): 8 classes' worth, 16 in the _k16 build for models of more
// than FusedNarrowClasses.
func FusedLogitWords(classes int32) int32 {
	if classes > FusedNarrowClasses {
		return 8
	}
	return 4
}

// FusedLogitBytes is the size of the fused kernel's logits buffer for a slab of at most slab
// planes of plane voxels: MarginPlanes of a slab starting anywhere, FusedLogitWords each.
func FusedLogitBytes(slab, plane int64, classes int32) int64 {
	return (slab + MarginStride - 1) / MarginStride * plane * 4 * int64(FusedLogitWords(classes))
}

// FusedGeometry is the launch geometry of the fused kernels a module holds (fused_geometry in
// fused_config.cuh): it depends on the GPU the code was compiled for.
type FusedGeometry struct {
	Rows, Threads, SharedBytes int32
	WGMMA                      int32 // the convs on wgmma (sm_90a builds): bit 0 conv2, bit 1 the dilated conv
}

// Instructions says which tensor-core instructions the fused kernel's convs issue.
func (g FusedGeometry) Instructions() string {
	switch g.WGMMA {
	case 0:
		return "mma.sync"
	case 3:
		return "wgmma"
	case 1:
		return "conv2 on wgmma, the dilated conv on mma.sync"
	default:
		return "the dilated conv on wgmma, conv2 on mma.sync"
	}
}
