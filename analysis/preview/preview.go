// Package preview draws a segmentation for a quick look in a file browser: one PNG per volume
// with the axial, coronal and sagittal planes through the centre of the foreground, the image
// windowed to its 1st-99th percentiles, the mask overlaid in the model card's colours (label 0
// not drawn) and a legend.
//
// Planes are shown in one anatomical convention whatever the file's axis order: radiological
// (the patient's right on the image's left; anterior up in axial views, superior up in coronal
// and sagittal ones, anterior on the left in sagittal views), each edge lettered. The volume is
// not copied to reorient it: geometry's reorientation to RAS (permutation and flips) maps each
// drawn pixel to its voxel in the stored grid. Pixels are square millimetres: a plane's width
// and height are its extent in mm, from the affine's voxel sizes, scaled so that the longer side
// is Options.PanelSide pixels. Voxels are sampled at pixel centres (nearest neighbour), which
// keeps label edges exact and rendering independent of the volume's size beyond the one pass
// that finds the centre.
package preview

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"voxpipe/geometry"
	"voxpipe/internal/atomicfile"
	"voxpipe/io/nifti"
	"voxpipe/model"
)

// Errors, compared with errors.Is.
var (
	// ErrDims: the dims are not positive, or the mask or image length differs from their product.
	ErrDims = errors.New("preview: mask, image and dims disagree")
	// ErrColor: a label's colour is not #rrggbb.
	ErrColor = errors.New("preview: bad label colour")
)

// Convention names the display convention on the image and in this package's documentation.
const Convention = "radiological: patient's right on image left"

// DefaultPanelSide is the longer side of each plane in pixels unless Options say otherwise.
const DefaultPanelSide = 384

// Overlay opacity of a label's area; its outline is drawn opaque.
const fillAlpha = 0.4

// Geometry is what the preview needs of the volume's header.
type Geometry struct {
	Dims   [3]int
	Affine nifti.Affine // voxel to world (RAS+ mm): orientation and voxel sizes
	// Slope and Inter scale the stored image values (Slope 0: unscaled); only the sign of the
	// slope changes the picture, but the window is reported in scaled units.
	Slope, Inter float64
}

// GeometryOf is the geometry of a NIfTI header: dims 1..3 (1 beyond dim[0]), its affine and
// its effective scaling.
func GeometryOf(h *nifti.Header) Geometry {
	g := Geometry{Affine: h.Affine()}
	for i := range 3 {
		g.Dims[i] = 1
		if int64(i+1) <= h.Dim[0] {
			g.Dims[i] = int(h.Dim[i+1])
		}
	}
	g.Slope, g.Inter = h.EffectiveScaling()
	return g
}

// Options tune Render; the zero value is ready to use.
type Options struct {
	Title     string // first line of the picture, e.g. the volume's name
	PanelSide int    // longer side of each plane in pixels; 0 means DefaultPanelSide
}

// Panel is where one plane was drawn.
type Panel struct {
	Name string          // axial, coronal or sagittal
	Rect image.Rectangle // in the picture
	// Slice is the plane's index along its normal, in the RAS-reoriented grid.
	Slice int
}

// Preview is a rendered picture and where its parts are.
type Preview struct {
	Image  *image.RGBA
	Panels [3]Panel // axial, coronal, sagittal
	Legend image.Rectangle
	// Centre is the planes' crossing in the RAS-reoriented grid (voxel indices), Orientation the
	// file's axis codes it was reoriented from, and Window the intensities (scaled units) shown
	// black and white.
	Centre      [3]int
	Orientation string
	Window      [2]float64
}

// view maps RAS-grid indices to offsets in the stored volume: voxel (o0, o1, o2) of the
// reoriented grid is stored at off[0][o0] + off[1][o1] + off[2][o2].
type view struct {
	r       geometry.Reorient
	dims    [3]int     // of the RAS grid
	spacing [3]float64 // mm, along the RAS grid's axes
	off     [3][]int
}

func newView(g Geometry) (*view, string, error) {
	codes, err := geometry.Axcodes(g.Affine)
	if err != nil {
		return nil, "", fmt.Errorf("preview: %w", err)
	}
	r, err := geometry.NewReorient(codes, geometry.Canonical, g.Dims)
	if err != nil {
		return nil, "", fmt.Errorf("preview: %w", err)
	}
	v := &view{r: r, dims: r.OutDims(), spacing: r.Spacing(g.Affine.VoxelSizes())}
	stride := [3]int{1, g.Dims[0], g.Dims[0] * g.Dims[1]}
	for a := range 3 {
		b := r.Perm[a]
		v.off[a] = make([]int, v.dims[a])
		for o := range v.dims[a] {
			i := o
			if r.Flip[a] {
				i = g.Dims[b] - 1 - o
			}
			v.off[a][o] = i * stride[b]
		}
		if !(v.spacing[a] > 0) || math.IsInf(v.spacing[a], 0) {
			v.spacing[a] = 1
		}
	}
	return v, codes, nil
}

// plane describes one panel: its RAS axes across (u, left to right) and down (v, top to
// bottom), whether each runs against the RAS index, and the letters at its edges.
type plane struct {
	name                 string
	normal, u, v         int
	uRev, vRev           bool
	left, right, up, low string
}

// planes in Convention: radiological axial and coronal views (R on the left), sagittal views
// with anterior on the left; superior or anterior up.
var planes = [3]plane{
	{"axial", 2, 0, 1, true, true, "R", "L", "A", "P"},
	{"coronal", 1, 0, 2, true, true, "R", "L", "S", "I"},
	{"sagittal", 0, 1, 2, true, true, "A", "P", "S", "I"},
}

// Render draws the preview of image (stored values, on g's grid; may be empty: a black
// background) and mask (label values on the same grid), in the colours of labels; label 0 and
// values that labels do not list are not drawn. NaN image voxels are drawn black.
func Render[T int16 | float32](img []T, mask []uint8, g Geometry, labels []model.Label, opts Options) (*Preview, error) {
	n := 1
	for _, d := range g.Dims {
		if d < 1 || d > math.MaxInt32 || n > math.MaxInt/d {
			return nil, fmt.Errorf("%w: dims %v", ErrDims, g.Dims)
		}
		n *= d
	}
	if len(mask) != n || (len(img) != 0 && len(img) != n) {
		return nil, fmt.Errorf("%w: dims %v (%d voxels), mask %d, image %d", ErrDims, g.Dims, n, len(mask), len(img))
	}
	var colours [256]*color.RGBA
	for _, l := range labels {
		c, err := parseColour(l.Color)
		if err != nil {
			return nil, fmt.Errorf("%w: label %d (%s): %q", ErrColor, l.Value, l.Name, l.Color)
		}
		if l.Value > 0 && l.Value < 256 {
			colours[l.Value] = &c
		}
	}
	v, codes, err := newView(g)
	if err != nil {
		return nil, err
	}
	side := opts.PanelSide
	if side <= 0 {
		side = DefaultPanelSide
	}
	p := &Preview{Orientation: codes}
	p.Centre = v.centre(mask, g.Dims)
	slope, inter := g.Slope, g.Inter
	if slope == 0 || math.IsNaN(slope) || math.IsInf(slope, 0) {
		slope, inter = 1, 0
	}
	p.Window = window(img, slope, inter)
	// gray maps a voxel offset to its windowed grey level.
	gray := func(int) uint8 { return 0 }
	if len(img) > 0 {
		lo, width := p.Window[0], p.Window[1]-p.Window[0]
		gray = func(i int) uint8 {
			x := (float64(img[i])*slope + inter - lo) / width * 255
			if !(x > 0) { // also NaN
				return 0
			}
			return uint8(min(x+0.5, 255))
		}
	}
	draw(p, v, side, opts.Title, labels, &colours, mask, gray)
	return p, nil
}

// parseColour reads "#rrggbb".
func parseColour(s string) (color.RGBA, error) {
	if len(s) != 7 || s[0] != '#' {
		return color.RGBA{}, ErrColor
	}
	x, err := strconv.ParseUint(s[1:], 16, 32)
	if err != nil {
		return color.RGBA{}, ErrColor
	}
	return color.RGBA{uint8(x >> 16), uint8(x >> 8), uint8(x), 255}, nil
}

// centre is the centroid of the mask's non-zero voxels, in the RAS grid, rounded; the volume's
// middle when the mask has none. Integer sums, in parallel over planes: the same whatever the
// number of cores.
func (v *view) centre(mask []uint8, dims [3]int) [3]int {
	nx, ny, nz := dims[0], dims[1], dims[2]
	workers := min(runtime.GOMAXPROCS(0), nz)
	type sums struct{ n, x, y, z int64 }
	part := make([]sums, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s := &part[w]
			for z := w * nz / workers; z < (w+1)*nz/workers; z++ {
				for y := range ny {
					row := mask[(z*ny+y)*nx : (z*ny+y+1)*nx]
					var cnt, sx int64
					for x := 0; x < len(row); x++ {
						// Skip eight background voxels at a time.
						if x+8 <= len(row) && allZero(row[x:x+8]) {
							x += 7
							continue
						}
						if row[x] != 0 {
							cnt++
							sx += int64(x)
						}
					}
					s.n += cnt
					s.x += sx
					s.y += cnt * int64(y)
					s.z += cnt * int64(z)
				}
			}
		})
	}
	wg.Wait()
	var t sums
	for _, s := range part {
		t.n, t.x, t.y, t.z = t.n+s.n, t.x+s.x, t.y+s.y, t.z+s.z
	}
	// In the RAS grid, in integers (a flipped axis sums n-1-x), rounded half up there: every
	// storage order of a volume gives the same centre.
	sum := [3]int64{t.x, t.y, t.z}
	var out [3]int
	for a := range 3 {
		b := v.r.Perm[a]
		n, s := t.n, sum[b]
		if n == 0 { // no foreground: the middle
			n, s = 2, int64(dims[b]-1)
		}
		if v.r.Flip[a] {
			s = n*int64(dims[b]-1) - s
		}
		out[a] = int((2*s + n) / (2 * n))
	}
	return out
}

func allZero(b []uint8) bool {
	return b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] == 0
}

// window is the 1st and 99th percentiles of the scaled finite values of a sample of about
// 2^18 voxels, evenly strided (a stride prime to the row length, so every column is sampled);
// [0, 1] without an image, and widened to 1 when flat.
func window[T int16 | float32](img []T, slope, inter float64) [2]float64 {
	if len(img) == 0 {
		return [2]float64{0, 1}
	}
	stride := max(1, len(img)>>18) | 1
	sample := make([]float64, 0, len(img)/stride+1)
	for i := 0; i < len(img); i += stride {
		if x := float64(img[i])*slope + inter; x-x == 0 {
			sample = append(sample, x)
		}
	}
	if len(sample) == 0 {
		return [2]float64{0, 1}
	}
	slices.Sort(sample)
	q := func(p float64) float64 { return sample[int(p*float64(len(sample)-1)+0.5)] }
	lo, hi := q(0.01), q(0.99)
	if !(hi > lo) {
		hi = lo + 1
	}
	return [2]float64{lo, hi}
}

// Encode writes the picture as PNG.
func Encode(w io.Writer, img image.Image) error {
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(w, img); err != nil {
		return fmt.Errorf("preview: encode png: %w", err)
	}
	return nil
}

// WritePNG writes the picture to path as PNG, atomically (temporary file and rename).
func WritePNG(path string, img image.Image) error {
	var buf bytes.Buffer
	if err := Encode(&buf, img); err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(path, buf.Bytes()); err != nil {
		return fmt.Errorf("preview: %w", err)
	}
	return nil
}
