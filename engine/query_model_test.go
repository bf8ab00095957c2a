package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/catalog"
)

// smallParts makes db read in parts and windows of 5 samples and sweep
// segments with several workers in Last, so that the model checks those
// paths on small data.
func smallParts(db *DB) *DB {
	db.partSamples = 5
	db.lastParallelMin = 2
	return db
}

// TestQueryModel runs a random workload (overwrites, out-of-order writes,
// deletes with matchers, flushes, compactions, reopens, retention, and a
// field whose kind differs between series) and after every few steps
// compares with a brute-force model: queries with matchers of every op,
// grouped aggregates (missing keys, mixed kinds), selector timestamps,
// Measurements, TagKeys, TagValues, SeriesInfo and Last.
func TestQueryModel(t *testing.T) {
	seqSplits.Store(0)
	scanSplits.Store(0)
	t.Cleanup(func() {
		if seqSplits.Load() == 0 {
			t.Errorf("QuerySeq never yielded a series in parts")
		}
		if scanSplits.Load() == 0 {
			t.Errorf("Scan never yielded a series in runs")
		}
	})
	steps := 260
	if raceEnabled {
		steps = 140
	}
	for _, seed := range []uint64{21, 22, 23, 24} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			opts := &Options{
				Logger:       slog.New(slog.DiscardHandler),
				Sync:         SyncNever,
				BlockSamples: 8,
			}
			if seed%2 == 0 {
				// Retention with a fixed clock: everything before -200µs
				// has expired.
				opts.Now = func() time.Time { return time.Unix(0, 100_000) }
				opts.Retention = 300 * time.Microsecond
			}
			if seed == 23 {
				opts.MemTableBytes = 8 << 10
				opts.L0CompactionTrigger = 2
				opts.TargetSegmentBytes = 4 << 10
			}
			runQueryModel(t, seed, steps, opts)
		})
	}
}

var (
	qmRegexps = []string{"a|b", "c.*", ".*", ".+", "e,f|x", "[ab]", "", "(?i)A", "c d", "a.*|e.*", "b?"}
	qmKeys    = append(slices.Clone(genTagKeys), "zone")
	qmValues  = append(slices.Clone(genTagValues), "", "zz")
)

func (g *gen) matchers() []Matcher {
	var ms []Matcher
	for range g.r.IntN(3) {
		m := Matcher{Key: qmKeys[g.r.IntN(len(qmKeys))], Op: MatchOp(g.r.IntN(4))}
		if m.Op == MatchRegexp || m.Op == MatchNotRegexp {
			m.Value = qmRegexps[g.r.IntN(len(qmRegexps))]
		} else {
			m.Value = qmValues[g.r.IntN(len(qmValues))]
		}
		ms = append(ms, m)
	}
	return ms
}

// qmSelector is g.selector with matchers, and now and then all time.
func (g *gen) qmSelector() Selector {
	sel := g.selector()
	sel.Matchers = g.matchers()
	if g.r.IntN(6) == 0 {
		sel.Start, sel.End = 0, 0
	}
	return sel
}

// qmPoint adds, to some points, a field "n" whose kind depends on the
// series (int, uint or float), so groups mix kinds.
func (g *gen) qmPoint() Point {
	p := g.point()
	if g.r.IntN(3) == 0 && !slices.ContainsFunc(p.Fields, func(f Field) bool { return f.Key == "n" }) {
		h := len(p.Measurement)
		for _, t := range p.Tags {
			h += len(t.Value) * (1 + len(t.Key))
		}
		var v Value
		switch h % 3 {
		case 0:
			v = Int(g.r.Int64N(2001) - 1000)
		case 1:
			v = Uint(g.r.Uint64N(2001))
		default:
			v = Float(float64(g.r.IntN(2001)-1000) / 4)
		}
		p.Fields = append(p.Fields, Field{Key: "n", Value: v})
	}
	return p
}

func runQueryModel(t *testing.T, seed uint64, steps int, opts *Options) {
	r := rand.New(rand.NewPCG(seed, seed*7919+3))
	g := newGen(r)
	dir := t.TempDir()
	m := NewRefModel()
	if opts.Now != nil {
		m.Now, m.Retention = opts.Now().UnixNano(), int64(opts.Retention)
	}
	ctx := context.Background()
	db := smallParts(openDB(t, dir, opts))

	check := func(where string) {
		t.Helper()
		for range 2 {
			sel := g.qmSelector()
			agg := allAggs[1+g.r.IntN(len(allAggs)-1)]
			q := Query{Selector: sel, Agg: agg}
			if g.r.IntN(2) == 0 {
				q.Every = g.every()
			}
			checkQuery(t, db, m, Query{Selector: sel}, minTime, where)
			checkQuery(t, db, m, q, minTime, where)
			q.GroupBy = g.groupBy()
			got, err := db.Query(ctx, q)
			if err != nil {
				t.Fatalf("%s: query %s: %v", where, formatQuery(q), err)
			}
			if d := diffResults(q.Agg, got, m.Query(q)); d != "" {
				t.Fatalf("%s: grouped query %s: %s", where, formatQuery(q), d)
			}
		}
		checkMeta(t, db, m, g.metaSelector(), where)
	}

	var deletes int
	for step := range steps {
		where := fmt.Sprintf("seed %d step %d", seed, step)
		switch x := r.IntN(100); {
		case x < 55:
			pts := make([]Point, 1+r.IntN(10))
			for i := range pts {
				pts[i] = g.qmPoint()
			}
			if m.write(pts) >= 0 {
				if err := db.Write(pts); !errors.Is(err, ErrFieldTypeConflict) {
					t.Fatalf("%s: write with a conflict: %v", where, err)
				}
				break
			}
			if err := db.Write(pts); err != nil {
				t.Fatalf("%s: write: %v", where, err)
			}
		case x < 64:
			sel := g.qmSelector()
			if err := db.Delete(ctx, sel); err != nil {
				t.Fatalf("%s: delete %+v: %v", where, sel, err)
			}
			m.Delete(sel)
			deletes++
		case x < 72:
			mustFlush(t, db)
		case x < 76:
			mustCompact(t, db)
		case x < 80:
			db = smallParts(reopen(t, db, dir, opts))
		default:
			check(where)
		}
	}
	check("end")
	mustCompact(t, db)
	check("end, compacted")
	db = smallParts(reopen(t, db, dir, opts))
	for range 5 {
		check("end, reopened")
	}
	checkMeta(t, db, m, Selector{}, "end, everything")
	if deletes == 0 {
		t.Errorf("no deletes ran")
	}
}

func (g *gen) groupBy() []string {
	if g.r.IntN(4) == 0 {
		return []string{}
	}
	keys := []string{qmKeys[g.r.IntN(len(qmKeys))]}
	if g.r.IntN(2) == 0 {
		keys = append(keys, qmKeys[g.r.IntN(len(qmKeys))])
	}
	return keys
}

func (g *gen) metaSelector() Selector {
	sel := g.qmSelector()
	if g.r.IntN(3) == 0 {
		sel.Measurement = ""
	}
	return sel
}

func checkMeta(t *testing.T, db *DB, m *RefModel, sel Selector, where string) {
	t.Helper()
	ctx := context.Background()

	// SeriesInfo and Last.
	infos, err := db.SeriesInfo(ctx, sel)
	if err != nil {
		t.Fatalf("%s: SeriesInfo %+v: %v", where, sel, err)
	}
	lastGot, err := db.Last(ctx, sel)
	if err != nil {
		t.Fatalf("%s: Last %+v: %v", where, sel, err)
	}
	wantInfos := m.SeriesInfo(sel)
	if !slices.EqualFunc(infos, wantInfos, func(a, b SeriesInfo) bool {
		return a.Measurement == b.Measurement && a.Field == b.Field && a.Kind == b.Kind && slices.Equal(a.Tags, b.Tags)
	}) {
		t.Fatalf("%s: SeriesInfo %+v:\n got %v\nwant %v", where, sel, infos, wantInfos)
	}
	if d := diffResults(AggNone, lastGot, m.Last(sel)); d != "" {
		t.Fatalf("%s: Last %+v: %s", where, sel, d)
	}

	// TagKeys and TagValues.
	gotKeys, err := db.TagKeys(ctx, sel)
	if err != nil {
		t.Fatalf("%s: TagKeys: %v", where, err)
	}
	if want := m.TagKeys(sel); !slices.Equal(gotKeys, want) {
		t.Fatalf("%s: TagKeys %+v: got %q, want %q", where, sel, gotKeys, want)
	}
	for _, k := range qmKeys {
		got, err := db.TagValues(ctx, k, sel)
		if err != nil {
			t.Fatalf("%s: TagValues: %v", where, err)
		}
		if want := m.TagValues(k, sel); !slices.Equal(got, want) {
			t.Fatalf("%s: TagValues %q %+v: got %q, want %q", where, k, sel, got, want)
		}
	}

	// Measurements (all time).
	gotMs, err := db.Measurements(ctx)
	if err != nil {
		t.Fatalf("%s: Measurements: %v", where, err)
	}
	if want := m.Measurements(); !slices.Equal(gotMs, want) {
		t.Fatalf("%s: Measurements: got %q, want %q", where, gotMs, want)
	}
}

// TestMatcherSemantics pins PromQL's rules on a small fixed data set.
func TestMatcherSemantics(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	ctx := context.Background()
	for i, dev := range []string{"dev-1", "dev-10", "xdev-1", "dev-2"} {
		tags := []Tag{{Key: "device", Value: dev}}
		if i%2 == 0 {
			tags = append(tags, Tag{Key: "site", Value: "north"})
		}
		mustWrite(t, db, pt("m", tags, "v", Float(float64(i)), int64(i)))
	}
	mustWrite(t, db, pt("m", nil, "v", Float(9), 9)) // no tags at all
	f := func(ms []Matcher, want ...string) {
		t.Helper()
		res, err := db.Query(ctx, Query{Selector: Selector{Measurement: "m", Matchers: ms}})
		if err != nil {
			t.Fatalf("%v: %v", ms, err)
		}
		var got []string
		for _, s := range res {
			got = append(got, catalog.TagValue(s.Tags, "device"))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: got %q, want %q", ms, got, want)
		}
	}
	f([]Matcher{{Key: "device", Op: MatchRegexp, Value: "dev-1.*"}}, "dev-1", "dev-10")
	f([]Matcher{{Key: "device", Op: MatchNotRegexp, Value: "dev-1.*"}}, "", "dev-2", "xdev-1")
	f([]Matcher{{Key: "site", Op: MatchNotEqual, Value: "north"}}, "", "dev-10", "dev-2")
	f([]Matcher{{Key: "site", Op: MatchEqual, Value: ""}}, "", "dev-10", "dev-2")
	f([]Matcher{{Key: "site", Op: MatchRegexp, Value: ".*"}}, "", "dev-1", "dev-10", "dev-2", "xdev-1")
	f([]Matcher{{Key: "site", Op: MatchRegexp, Value: ".+"}}, "dev-1", "xdev-1")
	f([]Matcher{{Key: "nokey", Op: MatchNotEqual, Value: "x"}}, "", "dev-1", "dev-10", "dev-2", "xdev-1")
	f([]Matcher{{Key: "device", Op: MatchEqual, Value: "dev-1"}, {Key: "site", Op: MatchEqual, Value: "north"}}, "dev-1")

	for _, bad := range []Matcher{{Key: "device", Op: MatchRegexp, Value: "("}, {Key: "", Value: "x"}, {Key: "k", Op: 9}} {
		if _, err := db.Query(ctx, Query{Selector: Selector{Measurement: "m", Matchers: []Matcher{bad}}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("query with %+v: %v, want ErrInvalid", bad, err)
		}
		if err := db.Delete(ctx, Selector{Measurement: "m", Matchers: []Matcher{bad}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("delete with %+v: %v, want ErrInvalid", bad, err)
		}
		if _, err := db.TagValues(ctx, "device", Selector{Matchers: []Matcher{bad}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("TagValues with %+v: %v, want ErrInvalid", bad, err)
		}
	}
	for _, q := range []Query{
		{Selector: Selector{Measurement: "m"}, GroupBy: []string{"site"}},
		{Selector: Selector{Measurement: "m", Start: 5, End: 5}},
		{Selector: Selector{Measurement: "m", Start: 0, End: -1}},
	} {
		if _, err := db.Query(ctx, q); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", formatQuery(q), err)
		}
	}
}

// TestDeleteMatchersPersist checks that a delete by matcher keeps applying
// after the WAL is replayed, after a flush (manifest) and after compaction.
func TestDeleteMatchersPersist(t *testing.T) {
	for _, step := range []string{"replay", "flush", "compact"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			opts := quietOptions()
			db := openDB(t, dir, opts)
			for i := range 6 {
				mustWrite(t, db, pt("m", []Tag{{Key: "d", Value: fmt.Sprint("dev-", i)}}, "v", Int(int64(i)), 10))
			}
			if step != "replay" {
				mustFlush(t, db)
			}
			mustDelete(t, db, Selector{Measurement: "m", Matchers: []Matcher{{Key: "d", Op: MatchRegexp, Value: "dev-[0-2]"}}})
			switch step {
			case "flush":
				mustWrite(t, db, pt("other", nil, "v", Int(1), 1))
				mustFlush(t, db)
			case "compact":
				mustCompact(t, db)
			}
			if step == "replay" {
				db = reopen(t, db, crashCopy(t, dir), opts)
			} else {
				db = reopen(t, db, dir, opts)
			}
			vals, err := db.TagValues(context.Background(), "d", Selector{Measurement: "m"})
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"dev-3", "dev-4", "dev-5"}; !slices.Equal(vals, want) {
				t.Fatalf("after %s: %q, want %q", step, vals, want)
			}
		})
	}
}

// TestAllTimeIncludesMaxInt64 checks that Start == End == 0 selects every
// timestamp, for queries, deletes and Last.
func TestAllTimeIncludesMaxInt64(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	ctx := context.Background()
	mustWrite(t, db, pt("m", nil, "v", Int(1), math.MinInt64), pt("m", nil, "v", Int(2), math.MaxInt64))
	for _, flush := range []bool{false, true} {
		if flush {
			mustFlush(t, db)
		}
		got := samplesOf(t, mustQuery(t, db, Query{Selector: Selector{Measurement: "m"}}))
		if len(got) != 2 || got[1].Time != math.MaxInt64 {
			t.Fatalf("all time: %v", got)
		}
		last, err := db.Last(ctx, Selector{Measurement: "m"})
		if err != nil || len(last) != 1 || last[0].Samples[0].Time != math.MaxInt64 {
			t.Fatalf("Last: %v %v", last, err)
		}
		cnt := samplesOf(t, mustQuery(t, db, Query{Selector: Selector{Measurement: "m"}, Agg: AggCount}))
		if cnt[0].Time != 0 || cnt[0].Value.Int() != 2 {
			t.Fatalf("count over all time: %v", cnt)
		}
		lastAgg := samplesOf(t, mustQuery(t, db, Query{Selector: Selector{Measurement: "m"}, Agg: AggLast}))
		if lastAgg[0].Time != math.MaxInt64 {
			t.Fatalf("AggLast time %d, want the sample's own", lastAgg[0].Time)
		}
	}
	mustDelete(t, db, Selector{Measurement: "m"})
	if res := mustQuery(t, db, Query{Selector: Selector{Measurement: "m"}}); len(res) != 0 {
		t.Fatalf("after an all-time delete: %s", formatSeries(res))
	}
	if ms, _ := db.Measurements(ctx); len(ms) != 0 {
		t.Fatalf("Measurements after deleting everything: %q", ms)
	}
}

// checkSnapshotsReleased checks, after a loop over QuerySeq was broken
// out of, that its snapshot's version reference was dropped: compaction
// works and only the DB's own reference remains.
func checkSnapshotsReleased(t *testing.T, db *DB) {
	t.Helper()
	mustCompact(t, db)
	db.mu.Lock()
	refs := db.mu.v.Refs()
	db.mu.Unlock()
	if refs != 1 {
		t.Fatalf("version has %d references after a broken loop, want 1", refs)
	}
}

// TestQuerySeqStops checks that breaking out of QuerySeq releases the
// snapshot and that results stream in Query's order.
func TestQuerySeqStops(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	for i := range 50 {
		mustWrite(t, db, pt("m", []Tag{{Key: "d", Value: fmt.Sprintf("%02d", i)}}, "v", Int(int64(i)), 1))
	}
	mustFlush(t, db)
	n := 0
	for s, err := range db.QuerySeq(context.Background(), Query{Selector: Selector{Measurement: "m"}}) {
		if err != nil {
			t.Fatal(err)
		}
		if s.Tags[0].Value != fmt.Sprintf("%02d", n) {
			t.Fatalf("result %d is %v", n, s.Tags)
		}
		n++
		if n == 10 {
			break
		}
	}
	checkSnapshotsReleased(t, db)
	for _, err := range db.QuerySeq(context.Background(), Query{Selector: Selector{Measurement: "m", Matchers: []Matcher{{Key: "d", Op: MatchRegexp, Value: "("}}}}) {
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("bad regexp: %v", err)
		}
	}
}

// TestMetadataConcurrent runs the metadata calls, Last and grouped queries
// while another goroutine writes, deletes, flushes and compacts, and checks
// that every answer is well formed (the race detector checks the rest).
func TestMetadataConcurrent(t *testing.T) {
	opts := quietOptions()
	opts.MemTableBytes = 16 << 10
	opts.L0CompactionTrigger = 2
	opts.Sync = SyncNever
	db := openDB(t, t.TempDir(), opts)
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(stop)
		g := newGen(rand.New(rand.NewPCG(77, 78)))
		for i := range 150 {
			if err := db.Write(g.batch()); err != nil && !errors.Is(err, ErrFieldTypeConflict) {
				t.Errorf("write: %v", err)
				return
			}
			switch i % 50 {
			case 10:
				sel := g.qmSelector()
				if err := db.Delete(ctx, sel); err != nil {
					t.Errorf("delete: %v", err)
					return
				}
			case 20:
				if err := db.Flush(); err != nil {
					t.Errorf("flush: %v", err)
					return
				}
			case 30:
				if err := db.Compact(); err != nil {
					t.Errorf("compact: %v", err)
					return
				}
			}
		}
	})
	reads := 0
	for done := false; !done; reads++ {
		select {
		case <-stop:
			done = true
		default:
		}
		ms, err := db.Measurements(ctx)
		if err != nil || !slices.IsSorted(ms) {
			t.Fatalf("Measurements: %q, %v", ms, err)
		}
		for _, k := range genTagKeys {
			vals, err := db.TagValues(ctx, k, Selector{})
			if err != nil || !slices.IsSorted(vals) || slices.Contains(vals, "") {
				t.Fatalf("TagValues %q: %q, %v", k, vals, err)
			}
		}
		last, err := db.Last(ctx, Selector{})
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range last {
			if len(s.Samples) != 1 || (i > 0 && s.Key() <= last[i-1].Key()) {
				t.Fatalf("Last: result %d %s malformed", i, s.Key())
			}
		}
		q := Query{Selector: Selector{Measurement: "cpu"}, Agg: AggCount, GroupBy: []string{"host"}}
		res, err := db.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(res); i++ {
			if res[i].Key() <= res[i-1].Key() {
				t.Fatalf("groups out of order: %s after %s", res[i].Key(), res[i-1].Key())
			}
		}
	}
	wg.Wait()
	if reads < 2 {
		t.Errorf("only %d rounds of reads ran", reads)
	}
}

// TestSumSaturates checks that int and uint sums never wrap, on every path
// (memtable, a segment's block stats, compacted, reopened), that means use
// the exact sum, and that kinds mixed in a group give float64.
func TestSumSaturates(t *testing.T) {
	dir := t.TempDir()
	opts := quietOptions()
	opts.BlockSamples = 4
	db := openDB(t, dir, opts)
	var pts []Point
	for i := range 10 {
		pts = append(pts,
			pt("m", []Tag{{Key: "k", Value: "i"}}, "v", Int(math.MaxInt64-int64(i)), int64(i)),
			pt("m", []Tag{{Key: "k", Value: "n"}}, "v", Int(math.MinInt64+int64(i)), int64(i)),
			pt("m", []Tag{{Key: "k", Value: "u"}}, "v", Uint(math.MaxUint64-uint64(i)), int64(i)),
			pt("m", []Tag{{Key: "k", Value: "x"}}, "v", Int(-3), int64(i)))
	}
	mustWrite(t, db, pts...)
	check := func(where string) {
		t.Helper()
		sum := mustQuery(t, db, Query{Selector: Selector{Measurement: "m"}, Agg: AggSum})
		want := []Value{Int(math.MaxInt64), Int(math.MinInt64), Uint(math.MaxUint64), Int(-30)}
		for i, s := range sum {
			if !s.Samples[0].Value.Equal(want[i]) {
				t.Fatalf("%s: sum of %s = %v, want %v", where, s.Key(), s.Samples[0].Value, want[i])
			}
		}
		mean := mustQuery(t, db, Query{Selector: Selector{Measurement: "m", Matchers: []Matcher{{Key: "k", Op: MatchEqual, Value: "i"}}}, Agg: AggMean})
		if got, want := samplesOf(t, mean)[0].Value.Float(), float64(math.MaxInt64)-4.5; math.Abs(got-want) > 1e4 {
			t.Fatalf("%s: mean %v, want %v", where, got, want)
		}
		// One group mixing int and uint series: float64, exact inputs.
		g := mustQuery(t, db, Query{Selector: Selector{Measurement: "m", Matchers: []Matcher{{Key: "k", Op: MatchRegexp, Value: "n|u"}}},
			Agg: AggMin, GroupBy: []string{}})
		if v := samplesOf(t, g)[0]; v.Value.Kind() != KindFloat || v.Value.Float() != float64(math.MinInt64) || v.Time != 0 {
			t.Fatalf("%s: grouped min of mixed kinds = %v at %d", where, v.Value, v.Time)
		}
	}
	check("memtable")
	mustFlush(t, db)
	check("segment")
	mustCompact(t, db)
	check("compacted")
	db = reopen(t, db, dir, opts)
	check("reopened")
}

// TestQuerySeqPartsBounded checks that a long flushed series comes out of
// QuerySeq in parts of about PartSamples, in order, and whole from Query.
func TestQuerySeqPartsBounded(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	const n = 3*PartSamples + 77
	pts := make([]Point, n)
	for i := range pts {
		pts[i] = pt("m", nil, "v", Int(int64(i)), int64(i))
	}
	mustWrite(t, db, pts...)
	mustFlush(t, db)
	mustWrite(t, db, pt("m", nil, "v", Int(-5), 3)) // an overwrite in the memtable
	q := Query{Selector: Selector{Measurement: "m"}}
	parts, next := 0, int64(0)
	for s, err := range db.QuerySeq(context.Background(), q) {
		if err != nil {
			t.Fatal(err)
		}
		parts++
		if len(s.Samples) == 0 || len(s.Samples) > PartSamples+DefaultBlockSamples {
			t.Fatalf("part %d holds %d samples", parts, len(s.Samples))
		}
		for _, smp := range s.Samples {
			want := next
			if next == 3 {
				want = -5
			}
			if smp.Time != next || smp.Value.Int() != want {
				t.Fatalf("part %d: sample %+v, want time %d value %d", parts, smp, next, want)
			}
			next++
		}
	}
	if next != n || parts < 3 {
		t.Fatalf("%d samples in %d parts, want %d in 3 or more", next, parts, n)
	}
	if res := mustQuery(t, db, q); len(res) != 1 || len(res[0].Samples) != n {
		t.Fatalf("Query: %d series", len(res))
	}
}
