package bench

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// line is one engine's curve on a line chart. A floor is drawn as a dashed
// grey line, apart from the competitors' colours.
type line struct {
	name  string
	xys   plotter.XYs
	floor bool
}

// lineChart describes one chart of a figure.
type lineChart struct {
	title, xlabel, ylabel string
	lines                 []line
	// logX and logY force a log axis; otherwise an axis is logarithmic
	// when its values span more than a decade.
	logX, logY bool
	// fromZero starts a linear y axis at zero.
	fromZero bool
}

// spansDecades reports whether the positive values of an axis span more
// than a factor of ten (and none is zero or negative, which a log axis
// cannot show).
func spansDecades(lines []line, coord func(plotter.XY) float64) bool {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, l := range lines {
		for _, p := range l.xys {
			v := coord(p)
			if v <= 0 {
				return false
			}
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	return hi > 10*lo
}

// logTicks labels the powers of ten of a log axis compactly (1k, 10M) and
// marks 2x and 5x between them.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for p := math.Floor(math.Log10(lo)); p <= math.Ceil(math.Log10(hi)); p++ {
		base := math.Pow(10, p)
		for _, m := range []float64{1, 2, 5} {
			v := base * m
			if v < lo/1.0001 || v > hi*1.0001 {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || hi/lo < 100 {
				t.Label = compact(v)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// compactTicks labels a linear axis' default ticks compactly.
type compactTicks struct{}

func (compactTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = compact(ticks[i].Value)
		}
	}
	return ticks
}

func (c *lineChart) plot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = c.title
	p.X.Label.Text = c.xlabel
	p.Y.Label.Text = c.ylabel
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	logX := c.logX || spansDecades(c.lines, func(p plotter.XY) float64 { return p.X })
	logY := c.logY || spansDecades(c.lines, func(p plotter.XY) float64 { return p.Y })
	if logX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, logTicks{}
		p.X.Label.Text += " (log scale)"
	} else {
		p.X.Tick.Marker = compactTicks{}
	}
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{}
		p.Y.Label.Text += " (log scale)"
	} else {
		p.Y.Tick.Marker = compactTicks{}
	}
	n := 0
	for _, l := range c.lines {
		if len(l.xys) == 0 {
			continue
		}
		ln, pts, err := plotter.NewLinePoints(l.xys)
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", l.name, err)
		}
		if l.floor {
			ln.Color = color.Gray{Y: 90}
			ln.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			pts.Color = ln.Color
			pts.Shape = draw.CrossGlyph{}
			p.Legend.Add(l.name+" (in memory)", ln)
		} else {
			ln.Color = plotutil.Color(n)
			pts.Color = ln.Color
			pts.Shape = plotutil.Shape(n)
			p.Legend.Add(l.name, ln, pts)
			n++
		}
		ln.Width = vg.Points(1.5)
		p.Add(ln, pts)
	}
	if !logY && c.fromZero {
		p.Y.Min = 0
	}
	// Room for the legend above the curves.
	if logY {
		p.Y.Max *= 3
	} else {
		p.Y.Max += (p.Y.Max - p.Y.Min) * 0.35
	}
	return p, nil
}

// writeCharts draws charts stacked in one SVG image.
func writeCharts(w io.Writer, charts []lineChart) error {
	if len(charts) == 0 {
		return fmt.Errorf("bench: no charts to draw")
	}
	row := make([][]*plot.Plot, len(charts))
	for i := range charts {
		p, err := charts[i].plot()
		if err != nil {
			return err
		}
		row[i] = []*plot.Plot{p}
	}
	c := vgsvg.New(9*vg.Inch, vg.Length(len(charts))*4.5*vg.Inch)
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: len(charts), Cols: 1, PadTop: vg.Points(10), PadBottom: vg.Points(10),
		PadLeft: vg.Points(10), PadRight: vg.Points(10), PadY: vg.Points(30)}
	cs := plot.Align(row, tiles, dc)
	for i := range row {
		row[i][0].Draw(cs[i][0])
	}
	_, err := c.WriteTo(w)
	return err
}

// WriteSVG draws the sweep: points/s, bytes on disk per point and peak RSS
// against the size (on a log axis: the sizes grow tenfold), one line per
// engine, the floor dashed.
func (rep *ScaleReport) WriteSVG(w io.Writer) error {
	xlabel, xval := "points inserted (1,000 series)", func(r *ScaleResult) float64 { return float64(r.Points) }
	if rep.Kind == ScaleSeries {
		xlabel, xval = "series (10 points each, 3 at 1M)", func(r *ScaleResult) float64 { return float64(r.Devices) }
	}
	var order []string
	byEngine := map[string][]*ScaleResult{}
	for i := range rep.Results {
		r := &rep.Results[i]
		if r.Status != ScaleOK {
			continue
		}
		if _, ok := byEngine[r.Engine]; !ok {
			order = append(order, r.Engine)
		}
		byEngine[r.Engine] = append(byEngine[r.Engine], r)
	}
	mk := func(y func(*ScaleResult) float64, floors bool) []line {
		var ls []line
		for _, eng := range order {
			if IsFloor(eng) && !floors {
				continue
			}
			l := line{name: eng, floor: IsFloor(eng)}
			for _, r := range byEngine[eng] {
				l.xys = append(l.xys, plotter.XY{X: xval(r), Y: y(r)})
			}
			ls = append(ls, l)
		}
		return ls
	}
	mode := fmt.Sprintf("%s/%s", rep.Config, rep.Durability)
	return writeCharts(w, []lineChart{
		{title: "Insert throughput vs " + string(rep.Kind) + ", higher is better (" + mode + ")",
			xlabel: xlabel, ylabel: "points/s", lines: mk(func(r *ScaleResult) float64 { return r.PointsPerSec }, true), fromZero: true, logX: true},
		{title: "Bytes on disk per point after close, lower is better (the floor writes none)",
			xlabel: xlabel, ylabel: "bytes/point", lines: mk(func(r *ScaleResult) float64 { return r.BytesPerPoint }, false), fromZero: true, logX: true},
		{title: "Peak resident memory of the engine's process, lower is better",
			xlabel: xlabel, ylabel: "peak RSS (MiB)", lines: mk(func(r *ScaleResult) float64 { return float64(r.PeakRSSBytes) / (1 << 20) }, true), fromZero: true, logX: true},
	})
}
