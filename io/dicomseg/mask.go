package dicomseg

import (
	"fmt"
	"math"
	"sort"

	"voxpipe/io/dicom"
)

// positionTolerance is how far (mm) a frame without a source reference may lie from a slice,
// along the slice normal and beside it, to be placed on it by its position.
const positionTolerance = 0.01

// MaskInfo is what Mask found besides the mask.
type MaskInfo struct {
	// Overlapping counts the voxels that more than one segment holds (BINARY segments may
	// overlap; the mask keeps the highest segment number there).
	Overlapping int64
	// ByPosition counts the frames placed by their position, for want of a source reference
	// (or of the frame number of a multi-frame source).
	ByPosition int
}

// Mask is the SEG as a uint8 label mask on series' grid, in io/dicom's layout: voxel
// x + Columns*(y + Rows*z), x the column, y = Rows-1-row, z the index in series.Slices. Each
// frame is placed on its source slice (ReferencedSOPInstanceUID, and ReferencedFrameNumber for
// a multi-frame source), or by its position (within positionTolerance) when it has no source
// reference, and written with its segment number; where segments overlap the highest number
// wins. A frame whose source is not a slice of the series, a frame that lies more than half a
// slice away from its source slice, other Rows or Columns, another FrameOfReferenceUID fail
// with ErrReference; a segment number above 255 with ErrLabels.
func (s *SEG) Mask(series *dicom.Series) ([]byte, MaskInfo, error) {
	var info MaskInfo
	if err := s.checkReference(series); err != nil {
		return nil, info, err
	}
	z, info, err := s.placeFrames(series)
	if err != nil {
		return nil, info, err
	}
	plane := s.Rows * s.Columns
	mask := make([]byte, int64(plane)*int64(len(series.Slices)))
	var overlap []bool // per voxel, once two segments met there
	frame := make([]byte, plane)
	for i, f := range s.Frames {
		if err := s.Frame(i, frame); err != nil {
			return nil, info, err
		}
		seg := byte(f.Segment)
		base := z[i] * plane
		for r := range s.Rows {
			row := frame[r*s.Columns : (r+1)*s.Columns]
			out := mask[base+(s.Rows-1-r)*s.Columns:][:s.Columns]
			for c, on := range row {
				if on == 0 {
					continue
				}
				if v := out[c]; v != 0 && v != seg {
					if overlap == nil {
						overlap = make([]bool, len(mask))
					}
					if k := base + (s.Rows-1-r)*s.Columns + c; !overlap[k] {
						overlap[k] = true
						info.Overlapping++
					}
				}
				out[c] = max(out[c], seg)
			}
		}
	}
	return mask, info, nil
}

// checkReference refuses a series the SEG cannot lie on: one that cannot be read, another
// image size or frame of reference, and segment numbers a uint8 mask cannot hold.
func (s *SEG) checkReference(series *dicom.Series) error {
	if series == nil || len(series.Slices) == 0 {
		return fmt.Errorf("%w: no reference series", ErrReference)
	}
	if series.Err != nil {
		return fmt.Errorf("%w: the reference series cannot be read: %w", ErrReference, series.Err)
	}
	if s.Rows != series.Rows || s.Columns != series.Columns {
		return fmt.Errorf("%w: the SEG's frames are %dx%d (rows x columns), the series' images %dx%d", ErrReference, s.Rows, s.Columns, series.Rows, series.Columns)
	}
	ref := series.Slices[0].File.Context.FrameOfReferenceUID
	if s.FrameOfReferenceUID != "" && ref != "" && s.FrameOfReferenceUID != ref {
		return fmt.Errorf("%w: the SEG's FrameOfReferenceUID is %s, the series' %s", ErrReference, s.FrameOfReferenceUID, ref)
	}
	for _, sg := range s.Segments {
		if sg.Number > MaxSegments {
			return fmt.Errorf("%w: segment number %d does not fit a uint8 label mask", ErrLabels, sg.Number)
		}
	}
	return nil
}

// sliceKey names a frame of a source instance (0-based).
type sliceKey struct {
	uid   string
	frame int
}

// placeFrames finds each frame's slice z in series.
func (s *SEG) placeFrames(series *dicom.Series) ([]int, MaskInfo, error) {
	var info MaskInfo
	bySource := map[sliceKey]int{}
	frames := map[string]int{} // SOP instance UID -> the file's frame count
	for z, sl := range series.Slices {
		bySource[sliceKey{sl.File.SOPInstanceUID, sl.Frame}] = z
		frames[sl.File.SOPInstanceUID] = len(sl.File.Frames)
	}
	geo := newSliceGeometry(series)
	zs := make([]int, len(s.Frames))
	for i, f := range s.Frames {
		n, inSeries := frames[f.SourceSOPInstanceUID]
		switch {
		case f.SourceSOPInstanceUID != "" && !inSeries:
			return nil, info, fmt.Errorf("%w: frame %d's source instance %s is not in series %s", ErrReference, i+1, f.SourceSOPInstanceUID, series.UID)
		case f.SourceSOPInstanceUID != "" && (f.SourceFrame > 0 || n <= 1):
			fr := max(f.SourceFrame-1, 0)
			z, ok := bySource[sliceKey{f.SourceSOPInstanceUID, fr}]
			if !ok {
				return nil, info, fmt.Errorf("%w: frame %d's source, frame %d of instance %s, is not a slice of series %s", ErrReference, i+1, fr+1, f.SourceSOPInstanceUID, series.UID)
			}
			if f.HasPosition {
				if d := geo.along(f.Position, z); math.Abs(d) > geo.spacing/2 {
					return nil, info, fmt.Errorf("%w: frame %d lies %.4g mm along the slice normal from its source slice (instance %s): the SEG does not match the series' geometry", ErrReference, i+1, d, f.SourceSOPInstanceUID)
				}
			}
			zs[i] = z
		case f.HasPosition: // no source reference, or no frame number in a multi-frame source
			z, err := geo.find(f.Position)
			if err != nil {
				return nil, info, fmt.Errorf("%w: frame %d: %w", ErrReference, i+1, err)
			}
			zs[i] = z
			info.ByPosition++
		default:
			return nil, info, fmt.Errorf("%w: frame %d has neither a source image reference (with its frame number, for a multi-frame source) nor a position", ErrReference, i+1)
		}
	}
	return zs, info, nil
}

// sliceGeometry places points against a series' slices: their positions projected on the
// slice normal, ascending (Series.Slices' order).
type sliceGeometry struct {
	series  *dicom.Series
	normal  [3]float64
	proj    []float64
	spacing float64
}

func newSliceGeometry(series *dicom.Series) *sliceGeometry {
	fr := series.Slices[0].File.Frames[series.Slices[0].Frame]
	o := fr.Orientation
	n := [3]float64{o[1]*o[5] - o[2]*o[4], o[2]*o[3] - o[0]*o[5], o[0]*o[4] - o[1]*o[3]}
	if l := math.Sqrt(dot(n, n)); l > 0 {
		n = [3]float64{n[0] / l, n[1] / l, n[2] / l}
	}
	g := &sliceGeometry{series: series, normal: n, spacing: series.Spacing[2]}
	for _, sl := range series.Slices {
		g.proj = append(g.proj, dot(sl.Position, n))
	}
	if g.spacing <= 0 {
		g.spacing = 1
	}
	return g
}

func dot(a, b [3]float64) float64 { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }

// along is how far p lies from slice z along the normal.
func (g *sliceGeometry) along(p [3]float64, z int) float64 { return dot(p, g.normal) - g.proj[z] }

// find is the slice p lies on: within positionTolerance along the normal and beside the
// slice's position.
func (g *sliceGeometry) find(p [3]float64) (int, error) {
	d := dot(p, g.normal)
	z := sort.SearchFloat64s(g.proj, d-positionTolerance)
	if z == len(g.proj) || g.proj[z]-d > positionTolerance {
		return 0, fmt.Errorf("its position (%.6g, %.6g, %.6g) lies on no slice of series %s (%.6g mm along the normal; the slices lie from %.6g to %.6g, %.4g mm apart)",
			p[0], p[1], p[2], g.series.UID, d, g.proj[0], g.proj[len(g.proj)-1], g.spacing)
	}
	q := g.series.Slices[z].Position
	v := [3]float64{p[0] - q[0], p[1] - q[1], p[2] - q[2]}
	a := d - g.proj[z] // v's part along the normal
	if off := math.Sqrt(max(dot(v, v)-a*a, 0)); off > positionTolerance {
		return 0, fmt.Errorf("its position (%.6g, %.6g, %.6g) lies %.4g mm beside slice %d's origin, in its plane: not on the series' grid", p[0], p[1], p[2], off, z+1)
	}
	return z, nil
}
