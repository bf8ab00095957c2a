package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// aggQueries lists every aggregate over all time and in buckets.
func aggQueries(measurement string) []Query {
	var qs []Query
	for _, agg := range allAggs {
		for _, every := range []int64{0, 64, 1000} {
			if agg == AggNone && every != 0 {
				continue
			}
			q := rawAll(measurement)
			q.Agg, q.Every = agg, every
			qs = append(qs, q)
		}
	}
	return qs
}

// sameResults returns "" when got and want are identical, bit for bit.
func sameResults(got, want []Series) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d series, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Measurement != w.Measurement || g.Field != w.Field || len(g.Samples) != len(w.Samples) {
			return fmt.Sprintf("series %d differs:%s\nwant:%s", i, formatSeries(got[i:i+1]), formatSeries(want[i:i+1]))
		}
		for j := range g.Samples {
			if g.Samples[j].Time != w.Samples[j].Time || !g.Samples[j].Value.Equal(w.Samples[j].Value) {
				return fmt.Sprintf("series %s field %s sample %d: %d=%s, want %d=%s", g.Measurement, g.Field, j,
					g.Samples[j].Time, g.Samples[j].Value, w.Samples[j].Time, w.Samples[j].Value)
			}
		}
	}
	return ""
}

// TestAggregatesSameEverywhere is metamorphic: the same random data, with
// extreme ints and uints (MaxInt64, MinInt64, MaxUint64, Unix-ns times),
// gives bit-identical answers for every aggregate and kind from the
// memtable, from one flushed segment (block stats), from a mix of segments
// and memtable, after compaction and after reopen. It also checks the
// documented overflow rule: an int or uint sum saturates.
func TestAggregatesSameEverywhere(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 99))
			kinds := []Kind{KindFloat, KindInt, KindUint, KindBool, KindString}
			var batches [3][]Point
			for n := range 600 {
				tm := r.Int64N(4000) - 1000
				var fields []Field
				for _, k := range kinds {
					var v Value
					switch k {
					case KindFloat:
						v = Float((r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(30))))
					case KindInt:
						v = Int(extremeInt(r))
					case KindUint:
						v = Uint(extremeUint(r))
					case KindBool:
						v = Bool(r.IntN(2) == 0)
					default:
						v = String(fmt.Sprint("s", r.IntN(50)))
					}
					fields = append(fields, Field{Key: k.String(), Value: v})
				}
				// Unix-ns times as values: block stats determine their sums.
				fields = append(fields, Field{Key: "ts", Value: Int(1_700_000_000_000_000_000 + r.Int64N(1e12))})
				dev := fmt.Sprint("d", r.IntN(3))
				batches[n%3] = append(batches[n%3], Point{Measurement: "m", Tags: []Tag{{Key: "dev", Value: dev}}, Fields: fields, Time: tm})
			}
			opts := quietOptions()
			opts.Sync = SyncNever
			opts.BlockSamples = 8
			opts.DisableBackgroundCompaction = true
			answers := func(db *DB) [][]Series {
				var out [][]Series
				for _, q := range aggQueries("m") {
					out = append(out, mustQuery(t, db, q))
				}
				return out
			}
			compare := func(where string, got, want [][]Series) {
				t.Helper()
				for i, q := range aggQueries("m") {
					if d := sameResults(got[i], want[i]); d != "" {
						t.Fatalf("%s, %s: %s", where, formatQuery(q), d)
					}
				}
			}

			// All in one memtable, then flushed to one segment.
			db1 := openDB(t, t.TempDir(), opts)
			for _, b := range batches {
				mustWrite(t, db1, b...)
			}
			want := answers(db1)
			mustFlush(t, db1)
			compare("one segment", answers(db1), want)
			if db1.st.blocksPushedDown.Load() == 0 {
				t.Fatal("no aggregate used block stats")
			}

			// Spread over segments and the memtable, then compacted, then
			// reopened.
			dir := t.TempDir()
			db2 := openDB(t, dir, opts)
			mustWrite(t, db2, batches[0]...)
			mustFlush(t, db2)
			mustWrite(t, db2, batches[1]...)
			mustFlush(t, db2)
			mustWrite(t, db2, batches[2]...)
			compare("segments and memtable", answers(db2), want)
			mustFlush(t, db2)
			mustCompact(t, db2)
			compare("compacted", answers(db2), want)
			db2 = reopen(t, db2, dir, opts)
			compare("reopened", answers(db2), want)

			// The sums and means of the model agree, bit for bit: int
			// sums saturate, float sums and means are exact sums rounded
			// once (math/big).
			m := NewRefModel()
			for _, b := range batches {
				m.write(b)
			}
			for _, q := range aggQueries("m") {
				if q.Agg != AggSum && q.Agg != AggMean {
					continue
				}
				if d := diffResults(q.Agg, mustQuery(t, db2, q), m.query(q, math.MinInt64)); d != "" {
					t.Fatalf("model, %s: %s", formatQuery(q), d)
				}
			}
		})
	}
}

// TestIntSumSaturates pins the overflow rule on small inputs.
func TestIntSumSaturates(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	mustWrite(t, db,
		pt("i", nil, "f", Int(math.MaxInt64), 1), pt("i", nil, "f", Int(1), 2),
		pt("n", nil, "f", Int(math.MinInt64), 1), pt("n", nil, "f", Int(-1), 2),
		pt("u", nil, "f", Uint(math.MaxUint64), 1), pt("u", nil, "f", Uint(1), 2),
		pt("t", nil, "f", Int(1_700_000_000_000_000_000), 1), pt("t", nil, "f", Int(1_700_000_000_000_000_002), 2),
	)
	for _, flush := range []bool{false, true} {
		if flush {
			mustFlush(t, db)
		}
		for _, c := range []struct {
			m         string
			agg       Aggregate
			want      Value
			wantFloat float64
		}{
			{"i", AggSum, Int(math.MaxInt64), 0},
			{"n", AggSum, Int(math.MinInt64), 0},
			{"u", AggSum, Uint(math.MaxUint64), 0},
			{"i", AggMean, Float(float64(math.MaxInt64) / 2), 0},
			{"u", AggMean, Float(float64(math.MaxUint64) / 2), 0},
			{"t", AggMean, Float(1_700_000_000_000_000_001), 0},
		} {
			q := rawAll(c.m)
			q.Agg = c.agg
			got := samplesOf(t, mustQuery(t, db, q))
			if len(got) != 1 || !got[0].Value.Equal(c.want) {
				t.Errorf("flushed=%v %s %v = %v, want %v", flush, c.m, c.agg, got, c.want)
			}
		}
	}
}
