package engine

import (
	"math"
	"testing"
	"time"
)

// A sample within a rule's Every of math.MinInt64 has no bucket: its
// bucket would start below what int64 holds. Write accepts it, so
// compaction must keep it (raw) instead of failing on it for good, which
// stops writes once background compaction gives up; and a series holding
// it must not make its segment due for a rollup rewrite that rolls up
// nothing, again and again.
func TestRollupNearMinInt64(t *testing.T) {
	dir := t.TempDir()
	now, opts := rollupClockOptions()
	opts.Rollups = []RollupRule{{Measurement: "m", Every: time.Minute, After: time.Hour}}
	opts.L0CompactionTrigger = 2 // the second flush makes a merge into L1
	db := openDB(t, dir, opts)
	a := []Tag{{Key: "host", Value: "a"}}
	b := []Tag{{Key: "host", Value: "b"}}
	old := now.Load() - int64(3*time.Hour)
	mustWrite(t, db,
		pt("m", a, "v", Float(1), math.MinInt64),
		pt("m", a, "v", Float(2), math.MinInt64+5),
		pt("m", a, "v", Float(3), old),
		pt("m", b, "v", Float(4), old),
		pt("m", b, "v", Float(5), old+int64(time.Second)),
	)
	mustFlush(t, db)
	mustWrite(t, db, pt("m", a, "v", Float(6), now.Load()), pt("m", b, "v", Float(7), now.Load()))
	mustFlush(t, db)

	rounds := 0
	for ; rounds < 10; rounds++ {
		did, err := db.compactOnce()
		if err != nil {
			t.Fatalf("compaction %d: %v", rounds, err)
		}
		if !did {
			break
		}
	}
	if rounds >= 5 {
		t.Fatalf("still compacting after %d rounds: a segment stays due for a rollup that rolls up nothing", rounds)
	}
	if st := db.Stats(); st.RollupBucketsWritten == 0 {
		t.Fatalf("host=b was not rolled up: %+v", st)
	}

	check := func(db *DB, where string) {
		t.Helper()
		res := mustQuery(t, db, Query{Selector: Selector{Measurement: "m", Tags: a}})
		got := samplesOf(t, res)
		want := []int64{math.MinInt64, math.MinInt64 + 5, old, now.Load()}
		if len(got) != len(want) {
			t.Fatalf("%s: host=a holds %v, want times %v", where, got, want)
		}
		for i := range want {
			if got[i].Time != want[i] {
				t.Fatalf("%s: host=a holds %v, want times %v", where, got, want)
			}
		}
		res = mustQuery(t, db, Query{Selector: Selector{Measurement: "m", Tags: a, Start: math.MinInt64, End: math.MinInt64 + 100}, Agg: AggCount})
		if got := samplesOf(t, res); len(got) != 1 || got[0].Value.Int() != 2 {
			t.Fatalf("%s: count near MinInt64 %v, want 2", where, got)
		}
		res = mustQuery(t, db, Query{Selector: Selector{Measurement: "m", Tags: b}, Agg: AggSum})
		if got := samplesOf(t, res); len(got) != 1 || got[0].Value.Float() != 16 {
			t.Fatalf("%s: sum of host=b %v, want 16", where, got)
		}
		if rep, err := db.Verify(t.Context()); err != nil {
			t.Fatalf("%s: verify: %v %+v", where, err, rep)
		}
	}
	check(db, "after compaction")
	db = reopen(t, db, dir, opts)
	check(db, "after reopen")
}

// A compaction rolls up only below the oldest time of any other data of
// its series. A flush that publishes while the compaction starts moves
// data from a memtable into a segment that the compaction's version does
// not hold: it must still count, or the merge rolls up a bucket that a
// newer raw sample of the same series and time (an overwrite) then meets
// as raw data, and aggregates count both.
func TestRollupLimitSeesConcurrentFlush(t *testing.T) {
	now, opts := rollupClockOptions()
	opts.Rollups = []RollupRule{{Measurement: "m", Every: time.Minute, After: time.Hour}}
	opts.L0CompactionTrigger = 2
	db := openDB(t, t.TempDir(), opts)
	start := now.Load() - int64(3*time.Hour) // on a minute
	var pts []Point
	for i := range 60 {
		pts = append(pts, pt("m", nil, "v", Float(1), start+int64(i)*int64(time.Second)))
	}
	mustWrite(t, db, pts[:30]...)
	mustFlush(t, db)
	mustWrite(t, db, pts[30:]...)
	mustFlush(t, db)

	// Once the compaction has its version: overwrite the bucket's first
	// sample and flush it into a segment of its own.
	hooked := false
	db.testAfterCompactionSnapshot = func() {
		if hooked {
			return
		}
		hooked = true
		mustWrite(t, db, pt("m", nil, "v", Float(100), start))
		mustFlush(t, db)
	}
	if _, err := db.compactOnce(); err != nil {
		t.Fatal(err)
	}
	db.testAfterCompactionSnapshot = nil
	if !hooked {
		t.Fatal("no compaction ran")
	}
	check := func(where string) {
		t.Helper()
		q := Query{Selector: Selector{Measurement: "m", Start: start, End: start + int64(time.Minute)}, Agg: AggCount}
		if got := samplesOf(t, mustQuery(t, db, q)); len(got) != 1 || got[0].Value.Int() != 60 {
			t.Fatalf("%s: count %v, want 60", where, got)
		}
		q.Agg = AggSum
		if got := samplesOf(t, mustQuery(t, db, q)); len(got) != 1 || got[0].Value.Float() != 159 {
			t.Fatalf("%s: sum %v, want 159", where, got)
		}
	}
	check("after the compaction")
	mustCompact(t, db)
	check("after every compaction")
}
