package bench

import (
	"testing"

	"gonum.org/v1/plot/plotter"
)

func TestCompact(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", 0.5: "0.5", 950: "950", 1000: "1k", 81234: "81.2k", 469000: "469k",
		1.25e6: "1.25M", 1e7: "10M", 1e8: "100M", 3.384e6: "3.38M", 2.5e9: "2.5G",
	} {
		if got := compact(v); got != want {
			t.Errorf("compact(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestLogAxisChoice(t *testing.T) {
	xy := func(pts ...float64) []line {
		l := line{}
		for _, p := range pts {
			l.xys = append(l.xys, plotter.XY{X: p, Y: p})
		}
		return []line{l}
	}
	y := func(p plotter.XY) float64 { return p.Y }
	for _, c := range []struct {
		pts  []float64
		want bool
	}{{[]float64{1, 5, 9}, false}, {[]float64{1, 11}, true}, {[]float64{0, 100}, false}, {[]float64{1e3, 1e6}, true}} {
		if got := spansDecades(xy(c.pts...), y); got != c.want {
			t.Errorf("spansDecades(%v) = %v", c.pts, got)
		}
	}
	ticks := logTicks{}.Ticks(1e3, 3e6)
	labels := map[string]bool{}
	for _, tk := range ticks {
		if tk.Label != "" {
			labels[tk.Label] = true
		}
	}
	for _, want := range []string{"1k", "10k", "100k", "1M"} {
		if !labels[want] {
			t.Errorf("log ticks lack %q: %v", want, ticks)
		}
	}
}
