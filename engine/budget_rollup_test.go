package engine

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/segment"
)

// ceilTo returns the multiple of every at or above t.
func ceilTo(t, every int64) int64 {
	f := point.FloorTime(t, every)
	if f == t {
		return t
	}
	return addSat(f, every)
}

// budgetRollupProblem checks db, which rolls up the float field "v" of
// measurement "sensor" to buckets of every and keeps a disk budget,
// against model (every sample written, by series key). With floor the
// expiry floor it reports:
//   - every bucket starting at or after the floor is the exact reduction of
//     every sample written in it (never half a bucket), and no two overlap;
//   - a raw read returns each such bucket's last sample and every sample
//     at or after the floor outside the buckets (nothing shown twice,
//     nothing lost), except that the samples of the bucket the floor cuts
//     went with it: there, each sample returned is one written;
//   - buckets starting below the floor, not yet removed from their
//     segments, are not shown.
//
// It returns the floor, the buckets shown and what is wrong.
func budgetRollupProblem(db *DB, model map[string][]Sample, every int64) (int64, map[string][]segment.Rollup, string) {
	floor := db.Stats().OldestKept
	stored, err := storedBuckets(db)
	if err != nil {
		return 0, nil, "read buckets: " + err.Error()
	}
	shown := map[string][]segment.Rollup{}
	res, err := db.Query(context.Background(), Query{Selector: Selector{Measurement: "sensor", Field: "v", Start: minTime, End: maxTime}})
	if err != nil {
		return 0, nil, "query: " + err.Error()
	}
	got := map[string][]Sample{}
	for _, s := range res {
		got[s.Key()] = s.Samples
	}
	for key, ss := range model {
		all := stored[key]
		var rus []segment.Rollup
		for _, ru := range all {
			if ru.Every != every {
				return 0, nil, fmt.Sprintf("%s: bucket at %d every %d, want %d", key, ru.Start, ru.Every, every)
			}
			if ru.Start >= floor {
				rus = append(rus, ru)
			}
		}
		shown[key] = rus
		for i, ru := range rus {
			if i > 0 && ru.Start < rus[i-1].Start+rus[i-1].Every {
				return 0, nil, fmt.Sprintf("%s: bucket at %d overlaps the one at %d", key, ru.Start, rus[i-1].Start)
			}
			want, _ := refBucket(ss, ru.Start, ru.Every)
			if ru.SumF.Float64() != want.SumF.Float64() || ru.Count != want.Count ||
				ru.First != want.First || ru.Last != want.Last || ru.Min != want.Min || ru.Max != want.Max ||
				ru.FirstT != want.FirstT || ru.LastT != want.LastT || ru.MinT != want.MinT || ru.MaxT != want.MaxT {
				return 0, nil, fmt.Sprintf("%s bucket %d (floor %d):\n got %+v\nwant %+v", key, ru.Start, floor, ru, want)
			}
		}
		// The bucket the floor cuts: its samples at or after the floor
		// may be gone with it, or still raw.
		cutLo, cutHi := floor, ceilTo(floor, every)
		inStored := func(t int64) bool {
			for _, ru := range all {
				if ru.Start <= t && t < ru.Start+ru.Every {
					return true
				}
			}
			return false
		}
		var want []Sample
		j := 0
		for _, x := range ss {
			if x.Time < floor {
				continue
			}
			for j < len(rus) && rus[j].Start+rus[j].Every <= x.Time {
				want = append(want, Sample{Time: rus[j].LastT, Value: rus[j].Last})
				j++
			}
			if (j < len(rus) && rus[j].Start <= x.Time) || inStored(x.Time) || x.Time < cutHi {
				continue
			}
			want = append(want, x)
		}
		for ; j < len(rus); j++ {
			want = append(want, Sample{Time: rus[j].LastT, Value: rus[j].Last})
		}
		var rest []Sample
		for _, x := range got[key] {
			if x.Time >= cutLo && x.Time < cutHi && !inStored(x.Time) {
				if i := findSample(ss, x.Time); i < 0 || ss[i] != x {
					return 0, nil, fmt.Sprintf("%s: sample %v in the bucket the floor %d cuts was never written", key, x, floor)
				}
				continue
			}
			rest = append(rest, x)
		}
		if !reflect.DeepEqual(rest, want) {
			return 0, nil, fmt.Sprintf("raw read of %s (floor %d): %d samples, want %d (%d buckets); first got %v, want %v",
				key, floor, len(rest), len(want), len(rus), firstOf(rest), firstOf(want))
		}
	}
	return floor, shown, ""
}

func findSample(ss []Sample, t int64) int {
	for i := range ss {
		if ss[i].Time == t {
			return i
		}
	}
	return -1
}

func firstOf(ss []Sample) any {
	if len(ss) == 0 {
		return nil
	}
	return ss[0]
}

// budgetRollupAggs checks aggregates from the first whole 10-bucket window
// at or after the floor against raw, which holds every sample written.
func budgetRollupAggs(db, raw *DB, floor, every, end int64) string {
	ctx := context.Background()
	from := ceilTo(max(floor, 0), 10*every)
	for _, agg := range []Aggregate{AggCount, AggSum, AggMin, AggMax, AggFirst, AggLast, AggMean} {
		for _, w := range []int64{10 * every, 0} {
			q := Query{Selector: Selector{Measurement: "sensor", Field: "v", Start: from, End: end}, Agg: agg, Every: w, GroupBy: []string{"dev"}}
			got, err := db.Query(ctx, q)
			if err != nil {
				return formatQuery(q) + ": " + err.Error()
			}
			want, err := raw.Query(ctx, q)
			if err != nil {
				return formatQuery(q) + " on raw: " + err.Error()
			}
			if !reflect.DeepEqual(got, want) {
				return fmt.Sprintf("%s:\n got %s\nwant %s", formatQuery(q), formatSeries(got), formatSeries(want))
			}
		}
	}
	return ""
}

// TestDiskBudgetWithRollups writes three times the disk budget to a
// database that also rolls its floats up to one-minute buckets after ten
// minutes, flushing and compacting after every 100 seconds (so that the
// layout the budget sees does not hang on the flusher's timing): the
// directory never passes 1.1x the budget, the budget's floor rises, and
// every state keeps the newest data whole, buckets equal to the reduction
// of the samples written, nothing shown twice or half
// (budgetRollupProblem), and aggregates above the floor equal those of a
// database of every sample.
func TestDiskBudgetWithRollups(t *testing.T) {
	const limit = 1 << 20
	const devices = 8
	const sec = int64(time.Second)
	every := int64(time.Minute)
	dir := t.TempDir()
	var now atomic.Int64
	opts := budgetOptions(limit)
	opts.DisableBackgroundCompaction = true
	opts.Now = func() time.Time { return time.Unix(0, now.Load()) }
	opts.Rollups = []RollupRule{{Measurement: "sensor", Every: time.Minute, After: 10 * time.Minute}}
	db := openDB(t, dir, opts)
	ropts := quietOptions()
	ropts.Sync = SyncNever
	raw := openDB(t, t.TempDir(), ropts)
	rng := rand.New(rand.NewPCG(5, 25))
	model := map[string][]Sample{}
	var written, peak int64
	ts := int64(1_800_000_000) * sec
	start := ts
	rounds := 0
	for written < 3*limit {
		for range 100 {
			pts := budgetBatch(rng, devices, ts, true)
			for _, p := range pts {
				key := string(point.AppendSeriesKey(nil, p.Measurement, p.Tags, "v"))
				model[key] = append(model[key], Sample{Time: ts, Value: p.Fields[0].Value})
			}
			mustWrite(t, db, pts...)
			mustWrite(t, raw, pts...)
			ts += sec
			now.Store(ts)
		}
		peak = max(peak, dirBytes(t, dir))
		mustFlush(t, db)
		mustCompact(t, db)
		written = db.Stats().FlushedBytes
		size := dirBytes(t, dir)
		peak = max(peak, size)
		if size > limit*11/10 {
			st := db.Stats()
			t.Fatalf("directory at %d bytes after %d bytes flushed, past 1.1x the budget of %d (disk %d, wal %d, levels %v, floor %d)",
				size, written, limit, st.DiskBytes, st.WALBytes, st.BytesPerLevel, st.OldestKept)
		}
		rounds++
		if rounds%10 == 0 {
			if _, _, p := budgetRollupProblem(db, model, every); p != "" {
				t.Fatalf("round %d: %s", rounds, p)
			}
		}
	}
	mustFlush(t, db)
	mustCompact(t, db)
	check := func(where string, db *DB) {
		t.Helper()
		floor, shown, p := budgetRollupProblem(db, model, every)
		if p != "" {
			t.Fatalf("%s: %s", where, p)
		}
		if floor <= start || floor >= ts {
			t.Fatalf("%s: floor %d, want inside (%d, %d): the budget never dropped", where, floor, start, ts)
		}
		n := 0
		for _, rus := range shown {
			n += len(rus)
		}
		if n == 0 {
			t.Fatalf("%s: no buckets above the floor", where)
		}
		// The newest ten minutes are raw and whole.
		res := mustQuery(t, db, Query{Selector: Selector{Measurement: "sensor", Field: "v", Start: ts - 10*60*sec, End: maxTime}})
		if len(res) != devices {
			t.Fatalf("%s: %d series in the newest ten minutes", where, len(res))
		}
		for _, s := range res {
			if len(s.Samples) != 600 || s.Samples[599].Time != ts-sec {
				t.Fatalf("%s: %s: %d samples in the newest ten minutes, want 600", where, s.Key(), len(s.Samples))
			}
		}
		if p := budgetRollupAggs(db, raw, floor, every, ts); p != "" {
			t.Fatalf("%s: %s", where, p)
		}
	}
	check("compacted", db)
	st := db.Stats()
	t.Logf("wrote %d s (%d rounds), %d bytes flushed; directory %d bytes (peak %d, budget %d); floor at %d s of %d; %d samples rolled up into %+v",
		(ts-start)/sec, rounds, written, dirBytes(t, dir), peak, limit, (st.OldestKept-start)/sec, (ts-start)/sec, st.SamplesRolledUp, st.RollupLevels)
	if st.SamplesRolledUp == 0 {
		t.Fatalf("nothing rolled up")
	}
	db = reopen(t, db, dir, opts)
	check("reopened", db)
	db.Close()
	ro := opts.Clone()
	ro.ReadOnly = true
	check("read-only", openDB(t, dir, ro))
}

// TestCrashInjectionBudgetDropWithRollups fails, in turn, each operation
// on segment, manifest and temporary files during a compaction that
// enforces the disk budget over segments holding rollup buckets (and rolls
// up more). Reopened without faults, the database passes
// budgetRollupProblem: every bucket shown whole and exact, nothing shown
// twice or half, nothing above the floor lost; the fault-free run drops.
func TestCrashInjectionBudgetDropWithRollups(t *testing.T) {
	const devices, seconds = 4, 1200
	const sec = int64(time.Second)
	every := int64(time.Minute)
	template := t.TempDir()
	base := int64(1_800_000_000) * sec
	var now atomic.Int64
	now.Store(base + 4*60*sec)
	opts := crashOptions()
	opts.BlockSamples = 16
	opts.TargetSegmentBytes = 2 << 10 // several outputs
	opts.Now = func() time.Time { return time.Unix(0, now.Load()) }
	opts.Rollups = []RollupRule{{Measurement: "sensor", Every: time.Minute, After: 2 * time.Minute}}
	db := openDB(t, template, opts)
	model := map[string][]Sample{}
	rng := rand.New(rand.NewPCG(9, 25))
	write := func(from, to int64) {
		for s := from; s < to; s++ {
			pts := make([]Point, devices)
			for d := range pts {
				v := Float(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(8)-2)))
				pts[d] = pt("sensor", []Tag{{Key: "dev", Value: fmt.Sprint(d)}}, "v", v, base+s*sec)
				key := string(point.AppendSeriesKey(nil, "sensor", pts[d].Tags, "v"))
				model[key] = append(model[key], Sample{Time: base + s*sec, Value: v})
			}
			mustWrite(t, db, pts...)
		}
		mustFlush(t, db)
	}
	// Rolled up: the first four minutes, compacted. Then three more L0
	// segments to the end, under a clock that rolls up more of them.
	write(0, 300)
	mustCompact(t, db)
	for i := range int64(3) {
		write(300+i*300, 600+i*300)
	}
	now.Store(base + seconds*sec)
	if _, b, p := budgetRollupProblem(db, model, every); p != "" || len(b) == 0 {
		t.Fatalf("template: %d series with buckets; %s", len(b), p)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	limit := dirBytes(t, template) * 3 / 4
	t.Logf("template %d bytes, budget %d", dirBytes(t, template), limit)

	verify := func(dir string, mustDrop bool) string {
		o := *opts
		o.MaxDiskBytes = limit
		db, err := Open(dir, &o)
		if err != nil {
			return "reopen: " + err.Error()
		}
		defer db.Close()
		floor, b, p := budgetRollupProblem(db, model, every)
		if p != "" {
			return p
		}
		if mustDrop {
			n := 0
			for _, rus := range b {
				n += len(rus)
			}
			if floor <= base || n == 0 {
				return fmt.Sprintf("after a fault-free compaction: floor %d (base %d), %d buckets shown", floor, base, n)
			}
		}
		return ""
	}
	bo := *opts
	bo.MaxDiskBytes = limit
	n := compactionFaults(t, template, &bo, verify)
	t.Logf("%d fault points", n)
}
