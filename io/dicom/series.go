package dicom

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"voxpipe/io/nifti"
)

// Tolerances of series assembly, as dcm2niix's where it has one.
const (
	// orientTolerance: two direction cosines are equal within it (dcm2niix's isSameFloatGE).
	orientTolerance = 1e-4
	// sliceTolerance is the most (mm) a slice spacing may differ from the first one's
	// (dcm2niix's kSliceTolerance), and at most half the spacing.
	sliceTolerance = 0.2
	// tiltTolerance is the most (mm) the last slice may lie beside the line through the first
	// one along the normal before the series counts as tilted (sheared).
	tiltTolerance = 0.01
	// MaxVoxels bounds a series' volume.
	MaxVoxels = 1 << 31
)

// Slice is one image of a series: a frame of a file.
type Slice struct {
	File     *File
	Frame    int
	Position [3]float64
}

// Series is a set of slices that make one volume: the files of one SeriesInstanceUID with the
// same orientation, size and echo (a UID whose files differ in those is split into parts, as
// dcm2niix splits it).
type Series struct {
	UID, StudyUID    string
	Number           int
	Part             int // 1, 2, ... when the UID was split into several series, else 0
	EchoNumber       int
	Description      string
	ProtocolName     string
	PatientID        string // PHI: only in names the user asks for
	StudyDate        string
	Modality         string
	Rows, Columns    int
	Files            []*File
	BitsAllocated    int
	BitsStored       int
	Signed           bool
	Syntax           TransferSyntax
	Slope, Intercept float64
	ScaleVaries      bool // slices rescale differently: read as float32, scaled
	// Err, when set, is why the series cannot be read: a member that cannot (naming it),
	// two different files with one SOP Instance UID (ErrDuplicate), or its geometry.
	Err error
	// Duplicates are files left out as byte-identical copies of a member (same SOP Instance
	// UID, same bytes), for a note in the log.
	Duplicates        []string
	Slices            []Slice // in volume order: ascending along the slice normal
	Affine            nifti.Affine
	Spacing           [3]float64
	orient            [6]float64
	flipSlices        bool
	slicesInFileOrder []Slice
	// folder, when set, is the folder of files that name no series and fail (see Group):
	// the series stands for them, and its ID is the folder's.
	folder string
}

// ID identifies the series without patient information: the first 12 hex digits of the
// SHA-256 of its SeriesInstanceUID (and part), for logs and records.
func (s *Series) ID() string {
	if s.folder != "" {
		return shortHash("folder:" + s.folder)
	}
	return SeriesID(s.UID, s.Part)
}

// SeriesID is the ID of part part of the series with SeriesInstanceUID uid (Series.ID), known
// before any file of it is read (a PACS lists the UID): 12 hex digits of a SHA-256, no PHI.
func SeriesID(uid string, part int) string { return shortHash(uid + "/" + strconv.Itoa(part)) }

func shortHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}

// Dims are the volume's extents: columns, rows, slices.
func (s *Series) Dims() [3]int { return [3]int{s.Columns, s.Rows, len(s.Slices)} }

// assemble orders the slices and works out the affine the way dcm2niix does: slices in
// InstanceNumber order (by position when that order is not spatially sequential); the spacing
// is the distance between the first two; the volume ascends along the normal (row x column
// direction), its origin extrapolated from the first slice; rows are stored bottom-up (the
// DICOM column direction reversed), and LPS becomes RAS.
func (s *Series) assemble(sl []Slice) error {
	slices.SortStableFunc(sl, func(a, b Slice) int {
		return cmp.Or(cmp.Compare(a.File.InstanceNumber, b.File.InstanceNumber), cmp.Compare(a.File.Path, b.File.Path), cmp.Compare(a.Frame, b.Frame))
	})
	s.slicesInFileOrder = sl
	first := sl[0].File.Frames[sl[0].Frame]
	if err := s.checkSlices(sl, first); err != nil {
		return err
	}
	row, col := unit(vec(s.orient[0:3])), unit(vec(s.orient[3:6]))
	if math.IsNaN(row[0]) || math.IsNaN(col[0]) || math.Abs(dot(row, col)) > 0.01 {
		return fmt.Errorf("%w: ImageOrientationPatient %v (of %s) is not two orthogonal directions", ErrGeometry, s.orient, sl[0].name())
	}
	normal := cross(row, col)
	dz, ascending, err := stackSlices(sl, normal, first)
	if err != nil {
		return err
	}
	n := len(sl)
	origin := sl[0].Position
	s.Slices = sl
	if !ascending {
		origin = sub(origin, scale(normal, float64(n-1)*dz))
		s.Slices = slices.Clone(sl)
		slices.Reverse(s.Slices)
		s.flipSlices = true
	}
	dr, dc := first.PixelSpacing[0], first.PixelSpacing[1]
	if dr == 0 || dc == 0 {
		dr, dc = 1, 1 // as dcm2niix: no PixelSpacing, 1 mm
	}
	// Rows bottom-up (dcm2niix's default flip): the first stored row is DICOM's last.
	origin = add(origin, scale(col, float64(s.Rows-1)*dr))
	cols := [3][3]float64{scale(row, dc), scale(col, -dr), scale(normal, dz)}
	for r := range 3 {
		sign := 1.0
		if r < 2 { // LPS to RAS
			sign = -1
		}
		for c := range 3 {
			s.Affine[r][c] = sign * cols[c][r]
		}
		s.Affine[r][3] = sign * origin[r]
	}
	s.Affine[3] = [4]float64{0, 0, 0, 1}
	s.Spacing = [3]float64{dc, dr, dz}
	return nil
}

// checkSlices sets the series' rescale from the first slice's frame (ScaleVaries when another
// differs), and refuses slices without a position or orientation, files whose pixels cannot be
// read, and a volume over MaxVoxels.
func (s *Series) checkSlices(sl []Slice, first Frame) error {
	s.Slope, s.Intercept = first.Slope, first.Intercept
	checked := map[*File]bool{}
	for _, x := range sl { // first: a file whose pixels do not make its frames has no frame geometry either
		if !checked[x.File] {
			checked[x.File] = true
			if err := x.File.checkPixels(); err != nil {
				return fmt.Errorf("%s: %w", x.File.Path, err)
			}
		}
	}
	for _, x := range sl {
		fr := x.File.Frames[x.Frame]
		if fr.Slope != s.Slope || fr.Intercept != s.Intercept {
			s.ScaleVaries = true
		}
		if !fr.HasPosition || !fr.HasOrientation {
			return fmt.Errorf("%w: %s has no ImagePositionPatient or ImageOrientationPatient", ErrGeometry, x.name())
		}
	}
	if v := int64(s.Rows) * int64(s.Columns) * int64(len(sl)); v > MaxVoxels {
		return fmt.Errorf("%w: %d voxels, more than %d", ErrTooLarge, v, MaxVoxels)
	}
	return nil
}

// stackSlices orders the slices along the normal when their file order does not step along it
// evenly, and returns the slice spacing (the distance between the first two; of a single
// slice, its frame's spacing or thickness, else 1 mm) and whether the order ascends along the
// normal. It refuses uneven spacing, gaps and sheared (tilted) stacks.
func stackSlices(sl []Slice, normal vec3, first Frame) (dz float64, ascending bool, err error) {
	n := len(sl)
	proj := func(x Slice) float64 { return dot(x.Position, normal) }
	if n > 1 && !sequential(sl, proj) {
		slices.SortStableFunc(sl, func(a, b Slice) int { return cmp.Compare(proj(a), proj(b)) })
	}
	dz = first.SliceThickness
	if first.SliceSpacing > 0 {
		dz = first.SliceSpacing
	}
	if dz <= 0 {
		dz = 1
	}
	if n == 1 {
		return dz, true, nil
	}
	dz = norm(sub(sl[1].Position, sl[0].Position))
	if err := checkSpacing(sl, proj, dz); err != nil {
		return 0, false, err
	}
	v := sub(sl[n-1].Position, sl[0].Position)
	along := dot(v, normal)
	if off := norm(sub(v, scale(normal, along))); off > tiltTolerance {
		return 0, false, fmt.Errorf("%w: the slices are sheared (gantry tilt of %.3g degrees: the last slice, %s, lies %.3g mm beside the normal through the first, %s); dcm2niix resamples such series, voxpipe does not",
			ErrGeometry, math.Atan2(off, math.Abs(along))*180/math.Pi, sl[n-1].name(), off, sl[0].name())
	}
	return dz, proj(sl[1]) > proj(sl[0]), nil
}

// sequential reports whether consecutive slices step along the normal by the same signed
// amount (within sliceTolerance), as dcm2niix's ensureSequentialSlicePositions checks.
func sequential(sl []Slice, proj func(Slice) float64) bool {
	if len(sl) < 3 {
		return true
	}
	step := proj(sl[1]) - proj(sl[0])
	for i := 2; i < len(sl); i++ {
		if math.Abs(proj(sl[i])-proj(sl[i-1])-step) > sliceTolerance {
			return false
		}
	}
	return true
}

// checkSpacing refuses repeated positions, missing slices and spacing that varies, naming
// the files on either side.
func checkSpacing(sl []Slice, proj func(Slice) float64, dz float64) error {
	tol := min(sliceTolerance, dz/2)
	if dz < 1e-3 {
		return fmt.Errorf("%w: %d slices share one position, %s (several volumes, echoes or times in one series?); voxpipe reads 3D volumes", ErrGeometry, countAt(sl, proj, proj(sl[0])), namesAt(sl, proj, proj(sl[0])))
	}
	for i := 1; i < len(sl); i++ {
		a, b := sl[i-1], sl[i]
		d := math.Abs(proj(b) - proj(a))
		switch {
		case d < 1e-3:
			return fmt.Errorf("%w: %d slices share the position %.4g mm along the normal, %s (several volumes, echoes or times in one series?); voxpipe reads 3D volumes", ErrGeometry, countAt(sl, proj, proj(b)), proj(b), namesAt(sl, proj, proj(b)))
		case math.Abs(d-dz) <= tol:
		case math.Abs(d/dz-math.Round(d/dz)) < 0.1 && math.Round(d/dz) >= 2:
			return fmt.Errorf("%w: %.0f slices missing between %s (%.4g mm along the normal) and %s (%.4g mm) (spacing %.4g mm, gap %.4g mm)", ErrGeometry, math.Round(d/dz)-1, a.name(), proj(a), b.name(), proj(b), dz, d)
		default:
			return fmt.Errorf("%w: slice spacing varies: %.4g mm between %s (%.4g mm along the normal) and %s (%.4g mm), %.4g mm between the first two, %s and %s (tolerance %.3g mm)", ErrGeometry, d, a.name(), proj(a), b.name(), proj(b), dz, sl[0].name(), sl[1].name(), tol)
		}
	}
	return nil
}

func countAt(sl []Slice, proj func(Slice) float64, p float64) int {
	n := 0
	for _, x := range sl {
		if math.Abs(proj(x)-p) < 1e-3 {
			n++
		}
	}
	return n
}

// namesAt names the slices at p: the first three, and how many more.
func namesAt(sl []Slice, proj func(Slice) float64, p float64) string {
	var names []string
	n := 0
	for _, x := range sl {
		if math.Abs(proj(x)-p) < 1e-3 {
			if n++; n <= 3 {
				names = append(names, x.name())
			}
		}
	}
	if n > 3 {
		names = append(names, fmt.Sprintf("and %d more", n-3))
	}
	return strings.Join(names, ", ")
}

// name is the slice's file, and its frame (1-based) in a multi-frame file.
func (x Slice) name() string {
	if len(x.File.Frames) > 1 {
		return fmt.Sprintf("%s (frame %d)", x.File.Path, x.Frame+1)
	}
	return x.File.Path
}

type vec3 = [3]float64

func vec(v []float64) vec3         { return vec3{v[0], v[1], v[2]} }
func dot(a, b vec3) float64        { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }
func norm(a vec3) float64          { return math.Sqrt(dot(a, a)) }
func sub(a, b vec3) vec3           { return vec3{a[0] - b[0], a[1] - b[1], a[2] - b[2]} }
func add(a, b vec3) vec3           { return vec3{a[0] + b[0], a[1] + b[1], a[2] + b[2]} }
func scale(a vec3, k float64) vec3 { return vec3{a[0] * k, a[1] * k, a[2] * k} }
func unit(a vec3) vec3             { return scale(a, 1/norm(a)) }
func cross(a, b vec3) vec3 {
	return vec3{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
}
