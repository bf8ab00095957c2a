package engine

import (
	"context"
	"fmt"
	"reflect"
	"testing"
)

// TestQueryRawParallel checks that a raw Query over enough series to be
// read on several goroutines answers what QuerySeq, which reads them one
// by one, does: series in a segment alone, in a segment and the memtable,
// in two segments with overwrites, and under a delete.
func TestQueryRawParallel(t *testing.T) {
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	db := openDB(t, t.TempDir(), opts)
	write := func(from, to int, t0 int64, v float64) {
		var pts []Point
		for s := from; s < to; s++ {
			for i := range int64(50) {
				pts = append(pts, pt("m", []Tag{{Key: "s", Value: fmt.Sprintf("%04d", s)}}, "v", Float(v+float64(s)+float64(i)/8), t0+i*10))
			}
		}
		if err := db.Write(pts); err != nil {
			t.Fatal(err)
		}
	}
	write(0, 600, 0, 1)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	write(200, 400, 250, 2) // overlaps and overwrites
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	write(300, 500, 400, 3) // memtable
	if err := db.Delete(context.Background(), Selector{Measurement: "m", Matchers: []Matcher{{Key: "s", Op: MatchRegexp, Value: "00[5-9].*"}}, Start: 100, End: 300}); err != nil {
		t.Fatal(err)
	}
	for _, sel := range []Selector{{Measurement: "m"}, {Measurement: "m", Start: 120, End: 470}} {
		got, err := db.Query(context.Background(), Query{Selector: sel})
		if err != nil {
			t.Fatal(err)
		}
		var want []Series
		for s, err := range db.QuerySeq(context.Background(), Query{Selector: sel}) {
			if err != nil {
				t.Fatal(err)
			}
			if n := len(want); n > 0 && reflect.DeepEqual(want[n-1].Tags, s.Tags) {
				want[n-1].Samples = append(want[n-1].Samples, s.Samples...)
				continue
			}
			want = append(want, s)
		}
		if len(got) != 600 || !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v: Query gave %d series, QuerySeq %d, or other samples", sel, len(got), len(want))
		}
		scanned, err := joinScan(db, sel)
		if err != nil {
			t.Fatal(err)
		}
		if d := diffResults(AggNone, scanned, want); d != "" {
			t.Fatalf("%+v: Scan: %s", sel, d)
		}
	}
}
