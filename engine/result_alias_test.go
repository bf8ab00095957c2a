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
