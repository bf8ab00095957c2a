package engine

import (
	"context"
	"fmt"
	"math"
	"testing"
)

// TestCrashInjectionBudgetDrop fails, in turn, each operation on segment,
// manifest and temporary files during a compaction that enforces the disk
// budget. Reopened without faults, the database holds, for every series,
// exactly its samples at or after the floor it reports: all of them when the
// drop did not land, never a part of the dropped range, never a loss above
// the floor.
func TestCrashInjectionBudgetDrop(t *testing.T) {
	const devices, seconds = 8, 400
	template := t.TempDir()
	opts := crashOptions()
	opts.BlockSamples = 16
	opts.TargetSegmentBytes = 2 << 10 // several outputs
	db := openDB(t, template, opts)
	// Four L0 segments, oldest data first, and an overwrite in the last one
	// of a sample of the first: dropping must never show the old value.
	for s := range int64(seconds) {
		pts := make([]Point, devices)
		for d := range pts {
			pts[d] = pt("sensor", []Tag{{Key: "dev", Value: fmt.Sprint(d)}}, "v", Int(s), s)
		}
		mustWrite(t, db, pts...)
		if (s+1)%(seconds/4) == 0 {
			if s == seconds-1 {
				mustWrite(t, db, pt("sensor", []Tag{{Key: "dev", Value: "0"}}, "v", Int(-1), 10))
			}
			mustFlush(t, db)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	limit := dirBytes(t, template) / 2
	want := func(dev int, s int64) int64 {
		if dev == 0 && s == 10 {
			return -1
		}
		return s
	}

	verify := func(dir string, mustDrop bool) string {
		o := *opts
		o.MaxDiskBytes = limit
		db, err := Open(dir, &o)
		if err != nil {
			return "reopen: " + err.Error()
		}
		defer db.Close()
		floor := db.Stats().OldestKept
		if mustDrop && (floor == math.MinInt64 || floor <= 0) {
			return fmt.Sprintf("no floor after a fault-free compaction (OldestKept %d)", floor)
		}
		res, err := db.Query(context.Background(), rawAll("sensor"))
		if err != nil {
			return "query: " + err.Error()
		}
		if len(res) != devices {
			return fmt.Sprintf("%d series, want %d", len(res), devices)
		}
		for _, sr := range res {
			var dev int
			fmt.Sscan(sr.Tags[0].Value, &dev)
			from := max(floor, 0)
			if int64(len(sr.Samples)) != seconds-from {
				return fmt.Sprintf("%s: %d samples, want %d from the floor %d", sr.Key(), len(sr.Samples), seconds-from, floor)
			}
			for i, x := range sr.Samples {
				if s := from + int64(i); x.Time != s || x.Value.Int() != want(dev, s) {
					return fmt.Sprintf("%s: sample %d is %d@%d, want %d@%d", sr.Key(), i, x.Value.Int(), x.Time, want(dev, s), s)
				}
			}
		}
		return ""
	}

	bo := *opts
	bo.MaxDiskBytes = limit
	n := compactionFaults(t, template, &bo, verify)
	t.Logf("%d fault points", n)
}
