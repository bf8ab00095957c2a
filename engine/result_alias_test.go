package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// TestQueryResultsOwnTheirSamples checks that each Series Query returns
// owns its Samples: results share allocations (takeSamples), so a caller
// appending to one series' samples must not write into another's. It
// covers series read from one segment, series merged from a segment and
// the memtable, the parallel path (many series) and the sequential one.
func TestQueryResultsOwnTheirSamples(t *testing.T) {
	for _, n := range []int{10, aggParallelMin + 44} {
		t.Run(fmt.Sprint("series=", n), func(t *testing.T) {
			dir := t.TempDir()
			db := openDB(t, dir, quietOptions())
			write := func(from, to int64, every int) {
				var pts []Point
				for i := 0; i < n; i += every {
					for ts := from; ts < to; ts++ {
						pts = append(pts, Point{Measurement: "m", Tags: []Tag{{Key: "id", Value: fmt.Sprintf("d%04d", i)}},
							Fields: []Field{{Key: "f", Value: Float(float64(i*1000) + float64(ts))}}, Time: ts})
					}
				}
				if err := db.Write(pts); err != nil {
					t.Fatal(err)
				}
			}
			write(0, 70, 1)
			db = reopen(t, db, dir, quietOptions()) // segment only
			write(70, 75, 3)                        // every third series also in the memtable
			res, err := db.Query(context.Background(), Query{Selector: Selector{Measurement: "m"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != n {
				t.Fatalf("%d series, want %d", len(res), n)
			}
			want := make([][]Sample, len(res))
			for i, s := range res {
				if len(s.Samples) != cap(s.Samples) {
					t.Fatalf("series %d: len %d cap %d: an append would write past its samples", i, len(s.Samples), cap(s.Samples))
				}
				want[i] = slices.Clone(s.Samples)
			}
			for i := range res {
				res[i].Samples = append(res[i].Samples, Sample{Time: -1, Value: Float(-1)})
			}
			for i, s := range res {
				if !slices.Equal(s.Samples[:len(want[i])], want[i]) {
					t.Fatalf("series %d changed when others' samples were appended to", i)
				}
			}
		})
	}
}

// TestTakeSamplesSizesSlabs checks that a slab holds what the series left
// to read need, at most slabSamples: a query of one series allocates its
// samples alone, one of a few series no more than they take.
func TestTakeSamplesSizesSlabs(t *testing.T) {
	cases := []struct {
		rest, n  int
		slabLeft int // len(r.slab) after the first take
	}{
		{rest: 1, n: 60, slabLeft: 0},
		{rest: 0, n: 60, slabLeft: 0},
		{rest: 3, n: 100, slabLeft: 200},
		{rest: 1000, n: 600, slabLeft: slabSamples - 600},
		{rest: 1000, n: slabSamples / 4, slabLeft: 0}, // large: alone
	}
	for _, c := range cases {
		r := seriesReader{slabRest: c.rest}
		out := r.takeSamples(c.n)
		if len(out) != c.n || cap(out) != c.n {
			t.Errorf("rest %d, n %d: len %d cap %d, want %d", c.rest, c.n, len(out), cap(out), c.n)
		}
		if len(r.slab) != c.slabLeft {
			t.Errorf("rest %d, n %d: %d samples left in the slab, want %d", c.rest, c.n, len(r.slab), c.slabLeft)
		}
	}
}
