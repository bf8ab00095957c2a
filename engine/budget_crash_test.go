package engine

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stratadb/strata/internal/vfs"
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

	n := faultLoop(t, func(i int64) (bool, string) {
		dir := filepath.Join(t.TempDir(), "db")
		if err := os.CopyFS(dir, os.DirFS(template)); err != nil {
			return true, err.Error()
		}
		var armed atomic.Bool
		inj := &vfs.OnIndex{N: i, Sticky: true, Match: func(_ vfs.Op, name string) bool {
			return armed.Load() && (strings.HasSuffix(name, ".seg") || strings.HasSuffix(name, "MANIFEST") || strings.HasSuffix(name, ".tmp"))
		}}
		o := *opts
		o.MaxDiskBytes = limit
		o.fs = vfs.Inject(vfs.Default, inj.Injector())
		db, err := Open(dir, &o)
		if err != nil {
			return true, "open: " + err.Error()
		}
		armed.Store(true)
		cerr := db.Compact()
		db.Close()
		if inj.Count() <= i {
			if cerr != nil {
				return false, "fault-free compaction failed: " + cerr.Error()
			}
			return false, verify(dir, true)
		}
		if p := verify(dir, false); p != "" {
			return true, fmt.Sprintf("(compact returned %v): %s", cerr, p)
		}
		return true, ""
	})
	t.Logf("%d fault points", n)
}
