package bench

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// WriteSVG draws two grouped bar charts, insert throughput and bytes on disk
// per point, with one group per configuration/durability and one bar (and
// legend entry) per engine, and writes them as one SVG image. The floor is
// a dashed line across the throughput chart, not a bar; an axis whose
// values span more than a decade is logarithmic.
func (rep *Report) WriteSVG(w io.Writer) error {
	var modes, engines []string
	for _, r := range rep.Results {
		if m := r.Mode(); !slices.Contains(modes, m) {
			modes = append(modes, m)
		}
		if !slices.Contains(engines, r.Engine) && !IsFloor(r.Engine) {
			engines = append(engines, r.Engine)
		}
	}
	if len(modes) == 0 {
		return fmt.Errorf("bench: no results to draw")
	}
	d := rep.Dataset
	what := fmt.Sprintf("%s points, %s, batches of %s", thousands(float64(d.Points)), d.Shape, thousands(float64(d.Batch)))
	speed, err := rep.barPlot("Insert throughput, higher is better ("+what+")", "points/s", modes, engines,
		func(r *Result) float64 { return r.PointsPerSec }, compact, true)
	if err != nil {
		return err
	}
	size, err := rep.barPlot("Bytes on disk per point after close, lower is better", "bytes/point", modes, engines,
		func(r *Result) float64 { return r.BytesPerPoint }, func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }, false)
	if err != nil {
		return err
	}
	c := vgsvg.New(9*vg.Inch, 10*vg.Inch)
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(10), PadBottom: vg.Points(10),
		PadLeft: vg.Points(10), PadRight: vg.Points(10), PadY: vg.Points(30)}
	cs := plot.Align([][]*plot.Plot{{speed}, {size}}, tiles, dc)
	speed.Draw(cs[0][0])
	size.Draw(cs[1][0])
	_, err = c.WriteTo(w)
	return err
}

func (rep *Report) barPlot(title, ylabel string, modes, engines []string, value func(*Result) float64, label func(float64) string, floor bool) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.X.Label.Text = "configuration / durability"
	p.NominalX(modes...)
	p.Legend.Top = true
	p.Legend.Left = false
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil
	p.Add(grid)

	lo, hi := math.Inf(1), 0.0
	for _, r := range rep.Results {
		if v := value(&r); !IsFloor(r.Engine) || floor {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	// A log axis when the bars span more than a decade: each bar then
	// rises from the axis' bottom, an invisible bar it is stacked on.
	logY := lo > 0 && hi > 10*lo
	base := 0.0
	if logY {
		base = math.Pow(10, math.Floor(math.Log10(lo)))
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{}
		p.Y.Label.Text += " (log scale)"
	} else {
		p.Y.Tick.Marker = compactTicks{}
	}

	width := vg.Points(float64(min(28, 360/(len(engines)*len(modes)))))
	for i, eng := range engines {
		vals := make(plotter.Values, len(modes))
		bottom := make(plotter.Values, len(modes))
		xys := make(plotter.XYs, len(modes))
		labels := make([]string, len(modes))
		for m := range modes {
			bottom[m] = base
			xys[m] = plotter.XY{X: float64(m), Y: base}
		}
		for _, r := range rep.Results {
			if r.Engine == eng {
				m := slices.Index(modes, r.Mode())
				v := value(&r)
				vals[m] = max(v-base, 0)
				xys[m].Y = max(v, base)
				labels[m] = label(v)
			}
		}
		offset := width * vg.Length(float64(i)-float64(len(engines)-1)/2)
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		if logY {
			under, err := plotter.NewBarChart(bottom, width)
			if err != nil {
				return nil, err
			}
			under.Color, under.LineStyle.Width, under.Offset = nil, 0, offset
			bars.StackOn(under)
		}
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		bars.Offset = offset
		p.Add(bars)
		p.Legend.Add(eng, bars)

		lab, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
		if err != nil {
			return nil, err
		}
		for k := range lab.TextStyle {
			lab.TextStyle[k].Font.Size = vg.Points(7)
			lab.TextStyle[k].XAlign = text.XCenter
		}
		lab.Offset = vg.Point{X: bars.Offset, Y: vg.Points(2)}
		p.Add(lab)
	}
	if floor {
		for _, r := range rep.Results {
			if !IsFloor(r.Engine) {
				continue
			}
			v := value(&r)
			fl, err := plotter.NewLine(plotter.XYs{{X: -0.75, Y: v}, {X: float64(len(modes)) - 0.25, Y: v}})
			if err != nil {
				return nil, err
			}
			fl.Color = color.Gray{Y: 90}
			fl.Width = vg.Points(1.5)
			fl.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			p.Add(fl)
			p.Legend.Add(fmt.Sprintf("%s (in memory, %s)", r.Engine, label(v)), fl)
			break
		}
	}
	// Room above the bars for the legend, and beside the outer groups for
	// their labels.
	if logY {
		p.Y.Min, p.Y.Max = base, math.Pow(10, math.Ceil(math.Log10(hi)+0.7))
	} else {
		p.Y.Min, p.Y.Max = 0, max(hi, 1)*1.4
	}
	p.X.Min, p.X.Max = -0.75, float64(len(modes))-0.25
	return p, nil
}

// compact formats a figure in three significant digits or fewer, with a
// unit suffix and no trailing zeros: 950, 81.2k, 1.25M, 10M.
func compact(v float64) string {
	unit, div := "", 1.0
	switch {
	case v >= 1e9:
		unit, div = "G", 1e9
	case v >= 1e6:
		unit, div = "M", 1e6
	case v >= 1e3:
		unit, div = "k", 1e3
	}
	x := v / div
	dec := 0
	switch {
	case x < 10:
		dec = 2
	case x < 100:
		dec = 1
	}
	s := strconv.FormatFloat(x, 'f', dec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s + unit
}
