package compaction

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/vfs"
	"github.com/stratadb/strata/segment"
)

// reduce folds samples into buckets of every, the reference.
func reduce(samples []point.Sample, every int64) []segment.Rollup {
	var out []segment.Rollup
	for _, s := range samples {
		start := point.FloorTime(s.Time, every)
		if n := len(out); n == 0 || out[n-1].Start != start {
			out = append(out, segment.Rollup{Start: start, Every: every})
		}
		FoldSample(&out[len(out)-1], s)
	}
	return out
}

func readRollups(t *testing.T, fs vfs.FS, metas []segment.Meta) (map[string][]segment.Rollup, model) {
	t.Helper()
	rus := map[string][]segment.Rollup{}
	raw := model{}
	for _, m := range metas {
		r, err := segment.Open(fs, m.Path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for i := range r.NumSeries() {
			si := r.Series(i)
			for b := range si.Rollups {
				got, err := r.ReadRollups(si, b, nil)
				if err != nil {
					t.Fatal(err)
				}
				rus[string(si.Key)] = append(rus[string(si.Key)], got...)
			}
			ss, err := r.AppendRange(si, math.MinInt64, math.MaxInt64, nil)
			if err != nil {
				t.Fatal(err)
			}
			raw[string(si.Key)] = ss
		}
	}
	return rus, raw
}

func sameBuckets(t *testing.T, what string, got, want []segment.Rollup) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d buckets, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Start != w.Start || g.Every != w.Every || g.Count != w.Count || g.SumF.Float64() != w.SumF.Float64() || g.SumI != w.SumI ||
			g.First != w.First || g.Last != w.Last || g.Min != w.Min || g.Max != w.Max ||
			g.FirstT != w.FirstT || g.LastT != w.LastT || g.MinT != w.MinT || g.MaxT != w.MaxT {
			t.Fatalf("%s: bucket %d:\n got %+v\nwant %+v", what, i, g, w)
		}
	}
}

// TestMergeRollups: a merge rolls up samples below the finest level's
// bound, cascades older buckets (its own and the inputs') into the coarser
// level, adds the buckets two inputs hold for one start, drops buckets a
// Drop range or MinTime covers, and keeps the rest raw, with a bool series
// untouched.
func TestMergeRollups(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/db", 0o755); err != nil {
		t.Fatal(err)
	}
	const m = int64(60)
	var all []point.Sample
	for ts := int64(0); ts < 200*m; ts += 7 {
		all = append(all, point.Sample{Time: ts, Value: point.Float(float64(ts%13) - 6.5)})
	}
	half := func(odd bool) []point.Sample {
		var out []point.Sample
		for i, s := range all {
			if (i%2 == 1) == odd {
				out = append(out, s)
			}
		}
		return out
	}
	// First merge: each input alone rolls up below 100m, so each holds 1m
	// buckets of half the samples.
	levels := []RollupLevel{{Every: m, Before: 100 * m}, {Every: 10 * m, Before: 20 * m}}
	o := &outputs{fs: fs, dir: "/db", blockSamples: 16}
	var firsts []*segment.Reader
	for i, odd := range []bool{false, true} {
		in := writeSeg(t, fs, filepath.Join("/db", []string{"a.seg", "b.seg"}[i]), 16, []tseries{
			{key: "f", kind: point.KindFloat, samples: half(odd)},
			{key: "g", kind: point.KindBool, samples: []point.Sample{{Time: 180 * m, Value: point.Bool(odd)}}},
		})
		opts := o.mergeOpts()
		opts.Rollup = func(key []byte, kind point.Kind) []RollupLevel {
			if kind == point.KindBool {
				t.Fatalf("Rollup asked about a bool series")
			}
			return levels
		}
		metas, st, err := Merge(context.Background(), []Input{{Reader: in}}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if st.SamplesRolledUp == 0 || st.RollupsOut == 0 {
			t.Fatalf("stats %+v", st)
		}
		r, err := segment.Open(fs, metas[0].Path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		firsts = append(firsts, r)
	}
	// Second merge of both, later: 1m below 150m, 10m below 100m, and a
	// drop range over the buckets starting in [30m, 39m], MinTime 5m.
	levels = []RollupLevel{{Every: m, Before: 150 * m}, {Every: 10 * m, Before: 100 * m}}
	opts := o.mergeOpts()
	opts.MinTime = 5 * m
	opts.Rollup = func([]byte, point.Kind) []RollupLevel { return levels }
	metas, st, err := Merge(context.Background(), []Input{
		{Reader: firsts[0]},
		{Reader: firsts[1], Drop: func([]byte) []TimeRange { return []TimeRange{{Min: 30 * m, Max: 39 * m}} }},
	}, opts)
	if err != nil {
		t.Fatal(err)
	}
	// The 1m buckets of [20m, 100m) cascade into 10m ones: 80 of input 0,
	// 70 of input 1 (its ten in [30m, 39m] are dropped first).
	if st.RollupsCascaded != 150 {
		t.Fatalf("%d buckets cascaded, want 150", st.RollupsCascaded)
	}
	rus, raw := readRollups(t, fs, metas)
	// The reference: buckets start at or after 5m (first merge: 10m
	// buckets from 0 below 20m, so the one at 0 is dropped whole); input
	// 1's buckets starting in [30m, 39m] are gone before they merge.
	var kept []point.Sample
	for _, s := range all {
		odd := (s.Time/7)%2 == 1
		switch {
		case s.Time < 10*m: // the first merge's 10m bucket at 0: before MinTime
		case odd && s.Time >= 30*m && s.Time < 40*m && s.Time < 100*m:
			// In input 1's dropped 1m buckets (now inside 10m ones).
		default:
			kept = append(kept, s)
		}
	}
	var want []segment.Rollup
	var below, mid, above []point.Sample
	for _, s := range kept {
		switch {
		case s.Time < 100*m:
			below = append(below, s)
		case s.Time < 150*m:
			mid = append(mid, s)
		default:
			above = append(above, s)
		}
	}
	// Buckets merged from parts hold the same statistics as folding in
	// time order, except that equal min (max) values keep the earliest.
	want = append(reduce(below, 10*m), reduce(mid, m)...)
	sameBuckets(t, "f", rus["f"], want)
	if !samplesEqual(raw["f"], above) {
		t.Fatalf("raw samples of f: %s, want %s", fmtSamples(raw["f"]), fmtSamples(above))
	}
	if len(rus["g"]) != 0 || len(raw["g"]) != 1 {
		t.Fatalf("bool series: %d buckets, %d samples", len(rus["g"]), len(raw["g"]))
	}
}
