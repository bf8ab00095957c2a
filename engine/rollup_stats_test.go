package engine

import (
	"github.com/stratadb/strata/internal/point"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stratadb/strata/segment"
)

// wantRollupLevels reduces stored buckets to what Stats.RollupLevels
// should say of them.
func wantRollupLevels(b map[string][]segment.Rollup) []RollupLevelStats {
	var out []RollupLevelStats
	for _, rus := range b {
		for _, ru := range rus {
			out = addRollupLevel(out, RollupLevelStats{Every: time.Duration(ru.Every), Buckets: 1, End: ru.Start + ru.Every})
		}
	}
	return out
}

func sameLevels(a, b []RollupLevelStats) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRollupStats checks the rollup counters and levels of Stats against
// the model's buckets: samples rolled up, buckets written and cascaded,
// compactions that rolled up, and per Every the buckets held and where
// the newest ends; the levels survive a reopen (read from the segments),
// the counters start over.
func TestRollupStats(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 25))
	base := rollupModelBase
	now, opts := rollupClockOptions()
	opts.Rollups = rollupRules()
	dir := t.TempDir()
	db := openDB(t, dir, opts)
	m := rollupModel{}
	m.writeSpan(t, r, base-12*hourNs, base, db)
	if st := db.Stats(); st.RollupCompactions != 0 || st.SamplesRolledUp != 0 || st.RollupBucketsWritten != 0 || len(st.RollupLevels) != 0 {
		t.Fatalf("before any compaction: %+v", st)
	}
	mustFlush(t, db)
	mustCompact(t, db)
	b := checkRollups(t, db, m, "compacted")

	// Samples rolled up: those of each rule's series before its finest
	// bound (m: 1m after 2h; n,host=a: 5m after 3h).
	var rolled int64
	for _, s := range rollupModelSeries {
		var before int64
		switch {
		case s.kind == KindString:
			continue
		case s.m == "m":
			before = point.FloorTime(base-2*hourNs, int64(time.Minute))
		case s.host == "a":
			before = point.FloorTime(base-3*hourNs, int64(5*time.Minute))
		default:
			continue
		}
		for _, x := range m[s.key()] {
			if x.Time < before {
				rolled++
			}
		}
	}
	var buckets int64
	for _, rus := range b {
		buckets += int64(len(rus))
	}
	st := db.Stats()
	if st.Compactions != 1 {
		t.Fatalf("%d compactions, want 1 (the counts below assume one)", st.Compactions)
	}
	if st.RollupCompactions != 1 || st.SamplesRolledUp != rolled || st.RollupBucketsWritten != buckets || st.RollupBucketsCascaded != 0 {
		t.Fatalf("after one compaction: %d rollup compactions, %d samples rolled up, %d buckets written, %d cascaded; want 1, %d, %d, 0",
			st.RollupCompactions, st.SamplesRolledUp, st.RollupBucketsWritten, st.RollupBucketsCascaded, rolled, buckets)
	}
	want := wantRollupLevels(b)
	if len(want) != 3 || !sameLevels(st.RollupLevels, want) {
		t.Fatalf("levels %+v, want %+v (1m, 5m and 10m)", st.RollupLevels, want)
	}
	if end := want[0].End; end != point.FloorTime(base-2*hourNs, int64(time.Minute)) {
		t.Fatalf("the 1m buckets end at %d, want the rule's bound %d", end, point.FloorTime(base-2*hourNs, int64(time.Minute)))
	}

	// Later: the 1m buckets older than 6h cascade into 10m ones.
	now.Store(base + 12*hourNs)
	m.writeSpan(t, r, base, now.Load(), db)
	mustFlush(t, db)
	before := db.Stats()
	mustCompact(t, db)
	b = checkRollups(t, db, m, "compacted 2")
	st = db.Stats()
	if st.RollupCompactions <= before.RollupCompactions || st.SamplesRolledUp <= before.SamplesRolledUp ||
		st.RollupBucketsWritten <= before.RollupBucketsWritten || st.RollupBucketsCascaded == 0 {
		t.Fatalf("after the cascade: %+v (before it %+v)", st, before)
	}
	want = wantRollupLevels(b)
	if !sameLevels(st.RollupLevels, want) {
		t.Fatalf("levels after the cascade %+v, want %+v", st.RollupLevels, want)
	}

	db = reopen(t, db, dir, opts)
	st = db.Stats()
	if st.RollupCompactions != 0 || st.SamplesRolledUp != 0 || !sameLevels(st.RollupLevels, want) {
		t.Fatalf("reopened: %d rollup compactions, %d samples rolled up, levels %+v (want %+v)", st.RollupCompactions, st.SamplesRolledUp, st.RollupLevels, want)
	}
	if err := db.SetRollups(nil); err != nil {
		t.Fatal(err)
	}
	if st := db.Stats(); st.RollupLevels != nil {
		t.Fatalf("levels with no rules: %+v", st.RollupLevels)
	}
}
