package engine_test

import (
	"fmt"
	"testing"

	"github.com/stratadb/strata/engine"
)

// cGroupSteps writes series of field v with mixed kinds and a missing
// site tag, plus a bool field w. Samples arrive out of order.
func cGroupSteps() []cStep {
	return []cStep{
		cWrite(
			cp("cpu", "v", engine.Int(9), 30, "host=a", "site=s1"),
			cp("cpu", "v", engine.Float(7), 30, "host=b", "site=s1"),
			cp("cpu", "v", engine.Int(1), 25, "host=c"),
		),
		cWrite(
			cp("cpu", "v", engine.Int(5), 10, "host=a", "site=s1"),
			cp("cpu", "v", engine.Int(7), 20, "host=a", "site=s1"),
			cp("cpu", "v", engine.Float(2.5), 10, "host=b", "site=s1"),
			cp("cpu", "v", engine.Int(1), 10, "host=c"),
			cp("cpu", "v", engine.Int(7), 20, "host=c"),
			cp("cpu", "v", engine.Uint(3), 15, "host=d", "site=s2"),
			cp("cpu", "w", engine.Bool(true), 10, "host=a", "site=s1"),
			cp("cpu", "w", engine.Bool(false), 12, "host=c"),
		),
	}
}

func TestContractGroupBy(t *testing.T) {
	sel := engine.Selector{Measurement: "cpu"}
	site := []string{"site"}
	cases := []struct {
		name string
		q    engine.Query
		want string
	}{
		{"sum", engine.Query{Selector: sel, Agg: engine.AggSum, GroupBy: site},
			"cpu v: 0=int(9)\ncpu,site=s1 v: 0=float(30.5)\ncpu,site=s2 v: 0=uint(3)\n"},
		{"count", engine.Query{Selector: sel, Agg: engine.AggCount, GroupBy: site},
			"cpu v: 0=int(3)\ncpu w: 0=int(1)\ncpu,site=s1 v: 0=int(5)\ncpu,site=s1 w: 0=int(1)\ncpu,site=s2 v: 0=int(1)\n"},
		{"mean", engine.Query{Selector: sel, Agg: engine.AggMean, GroupBy: site},
			"cpu v: 0=float(3)\ncpu,site=s1 v: 0=float(6.1)\ncpu,site=s2 v: 0=float(3)\n"},
		{"max", engine.Query{Selector: sel, Agg: engine.AggMax, GroupBy: site},
			"cpu v: 20=int(7)\ncpu,site=s1 v: 30=float(9)\ncpu,site=s2 v: 15=uint(3)\n"},
		{"min", engine.Query{Selector: sel, Agg: engine.AggMin, GroupBy: site},
			"cpu v: 10=int(1)\ncpu,site=s1 v: 10=float(2.5)\ncpu,site=s2 v: 15=uint(3)\n"},
		{"first tie by key", engine.Query{Selector: sel, Agg: engine.AggFirst, GroupBy: site},
			"cpu v: 10=int(1)\ncpu w: 12=bool(false)\ncpu,site=s1 v: 10=int(5)\ncpu,site=s1 w: 10=bool(true)\ncpu,site=s2 v: 15=uint(3)\n"},
		{"last tie by key", engine.Query{Selector: sel, Agg: engine.AggLast, GroupBy: site},
			"cpu v: 25=int(1)\ncpu w: 12=bool(false)\ncpu,site=s1 v: 30=int(9)\ncpu,site=s1 w: 10=bool(true)\ncpu,site=s2 v: 15=uint(3)\n"},
		{"sum every: kind per bucket", engine.Query{Selector: sel, Agg: engine.AggSum, Every: 10, GroupBy: site},
			"cpu v: 10=int(1) 20=int(8)\ncpu,site=s1 v: 10=float(7.5) 20=int(7) 30=float(16)\ncpu,site=s2 v: 10=uint(3)\n"},
		{"max every: bucket start", engine.Query{Selector: sel, Agg: engine.AggMax, Every: 10, GroupBy: site},
			"cpu v: 10=int(1) 20=int(7)\ncpu,site=s1 v: 10=float(5) 20=int(7) 30=float(9)\ncpu,site=s2 v: 10=uint(3)\n"},
		{"empty group by: one group per field", engine.Query{Selector: sel, Agg: engine.AggSum, GroupBy: []string{}},
			"cpu v: 0=float(42.5)\n"},
		{"empty group by count", engine.Query{Selector: sel, Agg: engine.AggCount, GroupBy: []string{}},
			"cpu v: 0=int(9)\ncpu w: 0=int(2)\n"},
		{"group by a key nobody has", engine.Query{Selector: sel, Agg: engine.AggLast, GroupBy: []string{"nope"}},
			"cpu v: 30=int(9)\ncpu w: 12=bool(false)\n"},
		{"group by two keys, field v", engine.Query{Selector: engine.Selector{Measurement: "cpu", Field: "v"}, Agg: engine.AggCount, GroupBy: []string{"site", "host"}},
			"cpu,host=a,site=s1 v: 0=int(3)\ncpu,host=b,site=s1 v: 0=int(2)\ncpu,host=c v: 0=int(3)\ncpu,host=d,site=s2 v: 0=int(1)\n"},
		{"group by with a matcher and range", engine.Query{Selector: engine.Selector{Measurement: "cpu", Start: 15, End: 30,
			Matchers: []engine.Matcher{{Key: "host", Op: engine.MatchRegexp, Value: "[ab]"}}}, Agg: engine.AggSum, GroupBy: []string{}},
			"cpu v: 15=int(7)\n"},
		{"group by nil is per series", engine.Query{Selector: engine.Selector{Measurement: "cpu", Field: "v"}, Agg: engine.AggMax},
			"cpu,host=a,site=s1 v: 30=int(9)\ncpu,host=b,site=s1 v: 30=float(7)\ncpu,host=c v: 20=int(7)\ncpu,host=d,site=s2 v: 15=uint(3)\n"},
	}
	inStates(t, nil, cGroupSteps(), func(t *testing.T, db *engine.DB) {
		for _, c := range cases {
			got := cFmt(cQuery(t, db, c.q))
			if got != c.want {
				t.Errorf("%s: %+v\ngot:\n%swant:\n%s", c.name, c.q, got, c.want)
			}
		}
	})
}

// With Every 0, min and max return the earliest sample holding the value;
// count, sum and mean return Start (0 for all time); with Every > 0 every
// aggregate returns its bucket start, flooring for negative times.
func TestContractSelectorTimestamps(t *testing.T) {
	steps := []cStep{
		cWrite(cp("m", "f", engine.Float(4), 50), cp("m", "f", engine.Float(9), 40)),
		cWrite(cp("m", "f", engine.Float(9), 20), cp("m", "f", engine.Float(1), 30), cp("m", "f", engine.Float(1), 35)),
		cWrite(cp("m", "f", engine.Float(2), -1), cp("m", "f", engine.Float(3), -10), cp("m", "f", engine.Float(5), -11)),
	}
	s := engine.Selector{Measurement: "m"}
	r := engine.Selector{Measurement: "m", Start: -15, End: 45}
	cases := []struct {
		q    engine.Query
		want string
	}{
		{engine.Query{Selector: s, Agg: engine.AggMax}, "m f: 20=float(9)\n"},
		{engine.Query{Selector: s, Agg: engine.AggMin}, "m f: 30=float(1)\n"},
		{engine.Query{Selector: s, Agg: engine.AggFirst}, "m f: -11=float(5)\n"},
		{engine.Query{Selector: s, Agg: engine.AggLast}, "m f: 50=float(4)\n"},
		{engine.Query{Selector: s, Agg: engine.AggCount}, "m f: 0=int(8)\n"},
		{engine.Query{Selector: s, Agg: engine.AggSum}, "m f: 0=float(34)\n"},
		{engine.Query{Selector: s, Agg: engine.AggMean}, "m f: 0=float(4.25)\n"},
		{engine.Query{Selector: r, Agg: engine.AggCount}, "m f: -15=int(7)\n"},
		{engine.Query{Selector: r, Agg: engine.AggSum}, "m f: -15=float(30)\n"},
		{engine.Query{Selector: r, Agg: engine.AggMean}, fmt.Sprintf("m f: -15=float(%s)\n", engine.Float(30.0/7))},
		{engine.Query{Selector: r, Agg: engine.AggMax}, "m f: 20=float(9)\n"},
		{engine.Query{Selector: r, Agg: engine.AggLast}, "m f: 40=float(9)\n"},
		{engine.Query{Selector: s, Agg: engine.AggCount, Every: 10}, "m f: -20=int(1) -10=int(2) 20=int(1) 30=int(2) 40=int(1) 50=int(1)\n"},
		{engine.Query{Selector: s, Agg: engine.AggMax, Every: 10}, "m f: -20=float(5) -10=float(3) 20=float(9) 30=float(1) 40=float(9) 50=float(4)\n"},
		{engine.Query{Selector: s, Agg: engine.AggFirst, Every: 10}, "m f: -20=float(5) -10=float(3) 20=float(9) 30=float(1) 40=float(9) 50=float(4)\n"},
		{engine.Query{Selector: s, Agg: engine.AggLast, Every: 10}, "m f: -20=float(5) -10=float(2) 20=float(9) 30=float(1) 40=float(9) 50=float(4)\n"},
		{engine.Query{Selector: r, Agg: engine.AggSum, Every: 25}, "m f: -25=float(10) 0=float(9) 25=float(11)\n"},
		{engine.Query{Selector: s, Agg: engine.AggMean, Every: 7}, "m f: -14=float(4) -7=float(2) 14=float(9) 28=float(1) 35=float(5) 49=float(4)\n"},
	}
	inStates(t, nil, steps, func(t *testing.T, db *engine.DB) {
		for _, c := range cases {
			cWantQuery(t, db, c.q, c.want)
		}
	})
}

// Sum, mean, min and max apply to numbers only: a bool or string series
// yields nothing for them; count, first and last apply to every kind.
func TestContractNonNumericAggregates(t *testing.T) {
	steps := []cStep{cWrite(
		cp("m", "b", engine.Bool(true), 5, "k=1"),
		cp("m", "b", engine.Bool(false), 3, "k=1"),
		cp("m", "s", engine.String("zz"), 5, "k=1"),
		cp("m", "s", engine.String("aa"), 8, "k=1"),
		cp("m", "s", engine.String(""), 9, "k=2"),
	)}
	s := engine.Selector{Measurement: "m"}
	inStates(t, nil, steps, func(t *testing.T, db *engine.DB) {
		for _, agg := range []engine.Aggregate{engine.AggSum, engine.AggMean, engine.AggMin, engine.AggMax} {
			for _, every := range []int64{0, 2} {
				cWantQuery(t, db, engine.Query{Selector: s, Agg: agg, Every: every}, "")
				cWantQuery(t, db, engine.Query{Selector: s, Agg: agg, Every: every, GroupBy: []string{}}, "")
			}
		}
		cWantQuery(t, db, engine.Query{Selector: s, Agg: engine.AggCount}, "m,k=1 b: 0=int(2)\nm,k=1 s: 0=int(2)\nm,k=2 s: 0=int(1)\n")
		cWantQuery(t, db, engine.Query{Selector: s, Agg: engine.AggFirst}, "m,k=1 b: 3=bool(false)\nm,k=1 s: 5=string(zz)\nm,k=2 s: 9=string()\n")
		cWantQuery(t, db, engine.Query{Selector: s, Agg: engine.AggLast}, "m,k=1 b: 5=bool(true)\nm,k=1 s: 8=string(aa)\nm,k=2 s: 9=string()\n")
		cWantQuery(t, db, engine.Query{Selector: s, Agg: engine.AggLast, GroupBy: []string{}}, "m b: 5=bool(true)\nm s: 9=string()\n")
		cWantQuery(t, db, engine.Query{Selector: s, Agg: engine.AggCount, Every: 4}, "m,k=1 b: 0=int(1) 4=int(1)\nm,k=1 s: 4=int(1) 8=int(1)\nm,k=2 s: 8=int(1)\n")
	})
}

// A group whose field holds numeric and bool or string series: count,
// first and last take every sample; sum, mean, min and max the numeric
// ones only (a bool or string series yields nothing for them).
func TestContractGroupNumericAndOtherKinds(t *testing.T) {
	steps := []cStep{cWrite(
		cp("m", "x", engine.Bool(true), 5, "h=a"),
		cp("m", "x", engine.Int(3), 6, "h=b"),
		cp("m", "x", engine.String("s"), 7, "h=c"),
		cp("m", "x", engine.Int(4), 8, "h=d"),
	)}
	s := engine.Selector{Measurement: "m"}
	cases := []struct {
		agg   engine.Aggregate
		every int64
		want  string
	}{
		{engine.AggCount, 0, "m x: 0=int(4)\n"},
		{engine.AggCount, 2, "m x: 4=int(1) 6=int(2) 8=int(1)\n"},
		{engine.AggSum, 0, "m x: 0=int(7)\n"},
		{engine.AggSum, 2, "m x: 6=int(3) 8=int(4)\n"},
		{engine.AggMean, 0, "m x: 0=float(3.5)\n"},
		{engine.AggMin, 0, "m x: 6=int(3)\n"},
		{engine.AggMax, 0, "m x: 8=int(4)\n"},
		{engine.AggMax, 2, "m x: 6=int(3) 8=int(4)\n"},
		{engine.AggFirst, 0, "m x: 5=bool(true)\n"},
		{engine.AggFirst, 2, "m x: 4=bool(true) 6=int(3) 8=int(4)\n"},
		{engine.AggLast, 0, "m x: 8=int(4)\n"},
		{engine.AggLast, 2, "m x: 4=bool(true) 6=string(s) 8=int(4)\n"},
	}
	inStates(t, nil, steps, func(t *testing.T, db *engine.DB) {
		for _, c := range cases {
			cWantQuery(t, db, engine.Query{Selector: s, Agg: c.agg, Every: c.every, GroupBy: []string{}}, c.want)
		}
	})
}

func TestContractValueAccessors(t *testing.T) {
	vals := []engine.Value{engine.Float(1.5), engine.Int(-2), engine.Uint(3), engine.Bool(true), engine.String("s")}
	kinds := []engine.Kind{engine.KindFloat, engine.KindInt, engine.KindUint, engine.KindBool, engine.KindString}
	for i, v := range vals {
		if v.Kind() != kinds[i] {
			t.Errorf("%v: kind %v, want %v", v, v.Kind(), kinds[i])
		}
		if (v.Float() != 0) != (i == 0) || (v.Int() != 0) != (i == 1) || (v.Uint() != 0) != (i == 2) ||
			v.Bool() != (i == 3) || (v.Str() != "") != (i == 4) {
			t.Errorf("%v: an accessor of another kind is not the zero value", v)
		}
		if v.String() == "" {
			t.Errorf("kind %v formats empty", v.Kind())
		}
		for j, w := range vals {
			if v.Equal(w) != (i == j) {
				t.Errorf("%v.Equal(%v) = %v", v, w, v.Equal(w))
			}
		}
	}
	if engine.Int(1).Equal(engine.Uint(1)) || engine.Int(1).Equal(engine.Float(1)) {
		t.Errorf("values of different kinds are equal")
	}
	if !engine.Float(2).Equal(engine.Float(2)) || engine.Float(2).Equal(engine.Float(3)) || !engine.String("a").Equal(engine.String("a")) {
		t.Errorf("Equal compares values wrongly")
	}
	if engine.Float(1.5).Float() != 1.5 || engine.Int(-2).Int() != -2 || engine.Uint(3).Uint() != 3 || engine.String("s").Str() != "s" || engine.Bool(false).Bool() {
		t.Errorf("accessors do not return the value")
	}
}
