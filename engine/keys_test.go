package engine

import (
	"fmt"
	"testing"
)

// TestNewSeriesKeysOwned: the keys of the series a batch creates are built
// in the writer's scratch buffer, which the next batch reuses; the catalog
// must keep keys of its own. Batch after batch of new series of keys of
// one length (through an Appender, a SampleAppender and Write, batches
// rolled back or refused in between), every key the catalog holds is
// still its series' key, before and after a reopen.
func TestNewSeriesKeysOwned(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir, quietOptions())
	var keys []string
	next := 0
	host := func() []Tag { next++; return hostTag(fmt.Sprintf("h%05d", next)) }
	a := db.Appender()
	sa := db.SampleAppender()
	for round := range 6 {
		for range 40 {
			tags := host()
			mustAppend(t, a, 0, "m", tags, "v", int64(round), Float(1))
			keys = append(keys, SeriesKey("m", tags, "v"))
		}
		mustCommit(t, a)
		// A batch rolled back: its keys are the scratch's again.
		for range 30 {
			mustAppend(t, a, 0, "m", host(), "v", 1, Float(1))
		}
		if err := a.Rollback(); err != nil {
			t.Fatal(err)
		}
		for range 20 {
			tags := host()
			if _, err := sa.Append(0, "m", tags, "v", int64(round), Float(2)); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, SeriesKey("m", tags, "v"))
		}
		if err := sa.Commit(); err != nil {
			t.Fatal(err)
		}
		var pts []Point
		for range 25 {
			tags := host()
			pts = append(pts, pt("m", tags, "v", Float(3), int64(round)))
			keys = append(keys, SeriesKey("m", tags, "v"))
		}
		mustWrite(t, db, pts...)
		// A Write refused at its last point: nothing of it is kept.
		bad := []Point{pt("m", host(), "v", Float(4), 1), pt("m", host(), "v", Int(4), 1)}
		bad[1].Tags = bad[0].Tags
		if err := db.Write(bad); err == nil {
			t.Fatal("a point of two kinds for one series was accepted")
		}
	}
	check := func(db *DB, when string) {
		t.Helper()
		if n := db.cat.Len(); n != len(keys) {
			t.Fatalf("%s: %d series, want %d", when, n, len(keys))
		}
		for _, k := range keys {
			id, ok := db.cat.Lookup(k)
			if !ok {
				t.Fatalf("%s: series %q not found", when, k)
			}
			if m, _ := db.cat.Meta(id); m.Key != k {
				t.Fatalf("%s: series %d holds key %q, want %q", when, id, m.Key, k)
			}
		}
	}
	check(db, "open")
	db = reopen(t, db, dir, quietOptions())
	check(db, "reopened")
}
