package engine

import (
	"errors"
	"fmt"
	"voxpipe/model"
)

// ErrBadVolume is wrapped by errors about a Volume, mask buffer or slab range an engine cannot
// work on.
var ErrBadVolume = errors.New("engine: bad volume")

// CheckVolume validates vol, and out unless it is nil: errors wrap ErrBadVolume.
func CheckVolume(vol *model.Volume, out []uint8) error {
	if vol == nil {
		return fmt.Errorf("%w: nil volume", ErrBadVolume)
	}
	if vol.NX < 1 || vol.NY < 1 || vol.NZ < 1 || vol.NX > 1<<20 || vol.NY > 1<<20 || vol.NZ > 1<<20 {
		return fmt.Errorf("%w: dimensions %dx%dx%d", ErrBadVolume, vol.NX, vol.NY, vol.NZ)
	}
	n := vol.NX * vol.NY * vol.NZ
	switch {
	case (vol.I16 == nil) == (vol.F32 == nil):
		return fmt.Errorf("%w: want exactly one of I16 and F32", ErrBadVolume)
	case vol.I16 != nil && len(vol.I16) != n, vol.F32 != nil && len(vol.F32) != n:
		return fmt.Errorf("%w: %d values for %dx%dx%d", ErrBadVolume, max(len(vol.I16), len(vol.F32)), vol.NX, vol.NY, vol.NZ)
	case out != nil && len(out) != n:
		return fmt.Errorf("%w: mask of %d voxels for a volume of %d", ErrBadVolume, len(out), n)
	}
	return nil
}
