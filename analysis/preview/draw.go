package preview

import (
	"fmt"
	"image"
	"image/color"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"voxpipe/model"
)

// Layout, in pixels; text is basicfont's 7x13 face.
const (
	pad     = 10
	lineH   = 13
	charW   = 7
	gutter  = 12 // beside each panel, for its edge letters
	swatch  = 12
	legendH = 16 // per legend line
)

var (
	background = color.RGBA{24, 24, 24, 255}
	ink        = color.RGBA{230, 230, 230, 255}
	dimInk     = color.RGBA{160, 160, 160, 255}
)

// draw lays out and paints the picture into p.
func draw(p *Preview, v *view, side int, title string, labels []model.Label, colours *[256]*color.RGBA,
	mask []uint8, gray func(int) uint8) {
	size := panelSizes(v, side)
	head := []string{
		title,
		fmt.Sprintf("%s; stored %s, planes through the foreground centre", Convention, p.Orientation),
		fmt.Sprintf("window %.4g .. %.4g (1st-99th percentile)", p.Window[0], p.Window[1]),
	}
	if title == "" {
		head = head[1:]
	}
	panelsTop := pad + len(head)*lineH + pad
	cellH := 0
	width := pad
	for k := range planes {
		cellH = max(cellH, 2*lineH+size[k].Y+lineH)
		width += 2*gutter + size[k].X + pad
	}
	for _, s := range head {
		width = max(width, 2*pad+charW*len(s))
	}
	legendTop := panelsTop + cellH + pad
	entries, y := layoutLegend(labels, colours, legendTop, width)
	height := y + legendH + pad
	p.Legend = image.Rect(pad, legendTop, width-pad, y+legendH)

	img := image.NewRGBA(image.Rect(0, 0, width, height))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = background.R, background.G, background.B, 255
	}
	for i, s := range head {
		c := ink
		if i > 0 || title == "" {
			c = dimInk
		}
		text(img, pad, pad+i*lineH, s, c)
	}
	drawPanels(img, p, v, size, panelsTop, colours, mask, gray)
	drawLegend(img, entries)
	p.Image = img
}

// panelSizes is each plane's panel size: its extent in mm, the longer side scaled to side.
func panelSizes(v *view, side int) [3]image.Point {
	var size [3]image.Point
	for k, pl := range planes {
		w := float64(v.dims[pl.u]) * v.spacing[pl.u]
		h := float64(v.dims[pl.v]) * v.spacing[pl.v]
		scale := float64(side) / math.Max(w, h)
		size[k] = image.Pt(max(1, int(math.Round(w*scale))), max(1, int(math.Round(h*scale))))
	}
	return size
}

// legendEntry is a label's swatch and name in the legend.
type legendEntry struct {
	at     image.Point
	name   string
	colour color.RGBA
}

// layoutLegend places the legend entries (label 0 is not drawn, so not listed) from top,
// wrapped to width; it returns them and the top of their last row.
func layoutLegend(labels []model.Label, colours *[256]*color.RGBA, top, width int) ([]legendEntry, int) {
	var entries []legendEntry
	x, y := pad, top
	for _, l := range labels {
		if l.Value <= 0 || l.Value > 255 || colours[l.Value] == nil {
			continue
		}
		w := swatch + 4 + charW*len(l.Name) + 16
		if x > pad && x+w > width-pad {
			x, y = pad, y+legendH
		}
		entries = append(entries, legendEntry{image.Pt(x, y), l.Name, *colours[l.Value]})
		x += w
	}
	return entries, y
}

// drawPanels paints the three planes side by side from top, with their titles and
// orientation letters, and records them in p.Panels.
func drawPanels(img *image.RGBA, p *Preview, v *view, size [3]image.Point, top int, colours *[256]*color.RGBA,
	mask []uint8, gray func(int) uint8) {
	x := pad
	for k, pl := range planes {
		slice := p.Centre[pl.normal]
		text(img, x, top, fmt.Sprintf("%s %d/%d", pl.name, slice, v.dims[pl.normal]), ink)
		r := image.Rectangle{Min: image.Pt(x+gutter, top+2*lineH)}
		r.Max = r.Min.Add(size[k])
		p.Panels[k] = Panel{Name: pl.name, Rect: r, Slice: slice}
		paint(img, r, v, pl, slice, colours, mask, gray)
		midX, midY := (r.Min.X+r.Max.X)/2, (r.Min.Y+r.Max.Y)/2
		text(img, midX-charW/2, r.Min.Y-lineH, pl.up, dimInk)
		text(img, midX-charW/2, r.Max.Y, pl.low, dimInk)
		text(img, r.Min.X-gutter+2, midY-lineH/2, pl.left, dimInk)
		text(img, r.Max.X+3, midY-lineH/2, pl.right, dimInk)
		x = r.Max.X + gutter + pad
	}
}

// drawLegend draws the legend's swatches and names.
func drawLegend(img *image.RGBA, entries []legendEntry) {
	for _, e := range entries {
		sw := image.Rect(e.at.X, e.at.Y+1, e.at.X+swatch, e.at.Y+1+swatch)
		for py := sw.Min.Y; py < sw.Max.Y; py++ {
			for px := sw.Min.X; px < sw.Max.X; px++ {
				img.SetRGBA(px, py, e.colour)
			}
		}
		text(img, sw.Max.X+4, e.at.Y, e.name, ink)
	}
}

// paint draws one plane into r: nearest voxel at each pixel centre, grey from the image, the
// labels' areas blended with their colours and their outlines (pixels with a 4-neighbour of
// another label) opaque.
func paint(img *image.RGBA, r image.Rectangle, v *view, pl plane, slice int, colours *[256]*color.RGBA,
	mask []uint8, gray func(int) uint8) {
	w, h := r.Dx(), r.Dy()
	index := func(p, n, size int, rev bool) int {
		i := min(int((float64(p)+0.5)*float64(n)/float64(size)), n-1)
		if rev {
			i = n - 1 - i
		}
		return i
	}
	cols := make([]int, w)
	for px := range cols {
		cols[px] = v.off[pl.u][index(px, v.dims[pl.u], w, pl.uRev)]
	}
	base := v.off[pl.normal][slice]
	labels := make([]uint8, w*h)
	for py := range h {
		row := base + v.off[pl.v][index(py, v.dims[pl.v], h, pl.vRev)]
		for px, c := range cols {
			labels[py*w+px] = mask[row+c]
		}
	}
	for py := range h {
		row := base + v.off[pl.v][index(py, v.dims[pl.v], h, pl.vRev)]
		for px, c := range cols {
			g := gray(row + c)
			out := color.RGBA{g, g, g, 255}
			l := labels[py*w+px]
			if col := colours[l]; col != nil {
				edge := (px > 0 && labels[py*w+px-1] != l) || (px+1 < w && labels[py*w+px+1] != l) ||
					(py > 0 && labels[(py-1)*w+px] != l) || (py+1 < h && labels[(py+1)*w+px] != l)
				if edge {
					out = *col
				} else {
					out = color.RGBA{blend(g, col.R), blend(g, col.G), blend(g, col.B), 255}
				}
			}
			img.SetRGBA(r.Min.X+px, r.Min.Y+py, out)
		}
	}
}

func blend(g, c uint8) uint8 {
	return uint8(float64(g)*(1-fillAlpha) + float64(c)*fillAlpha + 0.5)
}

// text draws s with its top at y.
func text(dst *image.RGBA, x, y int, s string, c color.RGBA) {
	d := font.Drawer{Dst: dst, Src: image.NewUniform(c), Face: basicfont.Face7x13,
		Dot: fixed.P(x, y+basicfont.Face7x13.Ascent)}
	d.DrawString(s)
}
