package engine

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"sync"
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
		db.seqParallelMin = math.MaxInt // one series after another
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
		db.seqParallelMin = aggParallelMin
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

// TestQuerySeqParallel checks that QuerySeq reading ahead on several
// goroutines yields exactly what it yields reading one series after
// another: the same parts in the same order, with series of several parts
// (which the caller's goroutine reads) among short ones, chunks that stop
// on their sample budget, and a delete. It also checks that every result
// is allocated on its own and that breaking out early stops cleanly.
func TestQuerySeqParallel(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // reading ahead needs two
	}
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	db := withParts(openDB(t, t.TempDir(), opts), 100)
	write := func(from, to int, t0 int64, v float64) {
		var pts []Point
		for s := from; s < to; s++ {
			n := int64(20)
			switch {
			case s%97 == 5:
				n = 450 // several parts of 100
			case s%13 == 0:
				n = 90 // one part, fills a chunk's budget quickly
			}
			for i := range n {
				pts = append(pts, pt("m", []Tag{{Key: "s", Value: fmt.Sprintf("%04d", s)}}, "v", Float(v+float64(s)+float64(i)/8), t0+i*10))
			}
		}
		if err := db.Write(pts); err != nil {
			t.Fatal(err)
		}
	}
	write(0, 700, 0, 1)
	mustFlush(t, db)
	write(100, 300, 150, 2) // overwrites, in the memtable
	if err := db.Delete(context.Background(), Selector{Measurement: "m", Matchers: []Matcher{{Key: "s", Op: MatchRegexp, Value: "02.*"}}, Start: 50, End: 120}); err != nil {
		t.Fatal(err)
	}
	collect := func(sel Selector, min int) []Series {
		db.seqParallelMin = min
		defer func() { db.seqParallelMin = aggParallelMin }()
		var out []Series
		for s, err := range db.QuerySeq(context.Background(), Query{Selector: sel}) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}
	var mu sync.Mutex
	chunks, mostHeld := 0, 0
	db.testReadAhead = func(n int) {
		mu.Lock()
		chunks, mostHeld = chunks+1, max(mostHeld, n)
		mu.Unlock()
	}
	for _, sel := range []Selector{{Measurement: "m"}, {Measurement: "m", Start: 30, End: 2500}} {
		want := collect(sel, math.MaxInt)
		got := collect(sel, 1)
		if len(want) < 700 || !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v: %d results read ahead, %d one by one, or other samples", sel, len(got), len(want))
		}
		// Appending to a result never changes another.
		for i := range got {
			n := len(got[i].Samples)
			got[i].Samples = append(got[i].Samples, Sample{Time: -1}, Sample{Time: -2})[:n]
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v: appending to one result changed another", sel)
		}
	}
	// A chunk read ahead stops once it holds a part's worth: it holds
	// less than two parts (the last series it read is one part at most).
	mu.Lock()
	defer mu.Unlock()
	if chunks == 0 || mostHeld < 100 || mostHeld >= 200 {
		t.Fatalf("%d chunks read ahead, the largest holding %d samples; want 100 to 199", chunks, mostHeld)
	}
	db.testReadAhead = nil
	db.seqParallelMin = 1
	n := 0
	for _, err := range db.QuerySeq(context.Background(), Query{Selector: Selector{Measurement: "m"}}) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 150 {
			break
		}
	}
	db.seqParallelMin = aggParallelMin
	checkSnapshotsReleased(t, db)
}
