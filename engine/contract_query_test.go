package engine_test

import (
	"context"
	"math"
	"testing"

	"github.com/stratadb/strata/engine"
)

// "All time" includes every timestamp, MaxInt64 too; a half-open range
// cannot select MaxInt64.
func TestContractTimeRangeExtremes(t *testing.T) {
	ts := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64}
	var pts []engine.Point
	for i, x := range ts {
		pts = append(pts, cp("m", "f", engine.Int(int64(i)), x))
	}
	inStates(t, nil, []cStep{cWrite(pts...)}, func(t *testing.T, db *engine.DB) {
		all := "m f: -9223372036854775808=int(0) -9223372036854775807=int(1) -1=int(2) 0=int(3) 1=int(4) 9223372036854775806=int(5) 9223372036854775807=int(6)\n"
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}}, all)
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m", Start: math.MinInt64, End: math.MaxInt64}},
			"m f: -9223372036854775808=int(0) -9223372036854775807=int(1) -1=int(2) 0=int(3) 1=int(4) 9223372036854775806=int(5)\n")
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m", Start: math.MaxInt64 - 1, End: math.MaxInt64}},
			"m f: 9223372036854775806=int(5)\n")
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m", Start: -1, End: 1}},
			"m f: -1=int(2) 0=int(3)\n")
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m", Start: 0, End: 1}},
			"m f: 0=int(3)\n")
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m", Start: math.MinInt64, End: math.MinInt64 + 1}},
			"m f: -9223372036854775808=int(0)\n")
		// Count over all time: one bucket, time Start (0 for all time).
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}, Agg: engine.AggCount}, "m f: 0=int(7)\n")
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m", Start: math.MinInt64, End: math.MaxInt64}, Agg: engine.AggCount},
			"m f: -9223372036854775808=int(6)\n")
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}, Agg: engine.AggLast}, "m f: 9223372036854775807=int(6)\n")
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}, Agg: engine.AggFirst}, "m f: -9223372036854775808=int(0)\n")
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}, Agg: engine.AggMax}, "m f: 9223372036854775807=int(6)\n")
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}, Agg: engine.AggMin}, "m f: -9223372036854775808=int(0)\n")
		// Last over all time sees MaxInt64; over a half-open range it cannot.
		got := cFmt(cLast(t, db, engine.Selector{Measurement: "m"}))
		if want := "m f: 9223372036854775807=int(6)\n"; got != want {
			t.Errorf("Last all time = %q, want %q", got, want)
		}
		got = cFmt(cLast(t, db, engine.Selector{Measurement: "m", Start: math.MinInt64, End: math.MaxInt64}))
		if want := "m f: 9223372036854775806=int(5)\n"; got != want {
			t.Errorf("Last [min,max) = %q, want %q", got, want)
		}
	})
}

func cLast(t *testing.T, db *engine.DB, s engine.Selector) []engine.Series {
	t.Helper()
	res, err := db.Last(context.Background(), s)
	if err != nil {
		t.Fatalf("last %+v: %v", s, err)
	}
	return res
}

func TestContractInvalidQueries(t *testing.T) {
	ctx := context.Background()
	db, err := engine.Open(t.TempDir(), cOpts(0))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Write([]engine.Point{cp("m", "f", engine.Float(1), 10, "k=v")}); err != nil {
		t.Fatal(err)
	}
	bad := map[string]engine.Query{
		"empty measurement":     {},
		"empty measurement agg": {Agg: engine.AggCount},
		"start == end":          {Selector: engine.Selector{Measurement: "m", Start: 5, End: 5}},
		"start > end":           {Selector: engine.Selector{Measurement: "m", Start: 6, End: 5}},
		"start 0 end -1":        {Selector: engine.Selector{Measurement: "m", Start: 0, End: -1}},
		"start -1 end -1":       {Selector: engine.Selector{Measurement: "m", Start: -1, End: -1}},
		"max max":               {Selector: engine.Selector{Measurement: "m", Start: math.MaxInt64, End: math.MaxInt64}},
		"min min":               {Selector: engine.Selector{Measurement: "m", Start: math.MinInt64, End: math.MinInt64}},
		"negative every":        {Selector: engine.Selector{Measurement: "m"}, Agg: engine.AggMean, Every: -1},
		"unknown agg":           {Selector: engine.Selector{Measurement: "m"}, Agg: engine.Aggregate(200)},
		"group by nil-agg":      {Selector: engine.Selector{Measurement: "m"}, GroupBy: []string{"k"}},
		"group by empty, none":  {Selector: engine.Selector{Measurement: "m"}, GroupBy: []string{}},
		"invalid regexp":        {Selector: engine.Selector{Measurement: "m", Matchers: []engine.Matcher{{Key: "k", Op: engine.MatchRegexp, Value: "("}}}},
		"invalid not regexp":    {Selector: engine.Selector{Measurement: "m", Matchers: []engine.Matcher{{Key: "k", Op: engine.MatchNotRegexp, Value: "a["}}}},
		"invalid regexp, agg":   {Selector: engine.Selector{Measurement: "m", Matchers: []engine.Matcher{{Key: "k", Op: engine.MatchRegexp, Value: "*"}}}, Agg: engine.AggCount},
		"unknown match op":      {Selector: engine.Selector{Measurement: "m", Matchers: []engine.Matcher{{Key: "k", Op: engine.MatchOp(9), Value: "v"}}}},
	}
	for name, q := range bad {
		_, err := db.Query(ctx, q)
		cWantErr(t, "query "+name, err, engine.ErrInvalid)
		if q.GroupBy == nil && q.Agg == engine.AggNone && q.Every == 0 {
			cWantErr(t, "delete "+name, db.Delete(ctx, q.Selector), engine.ErrInvalid)
			if q.Measurement != "" {
				_, err = db.Last(ctx, q.Selector)
				cWantErr(t, "last "+name, err, engine.ErrInvalid)
				_, err = db.SeriesInfo(ctx, q.Selector)
				cWantErr(t, "series info "+name, err, engine.ErrInvalid)
				_, err = db.TagKeys(ctx, q.Selector)
				cWantErr(t, "tag keys "+name, err, engine.ErrInvalid)
				_, err = db.TagValues(ctx, "k", q.Selector)
				cWantErr(t, "tag values "+name, err, engine.ErrInvalid)
			}
		}
	}
	// Nothing was deleted by the invalid deletes.
	cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}}, "m,k=v f: 10=float(1)\n")
	// Start == End == 0 with Every > 0 is valid (buckets over all time).
	cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}, Agg: engine.AggCount, Every: 7}, "m,k=v f: 7=int(1)\n")
}
