package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
)

// TestQueryAggParallel checks that Query's per-series aggregates, read on
// several goroutines, equal QuerySeq's (read one series after another) for
// every aggregate, in key order, over series in segments and memtables,
// and that a cancellation in the middle returns the context's error.
func TestQueryAggParallel(t *testing.T) {
	opts := quietOptions()
	opts.BlockSamples = 16
	opts.DisableBackgroundCompaction = true
	db := openDB(t, t.TempDir(), opts)
	r := rand.New(rand.NewPCG(8, 9))
	const series = 3*aggChunk*aggMaxWorkers + 17
	var pts []Point
	for i := range series {
		for j := range 40 {
			v := Float(float64(r.IntN(20000)-10000) / 100)
			if i%3 == 1 {
				v = Int(int64(r.IntN(1000)))
			}
			pts = append(pts, pt("m", []Tag{{Key: "dev", Value: fmt.Sprintf("d%04d", i)}}, "f", v, int64(j*7+i%5)))
		}
		if i == series/2 {
			mustWrite(t, db, pts...)
			mustFlush(t, db)
			pts = pts[:0]
		}
	}
	mustWrite(t, db, pts...) // the rest in the memtable
	for _, agg := range allAggs[1:] {
		for _, every := range []int64{0, 20} {
			q := rawAll("m")
			q.Agg, q.Every = agg, every
			got := mustQuery(t, db, q)
			var want []Series
			for s, err := range db.QuerySeq(context.Background(), q) {
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, s)
			}
			if len(got) != series {
				t.Fatalf("%s: %d series, want %d", formatQuery(q), len(got), series)
			}
			if d := sameResults(got, want); d != "" {
				t.Fatalf("%s: %s", formatQuery(q), d)
			}
			if !slices.IsSortedFunc(got, func(a, b Series) int { return cmpTags(a.Tags, b.Tags) }) {
				t.Fatalf("%s: results out of order", formatQuery(q))
			}
		}
	}

	// Cancelled while workers decode: the context's error, no result.
	mustFlush(t, db)
	ctx, cancel := context.WithCancel(context.Background())
	var decoded atomic.Int64
	db.testOnBlockDecode = func() {
		if decoded.Add(1) == 50 {
			cancel()
		}
	}
	defer func() { db.testOnBlockDecode = nil }()
	q := rawAll("m")
	q.Agg, q.Every = AggMean, 20
	res, err := db.Query(ctx, q)
	if !errors.Is(err, context.Canceled) || res != nil {
		t.Fatalf("cancelled query: %d results, err %v", len(res), err)
	}
}

func cmpTags(a, b []Tag) int {
	for i := range min(len(a), len(b)) {
		if a[i].Key != b[i].Key || a[i].Value != b[i].Value {
			if a[i].Key+"="+a[i].Value < b[i].Key+"="+b[i].Value {
				return -1
			}
			return 1
		}
	}
	return len(a) - len(b)
}
