package nifti

import "fmt"

// Layout is where the voxels a header declares lie in its data file (the .nii, or the .img of
// a pair, uncompressed): z-slice z of volume v begins at VoxOffset + v*VolumeBytes +
// z*SliceBytes. It is the one place where those offsets are worked out, by the reader, the
// positional reads, the whole-file inflate and the writer alike.
//
// A Layout comes from a checked header (LayoutOf, or checkGeometry inside the package), so
// every offset it gives for a volume and slices within the header's dims is far from int64
// overflow: at most 2^40 voxels of at most 8 bytes after a vox_offset of at most 2^53.
type Layout struct {
	VoxOffset   int64 // where volume 0 begins
	SliceBytes  int64 // one z-slice of one volume
	VolumeBytes int64 // one 3D volume
	Volumes     int64 // the product of dims 4..7
	Depth       int   // z-slices per volume (NZ)
}

// maxVoxOffset is the largest vox_offset a header may give: NIfTI-1 stores it as a float,
// which holds whole byte counts exactly up to 2^53 (validVoxOffset).
const maxVoxOffset = 1 << 53

// LayoutOf checks h's datatype and dims as Open does (errors wrap ErrUnsupportedDatatype,
// ErrCorrupt or ErrTooLarge) and its vox_offset (0 to 2^53, else ErrCorrupt), and returns
// where its voxels lie. A header that Open or ReadHeader returned always passes.
func LayoutOf(h *Header) (Layout, error) {
	g, err := checkGeometry(h)
	if err != nil {
		return Layout{}, err
	}
	if h.VoxOffset < 0 || h.VoxOffset > maxVoxOffset {
		return Layout{}, fmt.Errorf("%w: vox_offset %d is not a valid byte offset", ErrCorrupt, h.VoxOffset)
	}
	return g.layout(h.VoxOffset), nil
}

// layout is the Layout of a checked geometry whose voxels begin at voxOffset (at most
// maxVoxOffset).
func (g geometry) layout(voxOffset int64) Layout {
	return Layout{VoxOffset: voxOffset, SliceBytes: g.sliceBytes, VolumeBytes: g.volBytes, Volumes: g.volumes, Depth: g.nz}
}

// Volume returns where volume v (0 <= v < Volumes) begins and ends.
func (l Layout) Volume(v int64) (start, end int64) {
	start = l.VoxOffset + v*l.VolumeBytes
	return start, start + l.VolumeBytes
}

// Slab returns where z-slices z0 .. z1-1 of volume v begin and end (0 <= z0 <= z1 <= Depth).
func (l Layout) Slab(v int64, z0, z1 int) (start, end int64) {
	vol, _ := l.Volume(v)
	return vol + int64(z0)*l.SliceBytes, vol + int64(z1)*l.SliceBytes
}

// DataBytes is the size of the voxels of all volumes.
func (l Layout) DataBytes() int64 { return l.Volumes * l.VolumeBytes }

// End is where the last volume ends: the size an uncompressed data file needs (more is
// allowed), and the size of a gzipped one's inflated stream.
func (l Layout) End() int64 { return l.VoxOffset + l.DataBytes() }

// SliceAt is the z-slice that holds byte n of a volume (0 <= n <= VolumeBytes; Depth at its
// end), for messages about data that ends or fails there.
func (l Layout) SliceAt(n int64) int64 {
	if l.SliceBytes <= 0 {
		return 0
	}
	return n / l.SliceBytes
}

// HeaderSize is the size of a NIfTI-1 or NIfTI-2 header (348 or 540 bytes).
func HeaderSize(version int) int { return headerSize(version) }

// DataStart is where the voxels of a single-file volume without extensions begin: after the
// header and its 4-byte extension flag (352 or 544), the vox_offset the writer gives it.
func DataStart(version int) int64 { return int64(headerSize(version)) + 4 }
