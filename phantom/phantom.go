// Package phantom generates synthetic MRI-like volumes with ground-truth label masks, fully
// determined by a seed: a head-like ellipsoid of tissue with dark ventricles and cysts
// (fluid) and small bright lesions, under a smooth multiplicative bias field, partial-volume
// blur and Rician noise, stored as int16.
//
// Output is independent of the number of workers: the scene (shapes, levels, fields) is drawn
// once from the seed, every z-plane is rendered from it alone, and the noise of each voxel is
// a counter-based hash of (seed, voxel index).
package phantom

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sync/errgroup"

	"voxpipe/io/nifti"
)

// The labels of the truth masks.
const (
	Background uint8 = 0
	Tissue     uint8 = 1 // the head-like ellipsoid
	Fluid      uint8 = 2 // ventricles and cysts, dark
	Lesion     uint8 = 3 // small blobs, bright

	// MaxLabel is the largest label in a truth mask.
	MaxLabel = Lesion
)

// ClassNames names the labels of the truth masks, by label.
var ClassNames = [...]string{"background", "tissue", "fluid", "lesion"}

// ErrBadDims is returned for extents that are not positive or whose product overflows.
var ErrBadDims = errors.New("phantom: bad dimensions")

// Params selects a phantom. Workers <= 0 means GOMAXPROCS; it never changes the output.
type Params struct {
	NX, NY, NZ int
	Seed       uint64
	Workers    int
}

// Phantom is a generated volume: its header (int16, geometry set), its image and its truth,
// both x fastest, with NX*NY*NZ elements.
type Phantom struct {
	Header *nifti.Header
	Image  []int16
	Truth  []uint8
}

// maxVoxels keeps NX*NY*NZ*2 bytes addressable.
const maxVoxels = math.MaxInt / 4

// Generate renders the phantom for p, in parallel over z-planes. Beyond the image and the
// truth it allocates only a few rows of scratch per worker.
func Generate(p Params) (*Phantom, error) {
	if p.NX < 1 || p.NY < 1 || p.NZ < 1 || p.NX > maxVoxels/p.NY || p.NX*p.NY > maxVoxels/p.NZ {
		return nil, fmt.Errorf("%w: %dx%dx%d", ErrBadDims, p.NX, p.NY, p.NZ)
	}
	n := p.NX * p.NY * p.NZ
	ph := &Phantom{Header: NewHeader(p), Image: make([]int16, n), Truth: make([]uint8, n)}
	sc := newScene(p)

	workers := p.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, p.NZ)
	var next atomic.Int64
	var g errgroup.Group
	for range workers {
		g.Go(func() error {
			scratch := newPlaneScratch(sc)
			for z := int(next.Add(1) - 1); z < p.NZ; z = int(next.Add(1) - 1) {
				sc.renderPlane(z, ph.Image, ph.Truth, scratch)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("generate phantom: %w", err)
	}
	return ph, nil
}

// SeedFor derives the seed of volume index of a series from the series' base seed, so that
// volume i is the same whether it is generated alone or with the others.
func SeedFor(base uint64, index int) uint64 {
	return mix64(mix64(base) ^ (uint64(index)+1)*0xD1B54A32D192ED03)
}

// FieldOfView is the in-plane field of view in mm; slices are 1.2 times the in-plane spacing.
const (
	FieldOfView    = 240.0
	SliceThickness = 1.2
)

// NewHeader returns the header of the phantom for p: int16, mm units, and the same RAS
// affine in qform and sform (scanner coordinates, centred on the volume), with spacings
// FieldOfView/max(NX,NY) in-plane and SliceThickness times that across slices
// (2.5 x 2.5 x 3 mm at 96x96x64, 0.47 x 0.47 x 0.56 mm at 512x512x1000). Values are
// float32-exact, so a NIfTI-1 round trip keeps them unchanged.
func NewHeader(p Params) *nifti.Header {
	f32 := func(v float64) float64 { return float64(float32(v)) }
	dxy := f32(FieldOfView / float64(max(p.NX, p.NY)))
	dz := f32(SliceThickness * dxy)
	version, magic := 1, "n+1"
	if max(p.NX, p.NY, p.NZ) > math.MaxInt16 {
		version, magic = 2, "n+2"
	}
	ox := f32(-dxy * float64(p.NX-1) / 2)
	oy := f32(-dxy * float64(p.NY-1) / 2)
	oz := f32(-dz * float64(p.NZ-1) / 2)
	descrip := fmt.Sprintf("voxpipe phantom seed=%d", p.Seed)
	return &nifti.Header{
		Version:   version,
		ByteOrder: binary.LittleEndian,
		DimInfo:   1 | 2<<2 | 3<<4, // frequency x, phase y, slices z
		Dim:       [8]int64{3, int64(p.NX), int64(p.NY), int64(p.NZ), 1, 1, 1, 1},
		Datatype:  nifti.Int16,
		BitPix:    16,
		PixDim:    [8]float64{1, dxy, dxy, dz, 0, 0, 0, 0},
		VoxOffset: nifti.DataStart(version),
		SclSlope:  1,
		XYZTUnits: 2 | 8, // mm, s
		Descrip:   descrip,
		QformCode: 1,
		SformCode: 1,
		QoffsetX:  ox,
		QoffsetY:  oy,
		QoffsetZ:  oz,
		SrowX:     [4]float64{dxy, 0, 0, ox},
		SrowY:     [4]float64{0, dxy, 0, oy},
		SrowZ:     [4]float64{0, 0, dz, oz},
		Magic:     magic,
	}
}

// littleEndian is the host's byte order test that ImageBytes relies on.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// ImageBytes returns the image as little-endian bytes, as NIfTI writers take it. On a
// little-endian host it shares the image's memory (no copy of a volume that may be 0.5 GB);
// elsewhere it is a converted copy.
func (ph *Phantom) ImageBytes() []byte {
	if len(ph.Image) == 0 {
		return nil
	}
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(&ph.Image[0])), 2*len(ph.Image))
	}
	b := make([]byte, 2*len(ph.Image))
	for i, v := range ph.Image {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	}
	return b
}

// ParseDims parses "NXxNYxNZ", e.g. "96x96x64".
func ParseDims(s string) (nx, ny, nz int, err error) {
	parts := strings.Split(strings.ToLower(strings.TrimSpace(s)), "x")
	if len(parts) != 3 {
		return 0, 0, 0, fmt.Errorf("%w: %q is not NXxNYxNZ", ErrBadDims, s)
	}
	var d [3]int
	for i, part := range parts {
		v, err := strconv.Atoi(part)
		if err != nil || v < 1 {
			return 0, 0, 0, fmt.Errorf("%w: %q is not NXxNYxNZ with positive extents", ErrBadDims, s)
		}
		d[i] = v
	}
	return d[0], d[1], d[2], nil
}
