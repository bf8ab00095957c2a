package bench

import (
	"fmt"
	"io"
	"slices"
	"strconv"

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
// legend entry) per engine, and writes them as one SVG image.
func (rep *Report) WriteSVG(w io.Writer) error {
	var modes, engines []string
	for _, r := range rep.Results {
		if m := r.Mode(); !slices.Contains(modes, m) {
			modes = append(modes, m)
		}
		if !slices.Contains(engines, r.Engine) {
			engines = append(engines, r.Engine)
		}
	}
	if len(modes) == 0 {
		return fmt.Errorf("bench: no results to draw")
	}
	d := rep.Dataset
	what := fmt.Sprintf("%s points, %s, batches of %s", thousands(float64(d.Points)), d.Shape, thousands(float64(d.Batch)))
	speed, err := rep.barPlot("Insert throughput, higher is better ("+what+")", "points/s", modes, engines,
		func(r *Result) float64 { return r.PointsPerSec }, compact)
	if err != nil {
		return err
	}
	size, err := rep.barPlot("Bytes on disk per point after close, lower is better", "bytes/point", modes, engines,
		func(r *Result) float64 { return r.BytesPerPoint }, func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) })
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

func (rep *Report) barPlot(title, ylabel string, modes, engines []string, value func(*Result) float64, label func(float64) string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.X.Label.Text = "configuration / durability"
	p.Y.Min = 0
	p.Y.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		ticks := plot.DefaultTicks{}.Ticks(lo, hi)
		for i := range ticks {
			if ticks[i].Label != "" {
				ticks[i].Label = compact(ticks[i].Value)
			}
		}
		return ticks
	})
	p.NominalX(modes...)
	p.Legend.Top = true
	p.Legend.Left = false
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil
	p.Add(grid)

	width := vg.Points(float64(min(28, 360/(len(engines)*len(modes)))))
	top := 0.0
	for i, eng := range engines {
		vals := make(plotter.Values, len(modes))
		xys := make(plotter.XYs, len(modes))
		labels := make([]string, len(modes))
		for _, r := range rep.Results {
			if r.Engine == eng {
				m := slices.Index(modes, r.Mode())
				vals[m] = value(&r)
				top = max(top, vals[m])
				xys[m] = plotter.XY{X: float64(m), Y: vals[m]}
				labels[m] = label(vals[m])
			}
		}
		for m := range xys {
			xys[m].X = float64(m)
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		bars.Offset = width * vg.Length(float64(i)-float64(len(engines)-1)/2)
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
	// Room above the bars for the legend, and beside the outer groups for
	// their labels.
	p.Y.Max = max(top, 1) * 1.4
	p.X.Min, p.X.Max = -0.75, float64(len(modes))-0.25
	return p, nil
}

// compact formats a figure in at most four significant characters: 950,
// 81.2k, 1.25M.
func compact(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + "M"
	case v >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', 0, 64) + "k"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + "k"
	case v == float64(int64(v)):
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
