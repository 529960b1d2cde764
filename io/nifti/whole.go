package nifti

import "fmt"

// ReadFloat32 reads one whole volume as float32 with scl_slope/scl_inter applied (see
// Reader.Scaling). The returned header is the file's (see Reader.Header).
func ReadFloat32(path string, opts ...OpenOption) (*Header, []float32, error) {
	r, err := Open(path, opts...)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	data, err := readWhole(r, r.ReadSlicesFloat32)
	if err != nil {
		return nil, nil, err
	}
	if slope, inter := r.Scaling(); slope != 1 || inter != 0 {
		scaleFloat32(data, slope, inter)
	}
	return r.Header(), data, nil
}

// ReadHeader returns the header of path, extensions included, after the checks Open makes on
// the header and the files' sizes (on volume 0 of a multi-volume file: use Header.Volumes to
// pick one for WithVolume). It reads no voxels: of a .nii.gz only the header and extensions
// are inflated.
func ReadHeader(path string) (*Header, error) {
	r, err := Open(path, WithVolume(0), func(c *openConfig) { c.headerOnly = true })
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Header(), nil
}

// ReadUint8 reads the whole volume of a uint8 file (label masks), unscaled; opts as for Open
// (WithVolume for a 4D file). Files of any other datatype get an error wrapping
// ErrUnsupportedDatatype.
func ReadUint8(path string, opts ...OpenOption) (*Header, []uint8, error) {
	r, err := Open(path, opts...)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	if r.g.dt != Uint8 {
		return nil, nil, fmt.Errorf("read %s: %w: %s, want uint8", r.dataPath, ErrUnsupportedDatatype, r.g.dt)
	}
	data, err := readWhole(r, r.ReadSlicesRaw)
	if err != nil {
		return nil, nil, err
	}
	return r.Header(), data, nil
}

// readWhole reads every remaining slice. When the data's size is unconfirmed (gzip whose
// trailer disagrees with the header, e.g. a hostile or multi-member file), the buffer grows
// with the data actually decompressed instead of being sized by the header up front.
func readWhole[T any](r *Reader, read func([]T, int) (int, error)) ([]T, error) {
	sliceVoxels := r.g.sliceVoxels
	total := (r.g.nz - r.next) * sliceVoxels
	slab := max(1, int((4<<20)/r.g.sliceBytes)) // ~4 MiB of stored data per call
	size := total
	if !r.sizeKnown {
		size = min(total, max(slab, int((64<<20)/r.g.sliceBytes))*sliceVoxels)
	}
	buf := make([]T, size)
	for filled := 0; filled < total; {
		if filled == len(buf) {
			grown := make([]T, min(total, 2*len(buf)))
			copy(grown, buf)
			buf = grown
		}
		k, err := read(buf[filled:], min(slab, (len(buf)-filled)/sliceVoxels))
		if err != nil {
			return nil, err
		}
		filled += k * sliceVoxels
	}
	return buf, nil
}
