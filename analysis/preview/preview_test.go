package preview

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"voxpipe/internal/pngcheck"
	"voxpipe/io/nifti"
	"voxpipe/model"
	"voxpipe/phantom"
)

// Pure colours, so a blended pixel shows its label: green keeps r == b < g, and so on.
var testLabels = []model.Label{
	{Value: 0, Name: "background", Color: "#000000"},
	{Value: 1, Name: "tissue", Color: "#00ff00"},
	{Value: 2, Name: "fluid", Color: "#0000ff"},
	{Value: 3, Name: "lesion", Color: "#ff0000"},
}

// tinted reports whether c shows label l's colour (over some grey), and grey whether it shows
// none.
func tinted(c color.RGBA, l uint8) bool {
	switch l {
	case 1:
		return c.R == c.B && c.G > c.R
	case 2:
		return c.R == c.G && c.B > c.R
	case 3:
		return c.G == c.B && c.R > c.G
	}
	return c.R == c.G && c.G == c.B
}

// save writes the picture under $VOXPIPE_PREVIEW_DIR, to look at by hand.
func save(t *testing.T, name string, p *Preview) {
	if dir := os.Getenv("VOXPIPE_PREVIEW_DIR"); dir != "" {
		if err := WritePNG(filepath.Join(dir, name+".png"), p.Image); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPhantomOverlay renders a phantom (RAS-stored, anisotropic) and checks every pixel of the
// three panels against the truth voxel that the radiological convention puts there, computed
// here independently: grey where the truth is background, tinted by the label elsewhere.
func TestPhantomOverlay(t *testing.T) {
	t.Parallel()
	ph, err := phantom.Generate(phantom.Params{NX: 64, NY: 48, NZ: 40, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	g := GeometryOf(ph.Header)
	p, err := Render(ph.Image, ph.Truth, g, testLabels, Options{Title: "phantom"})
	if err != nil {
		t.Fatal(err)
	}
	save(t, "phantom", p)
	if _, err := pngcheck.Image(p.Image); err != nil {
		t.Errorf("phantom preview: %v", err)
	}
	if p.Orientation != "RAS" {
		t.Fatalf("phantom stored as %s, want RAS", p.Orientation)
	}
	dims := [3]int{64, 48, 40}
	centre := foregroundCentre(ph.Truth, dims)
	if p.Centre != centre {
		t.Errorf("centre %v, want %v", p.Centre, centre)
	}
	for k, pan := range p.Panels {
		checkPanel(t, pan, planes[k], p.Image, ph.Truth, dims, g.Affine.VoxelSizes(), centre)
	}
	checkLegend(t, p)
}

// foregroundCentre is the centroid of the voxels labelled non-zero, rounded.
func foregroundCentre(truth []uint8, dims [3]int) [3]int {
	nx, ny := dims[0], dims[1]
	var n, sx, sy, sz float64
	for i, l := range truth {
		if l != 0 {
			n++
			sx += float64(i % nx)
			sy += float64(i / nx % ny)
			sz += float64(i / (nx * ny))
		}
	}
	return [3]int{int(math.Round(sx / n)), int(math.Round(sy / n)), int(math.Round(sz / n))}
}

// checkPanel checks a panel of the RAS volume truth (spacing sp) through centre: its aspect
// and size, and that every pixel has its voxel's label colour.
func checkPanel(t *testing.T, pan Panel, pl plane, img *image.RGBA, truth []uint8, dims [3]int, sp [3]float64, centre [3]int) {
	t.Helper()
	nx, ny := dims[0], dims[1]
	w, h := pan.Rect.Dx(), pan.Rect.Dy()
	// Square millimetres: width/height is the plane's extent ratio.
	wantRatio := float64(dims[pl.u]) * sp[pl.u] / (float64(dims[pl.v]) * sp[pl.v])
	if got := float64(w) / float64(h); math.Abs(got-wantRatio) > 2/float64(min(w, h)) {
		t.Errorf("%s: %dx%d px, aspect %.3f, want %.3f", pan.Name, w, h, got, wantRatio)
	}
	if max(w, h) != DefaultPanelSide {
		t.Errorf("%s: %dx%d px, want the longer side %d", pan.Name, w, h, DefaultPanelSide)
	}
	wrong, seen := 0, [4]int{}
	for py := range h {
		for px := range w {
			var c [3]int
			c[pl.normal] = centre[pl.normal]
			// Radiological: the first column is the largest RAS index across, the first
			// row the largest up.
			c[pl.u] = dims[pl.u] - 1 - min(int((float64(px)+0.5)*float64(dims[pl.u])/float64(w)), dims[pl.u]-1)
			c[pl.v] = dims[pl.v] - 1 - min(int((float64(py)+0.5)*float64(dims[pl.v])/float64(h)), dims[pl.v]-1)
			l := truth[(c[2]*ny+c[1])*nx+c[0]]
			seen[l]++
			if !tinted(img.RGBAAt(pan.Rect.Min.X+px, pan.Rect.Min.Y+py), l) {
				wrong++
			}
		}
	}
	if wrong > 0 {
		t.Errorf("%s: %d of %d pixels not in the colour of their voxel's label", pan.Name, wrong, w*h)
	}
	if seen[0] == 0 || seen[1] == 0 || seen[2] == 0 {
		t.Errorf("%s: labels seen %v: the plane should cut background, tissue and fluid", pan.Name, seen)
	}
}

// checkLegend checks the legend: one swatch per foreground label, in its exact colour, and
// the names in ink.
func checkLegend(t *testing.T, p *Preview) {
	t.Helper()
	// The legend: one swatch per foreground label, in its exact colour, and its name in ink.
	for _, l := range testLabels {
		c, _ := parseColour(l.Color)
		found := false
		for y := p.Legend.Min.Y; y < p.Legend.Max.Y; y++ {
			for x := p.Legend.Min.X; x < p.Legend.Max.X; x++ {
				found = found || p.Image.RGBAAt(x, y) == c
			}
		}
		if found != (l.Value != 0) {
			t.Errorf("legend: swatch of %s found %v, want %v", l.Name, found, l.Value != 0)
		}
	}
	inked := 0
	for y := p.Legend.Min.Y; y < p.Legend.Max.Y; y++ {
		for x := p.Legend.Min.X; x < p.Legend.Max.X; x++ {
			if p.Image.RGBAAt(x, y) == ink {
				inked++
			}
		}
	}
	if inked < 3*20 {
		t.Errorf("legend: %d pixels of text, want the three names", inked)
	}
}

// marked is a 20x16x12 volume (voxels 1 x 1.5 x 2 mm) in RAS order with a marker of label 3 at
// the anterior edge (largest j) on the patient's right (largest i), and a block of label 1.
func marked() (img []int16, mask []uint8, dims [3]int) {
	dims = [3]int{20, 16, 12}
	img, mask = make([]int16, 20*16*12), make([]uint8, 20*16*12)
	for i := range img {
		img[i] = int16(i % 97)
	}
	for z := 4; z < 8; z++ {
		for y := 14; y < 16; y++ {
			for x := 16; x < 19; x++ {
				mask[(z*16+y)*20+x] = 3
			}
		}
	}
	return img, mask, dims
}

func rasAffine(dims [3]int) nifti.Affine {
	return nifti.Affine{{1, 0, 0, -10}, {0, 1.5, 0, -12}, {0, 0, 2, -12}, {0, 0, 0, 1}}
}

// lps stores the same volume with i to the left and j posterior: both flipped, the affine
// changed to keep every voxel where it was.
func lps(img []int16, mask []uint8, dims [3]int, a nifti.Affine) ([]int16, []uint8, nifti.Affine) {
	nx, ny, nz := dims[0], dims[1], dims[2]
	img2, mask2 := make([]int16, len(img)), make([]uint8, len(mask))
	for z := range nz {
		for y := range ny {
			for x := range nx {
				src := (z*ny+y)*nx + x
				dst := (z*ny+(ny-1-y))*nx + (nx - 1 - x)
				img2[dst], mask2[dst] = img[src], mask[src]
			}
		}
	}
	b := a
	for r := range 3 {
		b[r][0], b[r][1] = -a[r][0], -a[r][1]
		b[r][3] = a[r][3] + a[r][0]*float64(nx-1) + a[r][1]*float64(ny-1)
	}
	return img2, mask2, b
}

// permuted stores it with the axes in the order (k, i, j): "SRA".
func permuted(img []int16, mask []uint8, dims [3]int, a nifti.Affine) ([]int16, []uint8, [3]int, nifti.Affine) {
	nx, ny, nz := dims[0], dims[1], dims[2]
	img2, mask2 := make([]int16, len(img)), make([]uint8, len(mask))
	for z := range nz {
		for y := range ny {
			for x := range nx {
				src := (z*ny+y)*nx + x
				dst := (y*nx+x)*nz + z // new axes: 0 <- z, 1 <- x, 2 <- y
				img2[dst], mask2[dst] = img[src], mask[src]
			}
		}
	}
	var b nifti.Affine
	for r := range 4 {
		b[r] = [4]float64{a[r][2], a[r][0], a[r][1], a[r][3]}
	}
	return img2, mask2, [3]int{nz, nx, ny}, b
}

func TestOrientationWhateverTheStorage(t *testing.T) {
	t.Parallel()
	img, mask, dims := marked()
	a := rasAffine(dims)
	ras, err := Render(img, mask, Geometry{Dims: dims, Affine: a}, testLabels, Options{Title: "RAS"})
	if err != nil {
		t.Fatal(err)
	}
	save(t, "ras", ras)
	ax := ras.Panels[0]
	// The marker spans y 14..15 of 16 (anterior) and x 16..18 of 20 (patient's right): top rows
	// and left columns of the axial view.
	red := image.Rectangle{}
	for y := ax.Rect.Min.Y; y < ax.Rect.Max.Y; y++ {
		for x := ax.Rect.Min.X; x < ax.Rect.Max.X; x++ {
			if c := ras.Image.RGBAAt(x, y); c.R > c.G && c.G == c.B {
				red = red.Union(image.Rect(x, y, x+1, y+1))
			}
		}
	}
	rel := red.Sub(ax.Rect.Min)
	h, w := ax.Rect.Dy(), ax.Rect.Dx()
	if red.Empty() || rel.Min.Y != 0 || rel.Max.Y > h/8+1 || rel.Min.X < w/20 || rel.Max.X > w/5+1 {
		t.Errorf("marker drawn at %v of the %dx%d axial view: want the top eighth, columns %d..%d", rel, w, h, w/20, w/5)
	}
	if got := float64(w) / float64(h); math.Abs(got-20.0/24) > 0.01 {
		t.Errorf("axial view %dx%d: want 20 mm x 24 mm", w, h)
	}

	lpsImg, lpsMask, lpsAff := lps(img, mask, dims, a)
	sraImg, sraMask, sraDims, sraAff := permuted(img, mask, dims, a)
	for _, tc := range []struct {
		name string
		img  []int16
		mask []uint8
		dims [3]int
		a    nifti.Affine
	}{
		{"LPS", lpsImg, lpsMask, dims, lpsAff},
		{"SRA", sraImg, sraMask, sraDims, sraAff},
	} {
		p, err := Render(tc.img, tc.mask, Geometry{Dims: tc.dims, Affine: tc.a}, testLabels, Options{Title: "RAS"})
		if err != nil {
			t.Fatal(err)
		}
		save(t, tc.name, p)
		if p.Orientation != tc.name {
			t.Errorf("%s: orientation %s", tc.name, p.Orientation)
		}
		// Same picture but for the "stored as" words of the second line.
		if p.Image.Bounds() != ras.Image.Bounds() || p.Panels != ras.Panels || p.Centre != ras.Centre {
			t.Fatalf("%s: layout %v %v %v, RAS copy %v %v %v", tc.name, p.Image.Bounds(), p.Panels, p.Centre,
				ras.Image.Bounds(), ras.Panels, ras.Centre)
		}
		for _, pan := range p.Panels {
			for y := pan.Rect.Min.Y; y < pan.Rect.Max.Y; y++ {
				for x := pan.Rect.Min.X; x < pan.Rect.Max.X; x++ {
					if p.Image.RGBAAt(x, y) != ras.Image.RGBAAt(x, y) {
						t.Fatalf("%s: %s view differs from the RAS copy's at (%d, %d)", tc.name, pan.Name, x, y)
					}
				}
			}
		}
	}
}

func TestDeterministicAndEmpty(t *testing.T) {
	t.Parallel()
	img, mask, dims := marked()
	g := Geometry{Dims: dims, Affine: rasAffine(dims)}
	var pngs [2][]byte
	for i := range pngs {
		p, err := Render(img, mask, g, testLabels, Options{Title: "x"})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := Encode(&buf, p.Image); err != nil {
			t.Fatal(err)
		}
		pngs[i] = buf.Bytes()
	}
	if !bytes.Equal(pngs[0], pngs[1]) {
		t.Error("two renderings of the same volume differ")
	}
	if _, err := png.Decode(bytes.NewReader(pngs[0])); err != nil {
		t.Error(err)
	}

	p, err := Render(img, make([]uint8, len(mask)), g, testLabels, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Centre != [3]int{10, 8, 6} { // (19/2, 15/2, 11/2) rounded half away from zero
		t.Errorf("empty mask: centre %v, want the volume's", p.Centre)
	}
	for _, pan := range p.Panels {
		for y := pan.Rect.Min.Y; y < pan.Rect.Max.Y; y++ {
			for x := pan.Rect.Min.X; x < pan.Rect.Max.X; x++ {
				if !tinted(p.Image.RGBAAt(x, y), 0) {
					t.Fatalf("empty mask: %s has a coloured pixel", pan.Name)
				}
			}
		}
	}
}

func TestWritePNGAndErrors(t *testing.T) {
	t.Parallel()
	img, mask, dims := marked()
	g := Geometry{Dims: dims, Affine: rasAffine(dims)}
	if _, err := Render(img[:5], mask, g, testLabels, Options{}); !errors.Is(err, ErrDims) {
		t.Errorf("short image: %v, want ErrDims", err)
	}
	bad := []model.Label{{Value: 1, Name: "x", Color: "red"}}
	if _, err := Render(img, mask, g, bad, Options{}); !errors.Is(err, ErrColor) {
		t.Errorf("colour red: %v, want ErrColor", err)
	}
	p, err := Render([]float32(nil), mask, g, testLabels, Options{PanelSide: 100})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "v.png")
	if err := WritePNG(path, p.Image); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	back, err := png.Decode(f)
	if err != nil || back.Bounds() != p.Image.Bounds() {
		t.Errorf("read back: %v, %v", back.Bounds(), err)
	}
	for _, pan := range p.Panels {
		if max(pan.Rect.Dx(), pan.Rect.Dy()) != 100 {
			t.Errorf("%s: %v, want a longer side of 100", pan.Name, pan.Rect)
		}
	}
}
