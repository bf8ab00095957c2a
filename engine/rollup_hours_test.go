package engine

import (
	"context"
	"reflect"
	"testing"
	"time"
)

// TestRollupHoursQueries writes two days of 10 s samples of each numeric
// kind to a database that rolls up to 1-minute buckets after 6 hours
// and to one without rules, and checks that hourly and coarser
// aggregates over ranges on hours and on other minutes (a rolled-up
// bucket counts whole, so a range that cuts one answers differently from
// the raw samples, as documented), before and after a
// delete of 90 minutes, answer the same bits from both, and that hourly
// ones fold hour summaries instead of decoding every rollup block.
func TestRollupHoursQueries(t *testing.T) {
	const sec = int64(time.Second)
	const hour = 3600 * sec
	start := int64(1_800_000_000)*sec/(24*hour)*(24*hour) + 7*60*sec
	end := start + 48*hour
	now := func() time.Time { return time.Unix(0, end) }
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	opts.Now = now
	ropts := *opts
	opts.Rollups = []RollupRule{{Measurement: "m", Every: time.Minute, After: 6 * time.Hour}}
	db := openDB(t, t.TempDir(), opts)
	raw := openDB(t, t.TempDir(), &ropts)
	var pts []Point
	for ts := start; ts < end; ts += 10 * sec {
		k := ts / sec
		pts = append(pts,
			pt("m", []Tag{{Key: "k", Value: "f"}}, "v", Float(float64((k*7919)%2000-1000)/100), ts),
			pt("m", []Tag{{Key: "k", Value: "i"}}, "v", Int((k*104729)%20001-10000), ts),
			pt("m", []Tag{{Key: "k", Value: "u"}}, "v", Uint(uint64(k*31)%7777), ts))
	}
	for _, d := range []*DB{db, raw} {
		if err := d.Write(pts); err != nil {
			t.Fatal(err)
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := d.Compact(); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		for _, r := range []struct{ from, to int64 }{
			{start, end},
			{start, end - 6*hour},
			{start - start%hour + 3*hour, end - end%hour - 7*hour - 1},
			{start + 5*hour + 17*60*sec, end - 9*hour + 3*60*sec - 1},
		} {
			for _, every := range []time.Duration{time.Hour, 2 * time.Hour, 24 * time.Hour, 0} {
				for _, agg := range []Aggregate{AggMean, AggSum, AggCount, AggMin, AggMax, AggFirst, AggLast} {
					q := Query{Selector: Selector{Measurement: "m", Field: "v", Start: r.from, End: r.to}, Agg: agg, Every: int64(every)}
					want, err := raw.Query(context.Background(), q)
					if err != nil {
						t.Fatal(err)
					}
					pushed := db.st.blocksPushedDown.Load()
					got, err := db.Query(context.Background(), q)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("%s: %v every %v over %d..%d:\n got %v\nwant %v", when, agg, every, r.from, r.to, got, want)
					}
					// The 42 rolled-up hours: folded from hour summaries
					// (one count a rollup block), not bucket by bucket.
					if n := db.st.blocksPushedDown.Load() - pushed; every == time.Hour && r.from == start && r.to == end-6*hour && n < 2 {
						t.Fatalf("%s: %v hourly folded %d blocks from summaries", when, agg, n)
					}
				}
			}
		}
	}
	check("rolled up")
	del := Selector{Measurement: "m", Start: start + 20*hour + 30*60*sec, End: start + 22*hour - 1}
	for _, d := range []*DB{db, raw} {
		if err := d.Delete(context.Background(), del); err != nil {
			t.Fatal(err)
		}
	}
	check("deleted, tombstone pending")
	for _, d := range []*DB{db, raw} {
		if err := d.Compact(); err != nil {
			t.Fatal(err)
		}
	}
	check("deleted, compacted")
}
