package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"
	"voxpipe/stage"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// chartFont is the charts' font; the HTML page embeds it once (fontFaceCSS) so that the SVGs
// render with the metrics gonum/plot laid them out with.
var chartFont = font.Font{Typeface: "Liberation", Variant: "Sans"}

var (
	colorA = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colorB = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}

	// stageColors: copies in cool tones, compute in warm ones, host I/O in greys and greens.
	stageColors = map[stage.Stage]color.RGBA{
		stage.Read:    {R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
		stage.Stats:   {R: 0xbc, G: 0xbd, B: 0x22, A: 0xff},
		stage.H2D:     {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
		stage.Kernels: {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
		stage.Segment: {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
		stage.D2H:     {R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
		stage.Write:   {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	}
	otherStageColor = color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}
)

func stageColor(stage stage.Stage) color.RGBA {
	if c, ok := stageColors[stage]; ok {
		return c
	}
	return otherStageColor
}

// newPlot returns a plot whose texts use chartFont, with readable numeric ticks.
func newPlot() *plot.Plot {
	p := plot.New()
	p.X.Tick.Marker, p.Y.Tick.Marker = niceTicks{}, niceTicks{}
	p.Title.TextStyle.Font = font.From(chartFont, 13)
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Label.TextStyle.Font = font.From(chartFont, 12)
		ax.Tick.Label.Font = font.From(chartFont, 11)
	}
	p.Legend.TextStyle.Font = font.From(chartFont, 11)
	return p
}

// renderSVG draws p into an SVG element for inlining in HTML (no XML prolog).
func renderSVG(p *plot.Plot, w, h vg.Length) (string, error) {
	c := vgsvg.New(w, h)
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("render svg: %w", err)
	}
	s := buf.String()
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:]
	}
	return s, nil
}

// latencyBarsChart: p50 latency per stage, A and B side by side.
func latencyBarsChart(r *Report, w, h vg.Length) (string, error) {
	var stages []string
	var valsA, valsB plotter.Values
	for _, row := range r.Rows {
		if row.Stage == EndToEnd || row.Stage == Service { // whole-volume times; they would dwarf the stages
			continue
		}
		stages = append(stages, string(row.Stage))
		valsA = append(valsA, p50OrZero(row.A))
		valsB = append(valsB, p50OrZero(row.B))
	}
	p := newPlot()
	p.Y.Label.Text = "p50 latency per volume (ms)"
	p.Y.Min = 0
	if len(stages) == 0 {
		return renderSVG(p, w, h)
	}
	barWidth := min(vg.Points(28), (w-vg.Points(80))/vg.Length(len(stages))*0.35)
	for i, side := range []struct {
		label string
		vals  plotter.Values
		clr   color.Color
	}{{"A (run)", valsA, colorA}, {"B (baseline)", valsB, colorB}} {
		bars, err := plotter.NewBarChart(side.vals, barWidth)
		if err != nil {
			return "", fmt.Errorf("latency bars: %w", err)
		}
		bars.Color = side.clr
		bars.LineStyle.Width = 0
		bars.Offset = barWidth * vg.Length(float64(i)-0.5)
		p.Add(bars)
		p.Legend.Add(side.label, bars)
	}
	p.Legend.Top = true
	p.Legend.XOffs = -vg.Points(6)
	p.Y.Max = 1.15 * max(slices.Max(valsA), slices.Max(valsB)) // headroom for the legend
	p.NominalX(stages...)
	p.X.Min, p.X.Max = -0.5, float64(len(stages))-0.5 // room for the outer bars of each group
	p.Add(horizontalGrid())
	return renderSVG(p, w, h)
}

func p50OrZero(st *Stats) float64 {
	if st == nil {
		return 0
	}
	return st.P50
}

func horizontalGrid() *plotter.Grid {
	g := plotter.NewGrid()
	g.Vertical.Width = 0
	g.Horizontal.Color = color.Gray{Y: 0xdd}
	return g
}

// cdfChart: empirical CDF of turnaround (end_to_end) latency per volume, A and B, solid; and
// of service latency, dashed, for a side where queue_ms makes it differ.
func cdfChart(r *Report, w, h vg.Length) (string, error) {
	p := newPlot()
	p.X.Label.Text = "latency per volume (ms)"
	p.Y.Label.Text = "fraction of volumes ≤ x"
	p.Y.Min, p.Y.Max = 0, 1.05 // the top step stays off the frame
	p.Add(horizontalGrid())
	type curve struct {
		label   string
		samples []sample
		clr     color.Color
		dashed  bool
	}
	curves := []curve{{"A turnaround", r.latenciesA[EndToEnd], colorA, false}, {"B turnaround", r.latenciesB[EndToEnd], colorB, false}}
	if r.A.waited() {
		curves = append(curves, curve{"A service", r.latenciesA[Service], colorA, true})
	}
	if r.B.waited() {
		curves = append(curves, curve{"B service", r.latenciesB[Service], colorB, true})
	}
	for _, side := range curves {
		if len(side.samples) == 0 {
			continue
		}
		sorted := sortedCopy(values(side.samples))
		n := float64(len(sorted))
		// A staircase: F(x) jumps by 1/n at each volume's latency.
		var steps, points plotter.XYs
		steps = append(steps, plotter.XY{X: sorted[0], Y: 0})
		for i, x := range sorted {
			steps = append(steps, plotter.XY{X: x, Y: float64(i) / n}, plotter.XY{X: x, Y: float64(i+1) / n})
			if i+1 < len(sorted) {
				steps = append(steps, plotter.XY{X: sorted[i+1], Y: float64(i+1) / n})
			}
			points = append(points, plotter.XY{X: x, Y: float64(i+1) / n})
		}
		line, err := plotter.NewLine(steps)
		if err != nil {
			return "", fmt.Errorf("cdf: %w", err)
		}
		line.Color, line.Width = side.clr, vg.Points(2)
		dots, err := plotter.NewScatter(points)
		if err != nil {
			return "", fmt.Errorf("cdf: %w", err)
		}
		dots.Color, dots.Shape, dots.Radius = side.clr, draw.CircleGlyph{}, vg.Points(3)
		if side.dashed {
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			dots.Shape = draw.RingGlyph{}
		}
		p.Add(line, dots)
		p.Legend.Add(side.label, line, dots)
	}
	// Pad the latency range so that the first and last volumes' dots are off the axes.
	pad := 0.05 * (p.X.Max - p.X.Min)
	p.X.Min, p.X.Max = p.X.Min-pad, p.X.Max+pad
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(6), vg.Points(6)
	return renderSVG(p, w, h)
}

// timelineChart: a Gantt chart of one volume, one row per stage and one bar per event (slab),
// so that copies overlapping compute show as bars overlapping in time.
func timelineChart(tl *Timeline, w, h vg.Length) (string, error) {
	p := newPlot()
	p.X.Label.Text = "ms since the volume's first event"
	p.X.Min = 0
	rows := slices.Clone(tl.Stages)
	slices.Reverse(rows) // first stage on top
	rowOf := map[stage.Stage]float64{}
	names := make([]string, len(rows))
	for i, s := range rows {
		rowOf[s] = float64(i)
		names[i] = string(s)
	}
	g := plotter.NewGrid()
	g.Horizontal.Width = 0
	g.Vertical.Color = color.Gray{Y: 0xdd}
	p.Add(g)
	bars := &ganttBars{labelStyle: draw.TextStyle{
		Color:   color.White,
		Font:    font.From(chartFont, 10),
		XAlign:  draw.XCenter,
		YAlign:  draw.YCenter,
		Handler: p.TextHandler,
	}}
	for _, b := range tl.Bars {
		label := ""
		if b.Slab >= 0 {
			label = "s" + strconv.Itoa(b.Slab)
		}
		bars.bars = append(bars.bars, ganttBar{row: rowOf[b.Stage], start: b.StartMS, end: b.EndMS, label: label, color: stageColor(b.Stage)})
	}
	p.Add(bars)
	p.NominalY(names...)
	p.Y.Padding = 0
	return renderSVG(p, w, h)
}

// ganttBars is a gonum/plot Plotter that draws horizontal bars between start and end on
// nominal rows.
type ganttBars struct {
	bars       []ganttBar
	labelStyle draw.TextStyle
}

type ganttBar struct {
	row, start, end float64
	label           string
	color           color.RGBA
}

const (
	ganttBarHeight   = 0.6 // in rows
	minGanttBarWidth = vg.Length(1.5)
)

func (g *ganttBars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	outline := draw.LineStyle{Color: color.White, Width: vg.Points(1)}
	for _, b := range g.bars {
		x0, x1 := trX(b.start), trX(b.end)
		if x1-x0 < minGanttBarWidth { // keep sub-pixel events visible
			x1 = x0 + minGanttBarWidth
		}
		y0, y1 := trY(b.row-ganttBarHeight/2), trY(b.row+ganttBarHeight/2)
		rect := []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}
		fill := b.color
		fill.A = 0xdd // overlapping bars of one row stay distinguishable
		c.FillPolygon(fill, c.ClipPolygonXY(rect))
		if x1-x0 > 3*outline.Width { // an outline would hide a narrow bar
			c.StrokeLines(outline, c.ClipLinesXY(append(rect, rect[0]))...)
		}
		if b.label != "" && g.labelStyle.Width(b.label)+vg.Points(4) < x1-x0 {
			c.FillText(g.labelStyle, vg.Point{X: (x0 + x1) / 2, Y: (y0 + y1) / 2}, b.label)
		}
	}
}

// DataRange makes the plot fit every bar.
func (g *ganttBars) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	ymin, ymax = math.Inf(1), math.Inf(-1)
	for _, b := range g.bars {
		xmin, xmax = min(xmin, b.start), max(xmax, b.end)
		ymin, ymax = min(ymin, b.row-0.5), max(ymax, b.row+0.5)
	}
	return xmin, xmax, ymin, ymax
}

// niceTicks labels an axis at 1, 2 or 5 times a power of ten, about six labels per axis, with
// unlabelled minor ticks between; gonum's DefaultTicks often labels only two or three.
type niceTicks struct{}

func (niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', 6, 64)}}
	}
	raw := (hi - lo) / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag * 10
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	decimals := max(0, -int(math.Floor(math.Log10(step)+1e-9)))
	var ticks []plot.Tick
	for i := math.Ceil(lo / step * 2); i/2*step <= hi+step*1e-9; i++ {
		v := i / 2 * step
		label := ""
		if math.Mod(i, 2) == 0 {
			label = strconv.FormatFloat(v, 'f', decimals, 64)
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
	}
	return ticks
}
