package engine

import (
	"context"
	"math"
	"testing"
	"time"
)

// A series read window by window whose versions of a sample at
// math.MaxInt64 span two memtable chunks (kept for an older reader) must
// not wrap the next window's start to the start of time: Last and the
// metadata calls would then see a sample below the retention cutoff.
func TestMemWindowsAtEndOfTime(t *testing.T) {
	now := time.Unix(0, 0).Add(2 * time.Hour)
	db := openDB(t, t.TempDir(), &Options{Retention: time.Hour, Now: func() time.Time { return now }})
	defer db.Close()
	db.partSamples = 1 // every series is read window by window
	ctx := context.Background()
	// Held throughout, so that every version of the last sample is kept.
	snap, err := db.acquireSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer db.releaseSnapshot(snap)
	for i := range 8 {
		if err := db.Write([]Point{pt("m", nil, "v", Int(int64(i)), math.MaxInt64)}); err != nil {
			t.Fatal(err)
		}
	}
	// Delete all of it, then write one sample that retention hides.
	if err := db.Delete(ctx, Selector{Measurement: "m"}); err != nil {
		t.Fatal(err)
	}
	if err := db.Write([]Point{pt("m", nil, "v", Int(99), 1)}); err != nil {
		t.Fatal(err)
	}
	if res, err := db.Last(ctx, Selector{Measurement: "m"}); err != nil || len(res) != 0 {
		t.Errorf("Last = %+v, %v; want nothing (deleted, or older than the retention)", res, err)
	}
	if res, err := db.SeriesInfo(ctx, Selector{Measurement: "m"}); err != nil || len(res) != 0 {
		t.Errorf("SeriesInfo = %+v, %v; want nothing", res, err)
	}
	if res, err := db.Query(ctx, Query{Selector: Selector{Measurement: "m"}}); err != nil || len(res) != 0 {
		t.Errorf("Query = %+v, %v; want nothing", res, err)
	}
}
