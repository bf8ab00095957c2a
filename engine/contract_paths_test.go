package engine_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stratadb/strata/engine"
)

// Whatever an aggregate returns for extreme numbers (an overflowing sum
// included), it returns the same from the memtable, a segment, after
// compaction and after reopen, per series and grouped.
func TestContractSameAnswerOnEveryPath(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	ints := []int64{math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1, 1_700_000_000_000_000_000, -1, 0, 1}
	uints := []uint64{math.MaxUint64, math.MaxUint64 - 1, 1 << 63, 0, 1, 1_700_000_000_000_000_000}
	floats := []float64{math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 1e308, -1e-308, 0.1, 0.2, 0.3}
	var steps []cStep
	for range 4 {
		var pts []engine.Point
		for range 60 {
			h := fmt.Sprint("h=", r.IntN(4))
			ts := int64(r.IntN(40) - 20)
			pts = append(pts,
				cp("m", "i", engine.Int(ints[r.IntN(len(ints))]), ts, h),
				cp("m", "u", engine.Uint(uints[r.IntN(len(uints))]), ts, h),
				cp("m", "f", engine.Float(floats[r.IntN(len(floats))]), ts, h))
			if r.IntN(2) == 0 {
				// x mixes int and uint series.
				if h < "h=2" {
					pts = append(pts, cp("m", "x", engine.Int(ints[r.IntN(len(ints))]), ts, h))
				} else {
					pts = append(pts, cp("m", "x", engine.Uint(uints[r.IntN(len(uints))]), ts, h))
				}
			}
		}
		steps = append(steps, cWrite(pts...))
	}
	var queries []engine.Query
	for agg := engine.AggCount; agg <= engine.AggLast; agg++ {
		for _, every := range []int64{0, 3, 16} {
			for _, g := range [][]string{nil, {}, {"h"}} {
				queries = append(queries, engine.Query{Selector: engine.Selector{Measurement: "m"}, Agg: agg, Every: every, GroupBy: g})
				queries = append(queries, engine.Query{Selector: engine.Selector{Measurement: "m", Start: -7, End: 9}, Agg: agg, Every: every, GroupBy: g})
			}
		}
	}
	var first []string
	inStates(t, nil, steps, func(t *testing.T, db *engine.DB) {
		var got []string
		for _, q := range queries {
			res := cQuery(t, db, q)
			if !cSortedByKey(res) {
				t.Errorf("%+v: result not sorted by series key", q)
			}
			got = append(got, cFmt(res))
		}
		if first == nil {
			first = got
			return
		}
		for i, q := range queries {
			if got[i] != first[i] {
				t.Errorf("%+v differs from the memtable's answer:\ngot:\n%swant:\n%s", q, got[i], first[i])
			}
		}
		if strings.Join(got, "") == "" {
			t.Errorf("no results")
		}
	})
}
