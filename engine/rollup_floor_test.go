package engine

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
)

// TestRollupBucketCutByRetention: when a retention cutoff falls inside a
// rolled-up bucket, the bucket (whose start is below the cutoff) is gone
// for every read at once, as compaction will drop it: a raw read or Last
// does not show its last sample, which lies above the cutoff, before the
// compaction and then lose it after (an answer changing with nothing
// written), and aggregates agree.
func TestRollupBucketCutByRetention(t *testing.T) {
	const sec = int64(time.Second)
	base := int64(1_800_000_000) * sec // on a minute
	var now atomic.Int64
	now.Store(base + 20*60*sec)
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	opts.Now = func() time.Time { return time.Unix(0, now.Load()) }
	opts.Rollups = []RollupRule{{Measurement: "m", Every: time.Minute, After: 5 * time.Minute}}
	db := openDB(t, t.TempDir(), opts)
	var pts []Point
	for s := range int64(20 * 60) {
		pts = append(pts, pt("m", nil, "v", Float(float64(s)), base+s*sec))
	}
	mustWrite(t, db, pts...)
	mustFlush(t, db)
	mustCompact(t, db)
	if st := db.Stats(); st.SamplesRolledUp == 0 {
		t.Fatal("nothing rolled up")
	}
	// A retention rule whose cutoff lies 30 s into the bucket of minute 3
	// (the clock stays: the compaction below rolls up nothing more).
	if err := db.SetRetentionRules([]RetentionRule{{Measurement: "m", Keep: 16*time.Minute + 30*time.Second}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	read := func() ([]Sample, []Sample, int64) {
		t.Helper()
		raw := samplesOf(t, mustQuery(t, db, rawAll("m")))
		last, err := db.Last(ctx, Selector{Measurement: "m", Start: minTime, End: base + 4*60*sec})
		if err != nil {
			t.Fatal(err)
		}
		var l []Sample
		if len(last) == 1 {
			l = last[0].Samples
		}
		agg := mustQuery(t, db, Query{Selector: Selector{Measurement: "m", Start: minTime, End: maxTime}, Agg: AggCount})
		return raw, l, agg[0].Samples[0].Value.Int()
	}
	raw1, last1, count1 := read()
	for _, s := range raw1 {
		if s.Time < base+4*60*sec {
			t.Fatalf("raw read shows %v, of the bucket the cutoff cuts (buckets from minute 4 on are whole)", s)
		}
	}
	if len(last1) != 0 {
		t.Fatalf("Last before minute 4 shows %v, of the bucket the cutoff cuts", last1)
	}
	mustCompact(t, db)
	raw2, last2, count2 := read()
	if !reflect.DeepEqual(raw1, raw2) || !reflect.DeepEqual(last1, last2) || count1 != count2 {
		t.Fatalf("the answers changed with compaction: %d raw samples then %d, last %v then %v, count %d then %d",
			len(raw1), len(raw2), last1, last2, count1, count2)
	}
}
