package nifti

import (
	"errors"
	"fmt"
	"math"
)

// ErrNotLabels: a label file holds a value that is not a label (an integer in 0..255), after
// its scaling.
var ErrNotLabels = errors.New("nifti: not a label volume")

// ReadLabels reads the whole volume of a label file of any datatype as uint8 labels: uint8 as
// stored; other types through float32 with scl_slope/scl_inter applied, each value required to
// be an integer in 0..255 (outside datasets store labels as int16, int32 or float). opts as for
// Open. A value that is not a label gets an error wrapping ErrNotLabels naming the first one.
func ReadLabels(path string, opts ...OpenOption) (*Header, []uint8, error) {
	r, err := Open(path, opts...)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	slope, inter := r.Scaling()
	if r.g.dt == Uint8 && slope == 1 && inter == 0 {
		data, err := readWhole(r, r.ReadSlicesRaw)
		if err != nil {
			return nil, nil, err
		}
		return r.Header(), data, nil
	}
	vals, err := readWhole(r, r.ReadSlicesFloat32)
	if err != nil {
		return nil, nil, err
	}
	out := make([]uint8, len(vals))
	for i, v := range vals {
		f := float64(v)*slope + inter
		l := math.Round(f)
		if math.Abs(f-l) > 1e-4 || l < 0 || l > 255 || math.IsNaN(f) {
			nx, ny := r.g.nx, r.g.ny
			return nil, nil, fmt.Errorf("read %s: %w: voxel (%d,%d,%d) holds %v (%s), want an integer label in 0..255",
				path, ErrNotLabels, i%nx, i/nx%ny, i/(nx*ny), f, r.g.dt)
		}
		out[i] = uint8(l)
	}
	return r.Header(), out, nil
}
