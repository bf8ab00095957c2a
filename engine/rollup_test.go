package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/xsum"
	"github.com/stratadb/strata/segment"
)

// rollupRules is the model's cascade: every m series 1m after 2h, then
// 10m after 6h; n,host=a 5m after 3h; n,host=b none.
func rollupRules() []RollupRule {
	return []RollupRule{
		{Measurement: "m", Every: time.Minute, After: 2 * time.Hour},
		{Measurement: "n", Matchers: []Matcher{{Key: "host", Op: MatchEqual, Value: "a"}}, Every: 5 * time.Minute, After: 3 * time.Hour},
		{Measurement: "m", Every: 10 * time.Minute, After: 6 * time.Hour},
	}
}

// rollupModelBase is the model's first clock, on an hour.
const rollupModelBase = int64(1_800_000_000) * int64(time.Second)

// rollupClockOptions returns quiet options for the rollup model (no
// background compaction, blocks of 64 samples, no rollup rules yet) whose
// clock is the returned value, set to rollupModelBase.
func rollupClockOptions() (*atomic.Int64, *Options) {
	now := new(atomic.Int64)
	now.Store(rollupModelBase)
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	opts.BlockSamples = 64
	opts.Now = func() time.Time { return time.Unix(0, now.Load()) }
	return now, opts
}

type rollupSeries struct {
	m, host, field string
	kind           Kind
}

var rollupModelSeries = []rollupSeries{
	{"m", "a", "v", KindFloat}, {"m", "b", "v", KindInt}, {"m", "c", "v", KindUint},
	{"m", "a", "s", KindString}, {"n", "a", "v", KindFloat}, {"n", "b", "v", KindFloat},
}

func (s rollupSeries) key() string {
	return string(point.AppendSeriesKey(nil, s.m, []Tag{{Key: "host", Value: s.host}}, s.field))
}

// rollupValue draws a value of kind k. Floats are of mixed magnitudes
// whose sums round differently in every order: the aggregates sum them
// exactly, from samples and buckets alike.
func rollupValue(r *rand.Rand, k Kind) Value {
	switch k {
	case KindFloat:
		return Float(r.NormFloat64() * math.Pow(10, float64(r.IntN(12)-3)))
	case KindInt:
		if r.IntN(50) == 0 {
			return Int(math.MaxInt64 - r.Int64N(10))
		}
		return Int(r.Int64N(2000) - 1000)
	case KindUint:
		if r.IntN(50) == 0 {
			return Uint(math.MaxUint64 - r.Uint64N(10))
		}
		return Uint(r.Uint64N(5000))
	}
	return String(fmt.Sprint(r.IntN(100)))
}

// rollupModel holds every sample written, by series key: rollupProblem
// checks a database against the reference model (RefModel) of them.
type rollupModel map[string][]Sample

// writeSpan writes samples of every series at random times in [from, to)
// to each db and to the model.
func (m rollupModel) writeSpan(t *testing.T, r *rand.Rand, from, to int64, dbs ...*DB) {
	t.Helper()
	var pts []Point
	for _, s := range rollupModelSeries {
		for ts := from + r.Int64N(int64(20*time.Second)); ts < to; ts += 1 + r.Int64N(int64(40*time.Second)) {
			v := rollupValue(r, s.kind)
			pts = append(pts, pt(s.m, []Tag{{Key: "host", Value: s.host}}, s.field, v, ts))
			m[s.key()] = append(m[s.key()], Sample{Time: ts, Value: v})
			if len(pts) == 2000 {
				for _, db := range dbs {
					mustWrite(t, db, pts...)
				}
				pts = pts[:0]
			}
		}
	}
	for _, db := range dbs {
		mustWrite(t, db, pts...)
	}
	for k := range m {
		slices.SortFunc(m[k], func(a, b Sample) int { return cmp.Compare(a.Time, b.Time) })
	}
}

// storedBuckets returns the rollup buckets in db's segments by series key.
func storedBuckets(db *DB) (map[string][]segment.Rollup, error) {
	db.mu.Lock()
	v := db.mu.v
	v.Ref()
	db.mu.Unlock()
	defer db.unrefVersion(v)
	out := map[string][]segment.Rollup{}
	for _, level := range v.Levels {
		for _, h := range level {
			for i := range h.Reader.NumSeries() {
				si := h.Reader.Series(i)
				for b := range si.Rollups {
					rus, err := h.Reader.ReadRollups(si, b, nil)
					if err != nil {
						return nil, err
					}
					out[string(si.Key)] = append(out[string(si.Key)], rus...)
				}
			}
		}
	}
	for k := range out {
		slices.SortFunc(out[k], func(a, b segment.Rollup) int { return cmp.Compare(a.Start, b.Start) })
	}
	return out, nil
}

// refBucket reduces the samples of ss in [start, start+every) the way a
// reader of the raw samples sees them.
func refBucket(ss []Sample, start, every int64) (segment.Rollup, int) {
	r := segment.Rollup{Start: start, Every: every}
	n := 0
	var sum xsum.Acc
	for _, s := range ss {
		if s.Time < start || s.Time >= start+every {
			continue
		}
		n++
		v := s.Value
		if r.Count == 0 {
			r.First, r.FirstT, r.Min, r.MinT, r.Max, r.MaxT = v, s.Time, v, s.Time, v, s.Time
		}
		if valueLess(v, r.Min) {
			r.Min, r.MinT = v, s.Time
		}
		if valueLess(r.Max, v) {
			r.Max, r.MaxT = v, s.Time
		}
		r.Last, r.LastT = v, s.Time
		r.Count++
		switch v.Kind() {
		case KindFloat:
			sum.Add(v.Float())
		case KindInt:
			var a int128
			a.addInt(v.Int())
			r.SumI.Lo, r.SumI.Hi = addLo(r.SumI, a)
		case KindUint:
			var a int128
			a.addUint(v.Uint())
			r.SumI.Lo, r.SumI.Hi = addLo(r.SumI, a)
		}
	}
	r.SumF = sum
	return r, n
}

func addLo(s segment.Int128, a int128) (uint64, int64) {
	x := int128{hi: s.Hi, lo: s.Lo}
	x.add(a)
	return x.lo, x.hi
}

// checkRollups checks db against the model (rollupProblem) and returns
// its buckets.
func checkRollups(t *testing.T, db *DB, m rollupModel, where string) map[string][]segment.Rollup {
	t.Helper()
	got, p := rollupProblem(db, m)
	if p != "" {
		t.Fatalf("%s: %s", where, p)
	}
	return got
}

// rollupProblem checks db against the reference model holding m's
// samples: every stored bucket is the reduction of all the samples in it
// (never half a bucket), no bucket overlaps another (never one twice),
// only series with rules have buckets (RefModel.LearnBuckets and the rules
// here), and raw reads and Last, over the whole range and over one that
// ends inside the rolled-up part, return each bucket's last sample and
// every sample outside buckets (nothing lost, nothing shown both ways).
// It returns the buckets, or what is wrong.
func rollupProblem(db *DB, m rollupModel) (map[string][]segment.Rollup, string) {
	got, err := storedBuckets(db)
	if err != nil {
		return nil, "read buckets: " + err.Error()
	}
	ref := NewRefModel()
	for _, s := range rollupModelSeries {
		key := s.key()
		if len(got[key]) > 0 && (s.kind == KindString || key == (rollupSeries{"n", "b", "v", KindFloat}).key()) {
			return nil, fmt.Sprintf("%s has %d buckets and no rule", key, len(got[key]))
		}
		var pts []Point
		for _, x := range m[key] {
			pts = append(pts, pt(s.m, []Tag{{Key: "host", Value: s.host}}, s.field, x.Value, x.Time))
		}
		if err := ref.Write(pts); err != nil {
			return nil, "model: " + err.Error()
		}
	}
	if p := ref.LearnBuckets(got); p != "" {
		return nil, p
	}
	ctx := context.Background()
	for _, s := range rollupModelSeries {
		if _, ok := m[s.key()]; !ok {
			continue
		}
		for _, end := range []int64{maxTime, rollupModelBase - 8*hourNs} {
			sel := Selector{Measurement: s.m, Tags: []Tag{{Key: "host", Value: s.host}}, Field: s.field, Start: minTime, End: end}
			res, err := db.Query(ctx, Query{Selector: sel})
			if err != nil {
				return nil, "query: " + err.Error()
			}
			if d := diffResults(AggNone, res, ref.Query(Query{Selector: sel})); d != "" {
				return nil, fmt.Sprintf("raw read before %d: %s (%d buckets)", end, d, len(got[s.key()]))
			}
			if res, err = db.Last(ctx, sel); err != nil {
				return nil, "last: " + err.Error()
			}
			if d := diffResults(AggNone, res, ref.Last(sel)); d != "" {
				return nil, fmt.Sprintf("last before %d: %s", end, d)
			}
		}
	}
	return got, ""
}

// checkRollupAggs checks that aggregates on bucket edges equal those of a
// database of the same raw samples without rules, bit for bit.
func checkRollupAggs(t *testing.T, db, raw *DB, from, to int64, where string) {
	t.Helper()
	ctx := context.Background()
	for _, agg := range []Aggregate{AggCount, AggSum, AggMean, AggMin, AggMax, AggFirst, AggLast} {
		for _, every := range []time.Duration{0, 10 * time.Minute, time.Hour, 3 * time.Hour} {
			for _, rg := range [][2]int64{{from, to}, {from + int64(time.Hour), to - 4*int64(time.Hour)}, {minTime, maxTime}} {
				for _, gb := range [][]string{nil, {"host"}} {
					for _, meas := range []string{"m", "n"} {
						q := Query{Selector: Selector{Measurement: meas, Start: rg[0], End: rg[1]}, Agg: agg, Every: int64(every), GroupBy: gb}
						if every == 0 && rg[0] == minTime {
							continue
						}
						got, err := db.Query(ctx, q)
						if err != nil {
							t.Fatalf("%s: %s: %v", where, formatQuery(q), err)
						}
						want, err := raw.Query(ctx, q)
						if err != nil {
							t.Fatalf("%s: %s on raw: %v", where, formatQuery(q), err)
						}
						if !reflect.DeepEqual(got, want) {
							t.Fatalf("%s: %s:\n got %s\nwant %s", where, formatQuery(q), formatSeries(got), formatSeries(want))
						}
					}
				}
			}
		}
	}
}

// TestRollupModel writes random samples to a database with rollup rules
// and to one without, through memtable, flush, compaction (rolling up,
// then cascading after the clock moves on), reopen and a read-only open,
// and checks each state: stored buckets equal the reduction of the raw
// samples, raw reads show each bucket's last sample, and aggregates on
// bucket edges are bit-identical to the raw database's.
func TestRollupModel(t *testing.T) {
	seeds := uint64(3)
	if raceEnabled {
		seeds = 1
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 25))
			base := rollupModelBase
			now, opts := rollupClockOptions()
			ropts := *opts
			opts.Rollups = rollupRules()
			dir := t.TempDir()
			db := openDB(t, dir, opts)
			raw := openDB(t, t.TempDir(), &ropts)
			m := rollupModel{}
			from := base - 12*hourNs
			m.writeSpan(t, r, from, base, db, raw)
			check := func(where string) map[string][]segment.Rollup {
				b := checkRollups(t, db, m, where)
				checkRollupAggs(t, db, raw, from, now.Load(), where)
				return b
			}
			if b := check("memtable"); len(b) != 0 {
				t.Fatalf("memtable: buckets before any compaction")
			}
			mustFlush(t, db)
			mustFlush(t, raw)
			check("flushed")
			mustCompact(t, db)
			b := check("compacted")
			if len(b[rollupModelSeries[0].key()]) == 0 || len(b[rollupModelSeries[4].key()]) == 0 {
				t.Fatalf("compacted: no buckets")
			}
			// A series whose samples in a range are all rolled up is still
			// in it for the metadata calls.
			infos, err := db.SeriesInfo(context.Background(), Selector{Measurement: "m", Field: "v", Start: from, End: from + hourNs})
			if err != nil || len(infos) != 3 {
				t.Fatalf("compacted: SeriesInfo over a rolled-up hour: %d series (%v), want 3", len(infos), err)
			}
			// Everything older than the finest bound is rolled up.
			for _, s := range rollupModelSeries[:3] {
				rus := b[s.key()]
				if last := rus[len(rus)-1]; last.Start+last.Every != point.FloorTime(base-2*hourNs, int64(time.Minute)) {
					t.Fatalf("%s: buckets end at %d, want %d", s.key(), last.Start+last.Every, point.FloorTime(base-2*hourNs, int64(time.Minute)))
				}
				if rus[0].Every != int64(10*time.Minute) {
					t.Fatalf("%s: oldest bucket every %d, want 10m", s.key(), rus[0].Every)
				}
			}
			db = reopen(t, db, dir, opts)
			check("reopened")

			// Later: more data, and the 1m buckets older than 6h cascade.
			now.Store(base + 12*hourNs)
			m.writeSpan(t, r, base, now.Load(), db, raw)
			check("memtable 2")
			mustFlush(t, db)
			mustFlush(t, raw)
			mustCompact(t, raw)
			check("flushed 2")
			mustCompact(t, db)
			b = check("compacted 2")
			for _, s := range rollupModelSeries[:3] {
				for _, ru := range b[s.key()] {
					if ru.Start < point.FloorTime(now.Load()-6*hourNs, int64(10*time.Minute)) && ru.Every != int64(10*time.Minute) {
						t.Fatalf("%s: bucket at %d every %d not cascaded", s.key(), ru.Start, ru.Every)
					}
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			ro := *opts
			ro.ReadOnly = true
			db = openDB(t, dir, &ro)
			check("read-only")
		})
	}
}

// TestSetRollupsValidates checks each kind of bad rule list.
func TestSetRollupsValidates(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	m := func(every, after time.Duration) RollupRule {
		return RollupRule{Measurement: "m", Every: every, After: after}
	}
	for _, tc := range []struct {
		name  string
		rules []RollupRule
		ok    bool
	}{
		{"cascade", []RollupRule{m(time.Minute, time.Hour), m(time.Hour, 24*time.Hour)}, true},
		{"cascade listed coarse first", []RollupRule{m(time.Hour, 24*time.Hour), m(time.Minute, time.Hour)}, true},
		{"other selectors need not cascade", []RollupRule{m(time.Minute, time.Hour), {Measurement: "n", Every: 7 * time.Second, After: time.Minute}}, true},
		{"zero every", []RollupRule{m(0, time.Hour)}, false},
		{"negative every", []RollupRule{m(-time.Minute, time.Hour)}, false},
		{"zero after", []RollupRule{m(time.Minute, 0)}, false},
		{"not a multiple", []RollupRule{m(time.Minute, time.Hour), m(90*time.Second, 2*time.Hour)}, false},
		{"after not increasing", []RollupRule{m(time.Minute, time.Hour), m(time.Hour, time.Hour)}, false},
		{"coarser after shorter", []RollupRule{m(time.Hour, time.Hour), m(time.Minute, 2*time.Hour)}, false},
		{"same every twice", []RollupRule{m(time.Minute, time.Hour), m(time.Minute, 2*time.Hour)}, false},
		{"bad regexp", []RollupRule{{Measurement: "m", Matchers: []Matcher{{Key: "h", Op: MatchRegexp, Value: "("}}, Every: time.Minute, After: time.Hour}}, false},
		{"newline", []RollupRule{{Measurement: "m\n", Every: time.Minute, After: time.Hour}}, false},
	} {
		err := db.SetRollups(tc.rules)
		if tc.ok != (err == nil) {
			t.Errorf("%s: err %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v does not wrap ErrInvalid", tc.name, err)
		}
		o := quietOptions()
		o.Rollups = tc.rules
		o.EnsureDefaults()
		if verr := o.Validate(); (verr == nil) != tc.ok {
			t.Errorf("%s: Options.Validate: %v", tc.name, verr)
		}
	}
	if err := db.SetRollups(nil); err != nil {
		t.Fatal(err)
	}
}

// TestCrashInjectionRollup fails, in turn, each operation on segment,
// manifest and temporary files during compactions that roll up and
// cascade. Reopened without faults, the database holds every sample
// either raw or in exactly one whole bucket: none lost, no bucket shown
// twice or half, aggregates unchanged.
func TestCrashInjectionRollup(t *testing.T) {
	template := t.TempDir()
	base := rollupModelBase
	opts := crashOptions()
	opts.BlockSamples = 16
	opts.TargetSegmentBytes = 2 << 10 // several outputs
	opts.Rollups = rollupRules()
	var now atomic.Int64
	now.Store(base)
	opts.Now = func() time.Time { return time.Unix(0, now.Load()) }
	r := rand.New(rand.NewPCG(7, 25))
	m := rollupModel{}
	db := openDB(t, template, opts)
	ropts := *opts
	ropts.Rollups = nil
	raw := openDB(t, t.TempDir(), &ropts)
	// Three L0 segments, then a compaction that rolls up part, then a
	// later clock under which the next compaction cascades.
	for i := range int64(3) {
		m.writeSpan(t, r, base-8*hourNs+i*2*hourNs, base-6*hourNs+i*2*hourNs, db, raw)
		mustFlush(t, db)
	}
	mustCompact(t, db)
	m.writeSpan(t, r, base-2*hourNs, base, db, raw)
	mustFlush(t, db)
	mustFlush(t, raw)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	now.Store(base + 5*hourNs)
	if p := func() string {
		db := openDB(t, template, opts)
		defer db.Close()
		_, p := rollupProblem(db, m)
		return p
	}(); p != "" {
		t.Fatalf("template: %s", p)
	}

	verify := func(dir string, mustRoll bool) string {
		db, err := Open(dir, opts)
		if err != nil {
			return "reopen: " + err.Error()
		}
		defer db.Close()
		got, p := rollupProblem(db, m)
		if p != "" {
			return p
		}
		if mustRoll {
			for _, s := range rollupModelSeries[:3] {
				var in, old int64
				for _, ru := range got[s.key()] {
					in += ru.Count
				}
				for _, x := range m[s.key()] {
					if x.Time < point.FloorTime(now.Load()-2*hourNs, int64(time.Minute)) {
						old++
					}
				}
				if in != old || in == 0 {
					return fmt.Sprintf("%s: %d samples in buckets, %d older than the bound, after a fault-free compaction", s.key(), in, old)
				}
			}
		}
		ctx := context.Background()
		for _, agg := range []Aggregate{AggCount, AggSum, AggMin, AggMax, AggFirst, AggLast} {
			q := Query{Selector: Selector{Measurement: "m", Start: base - 8*hourNs, End: base}, Agg: agg, Every: int64(time.Hour)}
			got, err := db.Query(ctx, q)
			if err != nil {
				return "query: " + err.Error()
			}
			want, err := raw.Query(ctx, q)
			if err != nil {
				return "raw query: " + err.Error()
			}
			if !reflect.DeepEqual(got, want) {
				return fmt.Sprintf("%s:\n got %s\nwant %s", formatQuery(q), formatSeries(got), formatSeries(want))
			}
		}
		return ""
	}
	n := compactionFaults(t, template, opts, verify)
	t.Logf("%d fault points", n)
}

// TestRollupAcrossABucketSplitByAFlush: a compaction rolls up only below
// the memtable's oldest sample, which may fall inside a bucket; the next
// flush's segment then shares that bucket with the rolled-up segment
// below it, and must still be rolled up with it (it once waited for the
// older segment to fall due on its own, far later).
func TestRollupAcrossABucketSplitByAFlush(t *testing.T) {
	const sec = int64(time.Second)
	base := int64(1_800_000_000) * sec / hourNs * hourNs
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	opts.Now = func() time.Time { return time.Unix(0, base+7*hourNs) }
	opts.Rollups = []RollupRule{{Measurement: "m", Every: time.Minute, After: time.Hour}}
	db := openDB(t, t.TempDir(), opts)
	m := rollupModel{}
	key := rollupModelSeries[0].key()
	write := func(from, to int64) {
		var pts []Point
		for ts := from; ts < to; ts += sec {
			pts = append(pts, pt("m", []Tag{{Key: "host", Value: "a"}}, "v", Float(float64(ts/sec%1000)), ts))
			m[key] = append(m[key], Sample{Time: ts, Value: Float(float64(ts / sec % 1000))})
		}
		mustWrite(t, db, pts...)
	}
	write(base, base+5*hourNs+31*sec)
	mustFlush(t, db)
	write(base+5*hourNs+31*sec, base+7*hourNs)
	mustCompact(t, db) // rolls up below 5h: the memtable starts inside the next bucket
	mustFlush(t, db)
	mustCompact(t, db)
	got := checkRollups(t, db, m, "compacted")
	var in int64
	for _, ru := range got[key] {
		in += ru.Count
	}
	if want := 6 * hourNs / sec; in != want {
		t.Fatalf("%d samples in buckets, want the %d older than the bound", in, want)
	}
}

// TestRollupRewriteEnds checks that compaction stops rewriting a segment
// whose due data it cannot roll up. The segment holds finer buckets that
// are not due and raw samples that are, and newer data elsewhere holds the
// rollup bound below those samples: the rewrite would roll up nothing,
// again and again, so Compact never returned (and background compaction
// spun). Rolling the samples up once the other data joins them works.
func TestRollupRewriteEnds(t *testing.T) {
	const min = int64(time.Minute)
	base := rollupModelBase
	var now atomic.Int64
	now.Store(base)
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	opts.L0CompactionTrigger = 2
	opts.Now = func() time.Time { return time.Unix(0, now.Load()) }
	opts.Rollups = []RollupRule{
		{Measurement: "m", Every: time.Minute, After: 2 * time.Hour},
		{Measurement: "m", Every: 10 * time.Minute, After: 6 * time.Hour},
	}
	db := openDB(t, t.TempDir(), opts)
	write := func(host string, from, to int64) {
		var pts []Point
		for ts := from; ts < to; ts += min {
			pts = append(pts, pt("m", []Tag{{Key: "host", Value: host}}, "v", Float(float64(ts/min%100)), ts))
		}
		mustWrite(t, db, pts...)
	}
	// One L1 segment: a's 1m buckets (not due to become 10m ones before
	// +4h) and b's raw samples (due at about +3h).
	write("a", base-3*hourNs, base-150*min)
	mustFlush(t, db)
	write("b", base+10*min, base+20*min)
	mustFlush(t, db)
	mustCompact(t, db)
	// A newer L0 segment with a sample of b older than b's others.
	write("b", base+5*min, base+6*min)
	mustFlush(t, db)
	now.Store(base + 3*hourNs + 5*min)
	for i := 0; ; i++ {
		did, err := db.compactOnce()
		if err != nil {
			t.Fatal(err)
		}
		if !did {
			break
		}
		if i == 5 {
			t.Fatalf("compaction still rewriting after %d rounds", i+1)
		}
	}
	b, err := storedBuckets(db)
	if err != nil {
		t.Fatal(err)
	}
	key := string(point.AppendSeriesKey(nil, "m", []Tag{{Key: "host", Value: "b"}}, "v"))
	if n := len(b[key]); n != 11 {
		t.Fatalf("b has %d buckets, want its 11 samples rolled up", n)
	}
}

// TestRollupBucketSeenAsItsLastSample checks that raw reads, Last and the
// metadata calls see a rolled-up bucket alike: as its last sample, when
// that lies in the range, and not at all when retention hides it, which it
// does by the bucket's start, as for aggregates and compaction. A bucket
// whose start was below the cutoff and whose last sample was not showed in
// raw reads and Last but not in aggregates, and the metadata calls went
// by the bucket's start where raw reads and Last go by its last sample.
func TestRollupBucketSeenAsItsLastSample(t *testing.T) {
	const min = int64(time.Minute)
	base := rollupModelBase
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	opts.Now = func() time.Time { return time.Unix(0, base) }
	opts.Rollups = []RollupRule{{Measurement: "m", Every: 10 * time.Minute, After: time.Hour}}
	db := openDB(t, t.TempDir(), opts)
	var pts []Point
	for ts := base - 3*hourNs; ts < base-2*hourNs; ts += min {
		pts = append(pts, pt("m", nil, "v", Int(ts/min%60), ts))
	}
	mustWrite(t, db, pts...)
	mustFlush(t, db)
	mustCompact(t, db)
	// Buckets of 10 minutes from -3h, each with its last sample at +9m.
	ctx := context.Background()
	check := func(where string, sel Selector, wantLast int64) {
		t.Helper()
		sel.Measurement = "m"
		var want []Sample
		if wantLast != 0 {
			want = []Sample{{Time: base + wantLast, Value: Int((base + wantLast) / min % 60)}}
		}
		res := mustQuery(t, db, Query{Selector: sel})
		var raw []Sample
		if len(res) == 1 {
			raw = res[0].Samples
		}
		if len(raw) > 0 {
			raw = raw[len(raw)-1:]
		}
		if !reflect.DeepEqual(raw, want) {
			t.Errorf("%s: newest raw sample %v, want %v", where, raw, want)
		}
		last, err := db.Last(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		var lastS []Sample
		if len(last) == 1 {
			lastS = last[0].Samples
		}
		if !reflect.DeepEqual(lastS, want) {
			t.Errorf("%s: Last %v, want %v", where, lastS, want)
		}
		infos, err := db.SeriesInfo(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != len(want) {
			t.Errorf("%s: SeriesInfo lists %d series, want %d", where, len(infos), len(want))
		}
	}
	// A range holding the start of the bucket at -2h50m but not its last
	// sample, then one holding the last sample only.
	check("start only", Selector{Start: base - 170*min, End: base - 162*min}, 0)
	check("last sample only", Selector{Start: base - 162*min, End: base - 160*min}, -161*min)
	// Retention with its cutoff inside the bucket at -3h: the bucket is
	// hidden, its last sample too.
	if err := db.SetRetentionRules([]RetentionRule{{Measurement: "m", Keep: 175 * time.Minute}}); err != nil {
		t.Fatal(err)
	}
	check("cut bucket", Selector{Start: base - 3*hourNs, End: base - 170*min}, 0)
	check("all time", Selector{}, -121*min)
	res := mustQuery(t, db, Query{Selector: Selector{Measurement: "m"}})
	cnt := mustQuery(t, db, Query{Selector: Selector{Measurement: "m"}, Agg: AggCount})
	if n := samplesOf(t, res); len(n) != 5 || samplesOf(t, cnt)[0].Value.Int() != 50 {
		t.Errorf("raw read shows %d buckets, count %v; want the 5 buckets of 50 samples retention keeps", len(n), samplesOf(t, cnt)[0].Value)
	}
}
