package engine

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
)

// TestStatsLevels checks, after many small flushes and Compact, that the
// level structure bounds the segments a query reads (L0 below its trigger,
// levels >= 1 non-overlapping and within their targets), that write
// amplification is reported, and that the data is intact.
func TestStatsLevels(t *testing.T) {
	flushes := 30
	if raceEnabled {
		flushes = 16
	}
	opts := &Options{
		Logger:              slog.New(slog.DiscardHandler),
		Sync:                SyncNever,
		BlockSamples:        32,
		L0CompactionTrigger: 3,
		LevelMultiplier:     2,
		L1TargetBytes:       1 << 10, // small: short blocks are kept in the segment index
		TargetSegmentBytes:  512,
	}
	dir := t.TempDir()
	db := openDB(t, dir, opts)
	m := NewRefModel()
	for f := range flushes {
		var pts []Point
		for s := range 20 {
			for i := range 20 {
				// Series interleave across flushes; later flushes overwrite some samples.
				tm := int64(f*10+i) * 1000
				pts = append(pts, pt("m", []Tag{{Key: "s", Value: fmt.Sprintf("%02d", s)}}, "v", Float(float64(f*1000+s*20+i)), tm))
			}
		}
		mustWrite(t, db, pts...)
		m.write(pts)
		mustFlush(t, db)
	}
	mustCompact(t, db)

	st := db.Stats()
	if st.Compactions == 0 {
		t.Errorf("Compactions = 0 after %d flushes and Compact", flushes)
	}
	if st.SegmentsPerLevel[0] >= opts.L0CompactionTrigger {
		t.Errorf("L0 has %d segments after Compact, trigger %d", st.SegmentsPerLevel[0], opts.L0CompactionTrigger)
	}
	if st.WriteAmplification < 1 {
		t.Errorf("WriteAmplification = %v, want >= 1", st.WriteAmplification)
	}
	if st.CompactionBytesWritten <= 0 || st.FlushedBytes <= 0 {
		t.Errorf("FlushedBytes %d, CompactionBytesWritten %d", st.FlushedBytes, st.CompactionBytesWritten)
	}
	if st.Series != 20 {
		t.Errorf("Series = %d, want 20", st.Series)
	}

	db.mu.Lock()
	v := db.mu.v
	v.Ref()
	db.mu.Unlock()
	levels := infos(v)
	err := checkLevels(v)
	db.unrefVersion(v)
	if err != nil {
		t.Errorf("level invariants: %v", err)
	}
	last := 0
	for l, segs := range levels {
		if len(segs) > 0 {
			last = l
		}
	}
	if last < 2 {
		t.Errorf("only levels up to L%d are used; the test wants a deeper tree (%v)", last, st.SegmentsPerLevel)
	}
	if st.PendingCompactionBytes != 0 {
		t.Errorf("PendingCompactionBytes = %d after Compact", st.PendingCompactionBytes)
	}
	for l := 1; l < maxLevels-1; l++ {
		if target := db.policy.LevelTarget(l); st.BytesPerLevel[l] > target {
			t.Errorf("L%d holds %d bytes after Compact, target %d", l, st.BytesPerLevel[l], target)
		}
	}
	// Every L0 segment plus one per non-empty deeper level, whose segments
	// do not overlap.
	perQuery := len(levels[0])
	for _, segs := range levels[1:] {
		if len(segs) > 0 {
			perQuery++
		}
	}
	if n, bound := perQuery, opts.L0CompactionTrigger-1+last; n > bound {
		t.Errorf("a query may read %d segments, bound %d", n, bound)
	}
	// The query path itself: the segments a read of each series opens.
	snap, err := db.acquireSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	nonEmpty := 0
	for l := 1; l < maxLevels; l++ {
		if len(snap.v.Levels[l]) > 0 {
			nonEmpty++
		}
	}
	r := seriesReader{ctx: context.Background(), db: db, snap: snap}
	for id := range uint64(st.Series) {
		m, _ := db.cat.Meta(id)
		key := []byte(m.Key)
		segs := 0
		for _, src := range r.sources(id, key, minTime, maxTime) {
			if src.seg != nil {
				segs++
			}
		}
		if bound := len(snap.v.Levels[0]) + nonEmpty; segs > bound || segs == 0 {
			t.Errorf("series %s reads %d segments, want 1..%d (L0 %d + %d deeper levels)", key, segs, bound, len(snap.v.Levels[0]), nonEmpty)
		}
	}
	db.releaseSnapshot(snap)
	t.Logf("levels %v bytes %v write amplification %.2f", st.SegmentsPerLevel, st.BytesPerLevel, st.WriteAmplification)
	checkQuery(t, db, m, rawAll("m"), minTime, "after compact")
	checkQuery(t, db, m, Query{Selector: Selector{Measurement: "m", Start: minTime, End: maxTime}, Agg: AggMean, Every: 7000}, minTime, "after compact")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Counters are final once Close has stopped the background work. (The
	// flush goroutine counts a flush after Flush has returned.)
	if st := db.Stats(); st.Flushes != int64(flushes) {
		t.Errorf("Flushes = %d after %d Flush calls", st.Flushes, flushes)
	}
	db = openDB(t, dir, opts)
	checkQuery(t, db, m, rawAll("m"), minTime, "after reopen")
}
