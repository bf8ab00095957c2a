package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// scanFixture writes 600 series of five kinds (a field per kind, series
// of 10 to 130 samples) over two segments, the memtable and a delete, so
// that a scan runs in parallel, mixes string and numeric series in its
// chunks and takes every read path.
func scanFixture(t *testing.T) *DB {
	t.Helper()
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	db := openDB(t, t.TempDir(), opts)
	write := func(from, to int, t0 int64, v int) {
		var pts []Point
		for s := from; s < to; s++ {
			field, val := "", Value{}
			for i := range int64(10 + s%121) {
				x := v + s + int(i)
				switch s % 5 {
				case 0:
					field, val = "f", Float(float64(x)/8)
				case 1:
					field, val = "i", Int(int64(-x))
				case 2:
					field, val = "u", Uint(uint64(x))
				case 3:
					field, val = "b", Bool(x%3 == 0)
				case 4:
					field, val = "s", String(fmt.Sprint("v", x))
				}
				pts = append(pts, pt("m", []Tag{{Key: "s", Value: fmt.Sprintf("%04d", s)}}, field, val, t0+i*10))
			}
		}
		mustWrite(t, db, pts...)
	}
	write(0, 600, 0, 1)
	mustFlush(t, db)
	write(200, 400, 250, 2) // overlaps and overwrites
	mustFlush(t, db)
	write(300, 500, 400, 3) // memtable
	mustDelete(t, db, Selector{Measurement: "m", Matchers: []Matcher{{Key: "s", Op: MatchRegexp, Value: "00[5-9].*"}}, Start: 100, End: 300})
	return db
}

// TestScanMatchesQuery checks that Scan yields exactly Query's samples, on
// the parallel path with chunks of mixed kinds, with series left to the
// emitting goroutine (longer than a window, or past a chunk's budget),
// and one by one for a narrow selector.
func TestScanMatchesQuery(t *testing.T) {
	db := scanFixture(t)
	sels := []Selector{
		{Measurement: "m"},
		{Measurement: "m", Start: 120, End: 470},
		{Measurement: "m", Field: "s"},
		{Measurement: "m", Tags: []Tag{{Key: "s", Value: "0404"}}},
		{Measurement: "m", Start: 5000, End: 6000},
	}
	for _, shape := range []struct {
		name        string
		part, chunk int
	}{{"defaults", PartSamples, scanChunkSamples}, {"windows", 40, scanChunkSamples}, {"budget", PartSamples, 100}, {"both", 25, 60}} {
		db.partSamples, db.scanChunkMax = shape.part, shape.chunk
		for _, sel := range sels {
			want := mustQuery(t, db, Query{Selector: sel})
			scanSplits.Store(0)
			got, err := joinScan(db, sel)
			if err != nil {
				t.Fatalf("%s %+v: %v", shape.name, sel, err)
			}
			if d := diffResults(AggNone, got, want); d != "" {
				t.Fatalf("%s %+v: %s", shape.name, sel, d)
			}
			if shape.part < 100 && sel.Start == 0 && sel.Tags == nil && scanSplits.Load() == 0 {
				t.Fatalf("%s %+v: no series came in runs", shape.name, sel)
			}
		}
	}
}

// TestScanStopsAndCancels checks that breaking out of Scan ends it and
// releases its snapshot, that a cancelled context stops it with the
// context's error, yielded once and last, and that a bad selector is
// refused the same way.
func TestScanStopsAndCancels(t *testing.T) {
	db := scanFixture(t)
	n := 0
	for c, err := range db.Scan(context.Background(), Selector{Measurement: "m"}) {
		if err != nil || c == nil {
			t.Fatal(err)
		}
		if n++; n == 3 {
			break
		}
	}
	// Compaction needs the snapshot released.
	mustCompact(t, db)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs, errs := 0, 0
	var last error
	for c, err := range db.Scan(ctx, Selector{Measurement: "m"}) {
		if err != nil {
			errs++
			last = err
			if c != nil {
				t.Fatal("error yielded with a run")
			}
			continue
		}
		if errs > 0 {
			t.Fatal("run after the error")
		}
		if runs++; runs == 10 {
			cancel()
		}
	}
	if errs != 1 || !errors.Is(last, context.Canceled) {
		t.Fatalf("cancelled scan: %d errors, last %v", errs, last)
	}
	if runs >= 600 {
		t.Fatalf("cancelled scan went on to %d runs", runs)
	}

	errs = 0
	for c, err := range db.Scan(context.Background(), Selector{}) {
		if err == nil || c != nil || !errors.Is(err, ErrInvalid) {
			t.Fatalf("scan without a measurement: %v", err)
		}
		errs++
	}
	if errs != 1 {
		t.Fatalf("%d errors for a bad selector", errs)
	}
}
