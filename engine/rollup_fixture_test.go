package engine

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/segment"
)

// The rollup fixture, testdata/format_v4_rollup_db, is a small database
// written by this release: segments of format 4 holding rollup blocks with
// their block summaries (10-minute buckets of a float, an int and a uint
// series, and a string series left raw), the catalog and the manifest. A
// future format change that breaks reading them fails
// TestOpenRollupFixture. Regenerate it only when the format changes on
// purpose, keeping the old fixture beside the new one:
//
//	go test ./engine -run TestOpenRollupFixture -update-rollup-fixture
var updateRollupFixture = flag.Bool("update-rollup-fixture", false, "rewrite testdata/format_v4_rollup_db")

const rollupFixtureDir = "testdata/format_v4_rollup_db"

// rollupFixtureBase is the fixture's clock: two hours of one-minute
// samples end at it, and the hour before the last is rolled up.
const rollupFixtureBase = int64(1_800_000_000) * int64(time.Second)

// rollupFixturePoints are the fixture's samples. Floats are quarters, so
// that every sum is exact in any order.
func rollupFixturePoints() []Point {
	var pts []Point
	a := []Tag{{Key: "site", Value: "a"}}
	b := []Tag{{Key: "site", Value: "b"}}
	for i := range int64(120) {
		ts := rollupFixtureBase - 2*hourNs + i*int64(time.Minute)
		pts = append(pts,
			Point{Measurement: "tank", Tags: a, Fields: []Field{
				{Key: "level", Value: Float(float64(i%17)*0.25 - 1)},
				{Key: "count", Value: Int(i*i%23 - 11)},
			}, Time: ts},
			Point{Measurement: "tank", Tags: b, Fields: []Field{{Key: "flow", Value: Uint(uint64(i * 7 % 31))}}, Time: ts})
		if i%30 == 0 {
			pts = append(pts, Point{Measurement: "tank", Tags: a, Fields: []Field{{Key: "note", Value: String(fmt.Sprint("check ", i))}}, Time: ts})
		}
	}
	return pts
}

func rollupFixtureOptions() *Options {
	o := quietOptions()
	o.DisableBackgroundCompaction = true
	o.Now = func() time.Time { return time.Unix(0, rollupFixtureBase) }
	o.Rollups = []RollupRule{{Measurement: "tank", Every: 10 * time.Minute, After: time.Hour}}
	return o
}

// writeRollupFixture writes the fixture database into dir.
func writeRollupFixture(t *testing.T, dir string) {
	db := openDB(t, dir, rollupFixtureOptions())
	mustWrite(t, db, rollupFixturePoints()...)
	mustFlush(t, db)
	mustCompact(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRollupFixture opens the checked-in rollup fixture read-only (it
// changes nothing) and writable, without rules, and checks its answers:
// raw reads give each bucket's last sample then the raw hour, Last the
// newest sample, and aggregates on bucket edges equal those of a database
// of the raw samples; a range that cuts a bucket counts the buckets
// starting in it whole.
func TestOpenRollupFixture(t *testing.T) {
	if *updateRollupFixture {
		if err := os.RemoveAll(rollupFixtureDir); err != nil {
			t.Fatal(err)
		}
		writeRollupFixture(t, rollupFixtureDir)
		// Neither the empty lock file nor the WAL directory, empty after
		// the flush, is part of the format (git keeps no empty directory).
		for _, name := range []string{"LOCK", "wal"} {
			if err := os.Remove(filepath.Join(rollupFixtureDir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The segments are format 4 and hold rollup blocks with summaries.
	segs, err := filepath.Glob(filepath.Join(rollupFixtureDir, "*"+segSuffix))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segments in %s (%v)", rollupFixtureDir, err)
	}
	var blocks, summaries int
	for _, p := range segs {
		if data := mustRead(t, p); data[4] != 4 {
			t.Fatalf("%s is format %d, want 4", p, data[4])
		}
		r, err := segment.Open(nil, p)
		if err != nil {
			t.Fatal(err)
		}
		for i := range r.NumSeries() {
			for _, rm := range r.Series(i).Rollups {
				blocks++
				if rm.Summary != nil {
					summaries++
				}
			}
		}
		r.Close()
	}
	if blocks != 3 || summaries != blocks {
		t.Fatalf("%d rollup blocks, %d with summaries; want 3, all", blocks, summaries)
	}

	// The reference: the same samples, never rolled up.
	ref := openDB(t, t.TempDir(), quietOptions())
	pts := rollupFixturePoints()
	mustWrite(t, ref, pts...)
	every := int64(10 * time.Minute)
	from, bound := rollupFixtureBase-2*hourNs, rollupFixtureBase-hourNs

	check := func(db *DB, where string) {
		t.Helper()
		ctx := context.Background()
		for _, f := range []struct{ site, field string }{{"a", "level"}, {"a", "count"}, {"b", "flow"}, {"a", "note"}} {
			sel := Selector{Measurement: "tank", Tags: []Tag{{Key: "site", Value: f.site}}, Field: f.field, Start: minTime, End: maxTime}
			all := samplesOf(t, mustQuery(t, ref, Query{Selector: sel}))
			var want []Sample
			for _, s := range all {
				// Below the bound, numeric series show the last sample of
				// each 10-minute bucket: the one at minute 9.
				if f.field == "note" || s.Time >= bound || (s.Time-from)%every == every-int64(time.Minute) {
					want = append(want, s)
				}
			}
			if got := samplesOf(t, mustQuery(t, db, Query{Selector: sel})); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: raw read of %s:\n got %v\nwant %v", where, f.field, got, want)
			}
			last, err := db.Last(ctx, sel)
			if err != nil || len(last) != 1 || !reflect.DeepEqual(last[0].Samples, want[len(want)-1:]) {
				t.Fatalf("%s: last of %s = %v (%v), want %v", where, f.field, last, err, want[len(want)-1])
			}
			if f.field == "note" {
				continue
			}
			for _, agg := range []Aggregate{AggCount, AggSum, AggMean, AggMin, AggMax, AggFirst, AggLast} {
				for _, w := range []int64{0, every, hourNs} {
					q := Query{Selector: sel, Agg: agg, Every: w}
					q.Start, q.End = from, rollupFixtureBase
					got, want := mustQuery(t, db, q), mustQuery(t, ref, q)
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("%s: %s:\n got %s\nwant %s", where, formatQuery(q), formatSeries(got), formatSeries(want))
					}
				}
			}
			// A range starting 5 minutes into the first bucket counts the
			// five buckets that start in it whole, then the raw hour.
			q := Query{Selector: sel, Agg: AggCount}
			q.Start, q.End = from+5*int64(time.Minute), rollupFixtureBase
			if got := mustQuery(t, db, q); len(got) != 1 || got[0].Samples[0].Value.Int() != 110 {
				t.Fatalf("%s: count of %s over a cut bucket: %s, want 110", where, f.field, formatSeries(got))
			}
		}
		// Exact figures, independent of the reference.
		q := Query{Selector: Selector{Measurement: "tank", Field: "level", Start: from, End: rollupFixtureBase}, Agg: AggSum}
		var sum float64
		for i := range 120 {
			sum += float64(i%17)*0.25 - 1
		}
		if got := mustQuery(t, db, q); len(got) != 1 || got[0].Samples[0].Value.Float() != sum {
			t.Fatalf("%s: sum of level %s, want %v", where, formatSeries(got), sum)
		}
	}

	dir := filepath.Join(t.TempDir(), "db")
	if err := os.CopyFS(dir, os.DirFS(rollupFixtureDir)); err != nil {
		t.Fatal(err)
	}
	ro := quietOptions()
	ro.ReadOnly = true
	before := dirSnapshot(t, dir)
	db := openDB(t, dir, ro)
	check(db, "read-only")
	db.Close()
	if d := diffSnapshots(before, dirSnapshot(t, dir)); d != "" {
		t.Fatalf("read-only open changed the fixture: %s", d)
	}
	db = openDB(t, dir, quietOptions())
	check(db, "writable")
	mustCompact(t, db)
	check(db, "compacted")
	db = reopen(t, db, dir, quietOptions())
	check(db, "reopened")

	// The fixture is what this release writes: a fresh database of the
	// same samples answers the same.
	fresh := filepath.Join(t.TempDir(), "fresh")
	writeRollupFixture(t, fresh)
	db2 := openDB(t, fresh, quietOptions())
	check(db2, "fresh")
	var names []string
	entries, _ := os.ReadDir(rollupFixtureDir)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	t.Logf("fixture files: %s", strings.Join(names, " "))
}
