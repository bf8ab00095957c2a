package engine_test

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/engine"
)

// Aggregates, per series and grouped, against the seeded model of
// contract_model_test.go: every Agg, bucket widths, group keys that some
// or all series lack, numeric kinds mixed in one field, deletes,
// overwrites and retention, in every state.

type cmGroup struct {
	m     string
	tags  []engine.Tag
	field string
	key   string
	// samples of every member series, with the member's key for ties.
	samples []cmMember
}

type cmMember struct {
	key string
	s   engine.Sample
}

func cmFloor(t, every int64) int64 {
	r := t % every
	if r < 0 {
		r += every
	}
	return t - r
}

func cmNum(v engine.Value) float64 {
	switch v.Kind() {
	case engine.KindFloat:
		return v.Float()
	case engine.KindInt:
		return float64(v.Int())
	case engine.KindUint:
		return float64(v.Uint())
	}
	panic("not a number")
}

// aggregate is the model of Query with Agg != AggNone.
func (m *cModel) aggregate(q engine.Query) string {
	groups := map[string]*cmGroup{}
	for _, k := range m.sortedKeys() {
		s := m.series[k]
		if !m.matches(s, q.Selector) {
			continue
		}
		var tags []engine.Tag
		if q.GroupBy == nil {
			tags = s.tags
		} else {
			for _, g := range q.GroupBy {
				if v := cmTagValue(s.tags, g); v != "" && !slices.ContainsFunc(tags, func(t engine.Tag) bool { return t.Key == g }) {
					tags = append(tags, engine.Tag{Key: g, Value: v})
				}
			}
			slices.SortFunc(tags, func(a, b engine.Tag) int { return strings.Compare(a.Key, b.Key) })
		}
		gk := cKey(s.m, tags, s.field)
		g := groups[gk]
		if g == nil {
			g = &cmGroup{m: s.m, tags: tags, field: s.field, key: gk}
			groups[gk] = g
		}
		for _, x := range m.visible(s, q.Selector) {
			g.samples = append(g.samples, cmMember{key: k, s: x})
		}
	}
	var keys []string
	for k := range groups {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		g := groups[k]
		buckets := map[int64][]cmMember{}
		for _, x := range g.samples {
			bt := q.Start
			if q.Every > 0 {
				bt = cmFloor(x.s.Time, q.Every)
			}
			buckets[bt] = append(buckets[bt], x)
		}
		var bts []int64
		for bt := range buckets {
			bts = append(bts, bt)
		}
		slices.Sort(bts)
		var line strings.Builder
		for _, bt := range bts {
			if v, ok := cmAgg(q, bt, buckets[bt]); ok {
				fmt.Fprintf(&line, " %d=%s(%s)", v.Time, v.Value.Kind(), v.Value)
			}
		}
		if line.Len() > 0 {
			fmt.Fprintf(&b, "%s:%s\n", g.key, line.String())
		}
	}
	return b.String()
}

// cmExactSum is the exact sum of numbers of any kind with math/big, rounded
// once to the nearest float64 (ties to even): what sums and means promise.
func cmExactSum(xs []cmMember) float64 {
	// Every float64 is an integer multiple of 2^-1074.
	var n big.Int
	for _, x := range xs {
		var v *big.Int
		switch x.s.Value.Kind() {
		case engine.KindFloat:
			f := new(big.Float).SetFloat64(x.s.Value.Float())
			v, _ = f.SetMantExp(f, 1074).Int(nil)
		case engine.KindInt:
			v = new(big.Int).Lsh(big.NewInt(x.s.Value.Int()), 1074)
		default:
			v = new(big.Int).Lsh(new(big.Int).SetUint64(x.s.Value.Uint()), 1074)
		}
		n.Add(&n, v)
	}
	if n.Sign() == 0 {
		return 0
	}
	f := new(big.Float).SetInt(&n)
	r, _ := f.SetMantExp(f, -1074).Float64()
	return r
}

func cmAgg(q engine.Query, bt int64, xs []cmMember) (engine.Sample, bool) {
	// Order by time, then member key: first/last ties go to the key that
	// sorts first.
	slices.SortStableFunc(xs, func(a, b cmMember) int {
		if c := cmpInt(a.s.Time, b.s.Time); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	own := func(t int64) int64 {
		if q.Every > 0 {
			return bt
		}
		return t
	}
	switch q.Agg {
	case engine.AggCount:
		return engine.Sample{Time: bt, Value: engine.Int(int64(len(xs)))}, true
	case engine.AggFirst:
		return engine.Sample{Time: own(xs[0].s.Time), Value: xs[0].s.Value}, true
	case engine.AggLast:
		last := xs[len(xs)-1]
		for i := len(xs) - 1; i >= 0 && xs[i].s.Time == last.s.Time; i-- {
			last = xs[i]
		}
		return engine.Sample{Time: own(last.s.Time), Value: last.s.Value}, true
	}
	kind := xs[0].s.Value.Kind()
	if !kind.Numeric() {
		return engine.Sample{}, false
	}
	mixed := false
	for _, x := range xs {
		if x.s.Value.Kind() != kind {
			mixed = true
		}
	}
	switch q.Agg {
	case engine.AggSum:
		var i int64
		var u uint64
		for _, x := range xs {
			i += x.s.Value.Int()
			u += x.s.Value.Uint()
		}
		v := engine.Float(cmExactSum(xs))
		switch {
		case mixed:
		case kind == engine.KindInt:
			v = engine.Int(i)
		case kind == engine.KindUint:
			v = engine.Uint(u)
		}
		return engine.Sample{Time: bt, Value: v}, true
	case engine.AggMean:
		return engine.Sample{Time: bt, Value: engine.Float(cmExactSum(xs) / float64(len(xs)))}, true
	case engine.AggMin, engine.AggMax:
		best := xs[0]
		for _, x := range xs[1:] {
			a, c := cmNum(x.s.Value), cmNum(best.s.Value)
			if (q.Agg == engine.AggMin && a < c) || (q.Agg == engine.AggMax && a > c) {
				best = x
			}
		}
		v := best.s.Value
		if mixed {
			v = engine.Float(cmNum(v))
		}
		return engine.Sample{Time: own(best.s.Time), Value: v}, true
	}
	panic("unknown agg")
}

var cmGroupBys = [][]string{nil, {}, {"a"}, {"a", "b"}, {"nope"}, {"c", "a"}, {"b", "nope"}, {"aZ", "a b"}}

func TestContractModelAggregates(t *testing.T) {
	for seed := range uint64(3) {
		cutoff := int64(-1 << 62)
		opts := cOpts(0)
		if seed%2 == 1 {
			cutoff = -20
			opts = cOpts(1000)
			opts.Retention = 1020
		}
		steps, model := cmWorkload(seed+100, cutoff, cmLimits{})
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			inStates(t, opts, steps, func(t *testing.T, db *engine.DB) {
				r := rand.New(rand.NewPCG(seed, 5))
				for range 150 {
					q := engine.Query{
						Selector: cmSelector(r, true),
						Agg:      engine.Aggregate(1 + r.IntN(7)),
						Every:    []int64{0, 0, 7, 20, 1}[r.IntN(5)],
						GroupBy:  cmGroupBys[r.IntN(len(cmGroupBys))],
					}
					got := cFmt(cQuery(t, db, q))
					if want := model.aggregate(q); got != want {
						t.Errorf("Query %+v:\ngot:\n%swant:\n%s", q, got, want)
					}
				}
			})
		})
	}
}
