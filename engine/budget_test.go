package engine

import (
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// dirBytes is the size of every file under dir.
func dirBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file removed while walking
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// budgetOptions sizes files small against the budget, as a gateway's
// defaults are against a disk of gigabytes.
func budgetOptions(limit int64) *Options {
	o := quietOptions()
	o.Sync = SyncNever
	o.MaxDiskBytes = limit
	o.MemTableBytes = limit / 32
	o.WALSegmentBytes = limit / 32
	o.L0CompactionTrigger = 2
	o.L0StopWritesTrigger = 4
	o.L1TargetBytes = limit / 32
	o.LevelMultiplier = 4
	o.TargetSegmentBytes = limit / 64
	return o
}

// budgetBatch writes one second of readings of series devices: a float and,
// with text, a random string that does not compress, to fill the budget
// with few samples.
func budgetBatch(rng *rand.Rand, devices int, ts int64, text bool) []Point {
	pts := make([]Point, devices)
	for d := range pts {
		f := []Field{{Key: "v", Value: Float(rng.Float64())}}
		if text {
			b := make([]byte, 64)
			for i := range b {
				b[i] = byte('a' + rng.IntN(26))
			}
			f = append(f, Field{Key: "s", Value: String(string(b))})
		}
		pts[d] = Point{Measurement: "sensor", Tags: []Tag{{Key: "dev", Value: fmt.Sprintf("d%02d", d)}}, Fields: f, Time: ts}
	}
	return pts
}

// Writing three times the budget keeps the directory within 1.1x of it,
// keeps every newest sample, and leaves the oldest ones out, for good: the
// floor is in Stats and survives a reopen. The directory is measured
// between compactions (run here by Compact, so that the test sees each
// one end); a compaction's outputs beside its inputs are not counted.
func TestDiskBudget(t *testing.T) {
	const limit = 3 << 20
	const devices = 32
	const sec = int64(1e9)
	dir := t.TempDir()
	opts := budgetOptions(limit)
	opts.DisableBackgroundCompaction = true
	db := openDB(t, dir, opts)
	rng := rand.New(rand.NewPCG(1, 2))
	var written, peak int64
	ts := int64(0)
	for written < 3*limit {
		for range 100 {
			mustWrite(t, db, budgetBatch(rng, devices, ts, true)...)
			ts += sec
		}
		peak = max(peak, dirBytes(t, dir))
		if err := db.Compact(); err != nil {
			t.Fatal(err)
		}
		written = db.Stats().FlushedBytes
		peak = max(peak, dirBytes(t, dir))
		if peak > limit*11/10 {
			st := db.Stats()
			t.Fatalf("directory at %d bytes after %d bytes flushed, past 1.1x the budget of %d (stats: disk %d, wal %d, levels %v %v, floor %d)",
				peak, written, limit, st.DiskBytes, st.WALBytes, st.SegmentsPerLevel, st.BytesPerLevel, st.OldestKept)
		}
	}
	mustFlush(t, db)
	if err := db.Compact(); err != nil {
		t.Fatal(err)
	}
	size := dirBytes(t, dir)
	floor := db.Stats().OldestKept
	t.Logf("wrote %d seconds, %d bytes flushed; directory %d bytes (peak %d), budget %d; oldest kept %ds",
		ts/sec, written, size, peak, limit, floor/sec)
	if size > limit {
		t.Fatalf("directory at %d bytes after compaction, past the budget of %d", size, limit)
	}
	if floor <= 0 || floor >= ts {
		t.Fatalf("OldestKept = %d, want inside (0, %d)", floor, ts)
	}
	check := func(db *DB) {
		t.Helper()
		q := rawAll("sensor")
		q.Field = "v"
		res := mustQuery(t, db, q)
		if len(res) != devices {
			t.Fatalf("%d series, want %d", len(res), devices)
		}
		for _, s := range res {
			// Every second from the floor to the newest is there; nothing older.
			first := s.Samples[0].Time
			if first < floor {
				t.Fatalf("%s: sample at %d below the floor %d", s.Key(), first, floor)
			}
			if want := (ts - first) / sec; int64(len(s.Samples)) != want || s.Samples[len(s.Samples)-1].Time != ts-sec {
				t.Fatalf("%s: %d samples from %d, want %d up to %d", s.Key(), len(s.Samples), first, want, ts-sec)
			}
		}
		// Aggregates and Last see the same range.
		agg := mustQuery(t, db, Query{Selector: Selector{Measurement: "sensor", Field: "v"}, Agg: AggCount})
		if got := agg[0].Samples[0].Value.Int(); got != int64(len(res[0].Samples)) {
			t.Fatalf("count %d, raw %d", got, len(res[0].Samples))
		}
	}
	check(db)
	// Written again below the floor: gone at once, as with Retention.
	mustWrite(t, db, Point{Measurement: "sensor", Tags: []Tag{{Key: "dev", Value: "d00"}}, Fields: []Field{{Key: "v", Value: Float(1)}}, Time: floor - sec})
	check(db)
	db = reopen(t, db, dir, opts)
	if got := db.Stats().OldestKept; got != floor {
		t.Fatalf("OldestKept %d after reopen, want %d", got, floor)
	}
	check(db)
	// Read-only, beside nothing: the same view.
	db.Close()
	ro := opts.Clone()
	ro.ReadOnly = true
	check(openDB(t, dir, ro))
}

// Within the budget nothing is dropped and no floor is set.
func TestDiskBudgetUnderLimit(t *testing.T) {
	dir := t.TempDir()
	opts := budgetOptions(64 << 20)
	db := openDB(t, dir, opts)
	rng := rand.New(rand.NewPCG(3, 4))
	for ts := range int64(2000) {
		mustWrite(t, db, budgetBatch(rng, 4, ts, false)...)
	}
	mustFlush(t, db)
	if err := db.Compact(); err != nil {
		t.Fatal(err)
	}
	if got := db.Stats().OldestKept; got != math.MinInt64 {
		t.Fatalf("OldestKept = %d within the budget", got)
	}
	for _, s := range mustQuery(t, db, rawAll("sensor")) {
		if len(s.Samples) != 2000 {
			t.Fatalf("%s: %d samples, want 2000", s.Key(), len(s.Samples))
		}
	}
}
