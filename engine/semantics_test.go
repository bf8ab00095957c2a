package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"testing"
	"time"
)

// otherKind returns a kind different from k.
func otherKind(k Kind) Kind { return Kind(int(k)%5 + 1) }

func sampleValue(k Kind) Value {
	switch k {
	case KindFloat:
		return Float(1.5)
	case KindInt:
		return Int(-2)
	case KindUint:
		return Uint(3)
	case KindBool:
		return Bool(true)
	}
	return String("x")
}

// checkKinds writes, for every series of the model, a value of another kind
// and expects ErrFieldTypeConflict: the kinds are still known to the DB.
func checkKinds(t testing.TB, db *DB, m *RefModel, where string) {
	t.Helper()
	for key, s := range m.series {
		p := pt(s.measurement, s.tags, s.field, sampleValue(otherKind(s.kind)), 1)
		if err := db.Write([]Point{p}); !errors.Is(err, ErrFieldTypeConflict) {
			t.Fatalf("%s: writing %v to %q (a %v series) returned %v, want ErrFieldTypeConflict",
				where, p.Fields[0].Value.Kind(), key, s.kind, err)
		}
	}
}

// TestFieldKindPersists checks that a series' kind stays fixed after a
// flush, a reopen, and after its samples were deleted and compacted away.
func TestFieldKindPersists(t *testing.T) {
	dir := t.TempDir()
	opts := quietOptions()
	db := openDB(t, dir, opts)
	host := []Tag{{Key: "host", Value: "a"}}
	mustWrite(t, db, pt("m", host, "v", Float(1), 10), pt("m", host, "n", Uint(1), 10))
	conflict := func(where string) {
		t.Helper()
		if err := db.Write([]Point{pt("m", host, "v", Int(1), 11)}); !errors.Is(err, ErrFieldTypeConflict) {
			t.Fatalf("%s: int into a float series returned %v", where, err)
		}
		if err := db.Write([]Point{pt("m", host, "n", Float(1), 11)}); !errors.Is(err, ErrFieldTypeConflict) {
			t.Fatalf("%s: float into a uint series returned %v", where, err)
		}
	}
	conflict("memtable")
	mustFlush(t, db)
	conflict("after flush")
	db = reopen(t, db, dir, opts)
	conflict("after reopen")
	mustDelete(t, db, Selector{Measurement: "m", Start: minTime, End: maxTime})
	if res := mustQuery(t, db, rawAll("m")); len(res) != 0 {
		t.Fatalf("after delete: %s", formatSeries(res))
	}
	conflict("after delete")
	mustFlush(t, db)
	mustCompact(t, db)
	conflict("after delete and compact")
	db = reopen(t, db, dir, opts)
	conflict("after delete, compact and reopen")

	// A series whose every sample was deleted before its first flush.
	mustWrite(t, db, pt("z", nil, "v", Bool(true), 1))
	mustDelete(t, db, Selector{Measurement: "z", Start: minTime, End: maxTime})
	mustFlush(t, db)
	db = reopen(t, db, dir, opts)
	if err := db.Write([]Point{pt("z", nil, "v", String("s"), 2)}); !errors.Is(err, ErrFieldTypeConflict) {
		t.Fatalf("deleted-before-flush series lost its kind: %v", err)
	}
	// The same through a crash: the series lives in the WAL only.
	mustWrite(t, db, pt("w", nil, "v", String("s"), 1))
	mustDelete(t, db, Selector{Measurement: "w", Start: minTime, End: maxTime})
	crashed := openDB(t, crashCopy(t, dir), opts)
	if err := crashed.Write([]Point{pt("w", nil, "v", Int(1), 2)}); !errors.Is(err, ErrFieldTypeConflict) {
		t.Fatalf("after crash: %v", err)
	}
	if err := crashed.Write([]Point{pt("z", nil, "v", Float(1), 2)}); !errors.Is(err, ErrFieldTypeConflict) {
		t.Fatalf("after crash: %v", err)
	}
	// The right kinds still go in.
	mustWrite(t, crashed, pt("m", host, "v", Float(2), 12), pt("w", nil, "v", String("t"), 3), pt("z", nil, "v", Bool(false), 3))
}

// TestDeleteSemantics checks that a delete removes what was written before
// it and keeps later writes into its range, wherever the old and new data
// live (memtable or segment), through compaction and reopen.
func TestDeleteSemantics(t *testing.T) {
	for _, oldInSeg := range []bool{false, true} {
		for _, newInSeg := range []bool{false, true} {
			t.Run(fmt.Sprintf("oldFlushed=%v/newFlushed=%v", oldInSeg, newInSeg), func(t *testing.T) {
				dir := t.TempDir()
				opts := quietOptions()
				opts.BlockSamples = 4
				db := openDB(t, dir, opts)
				m := NewRefModel()
				write := func(pts ...Point) {
					t.Helper()
					mustWrite(t, db, pts...)
					m.write(pts)
				}
				del := func(sel Selector) {
					t.Helper()
					mustDelete(t, db, sel)
					m.delete(sel)
				}
				check := func(where string) {
					t.Helper()
					for _, meas := range []string{"m", "o"} {
						checkQuery(t, db, m, rawAll(meas), minTime, where)
						for _, agg := range allAggs[1:] {
							checkQuery(t, db, m, Query{Selector: Selector{Measurement: meas, Start: -5, End: 200}, Agg: agg}, minTime, where)
							checkQuery(t, db, m, Query{Selector: Selector{Measurement: meas, Start: -5, End: 200}, Agg: agg, Every: 4}, minTime, where)
						}
					}
				}
				a, b := []Tag{{Key: "host", Value: "a"}}, []Tag{{Key: "host", Value: "b"}}
				for i := range int64(10) {
					write(Point{Measurement: "m", Tags: a, Fields: []Field{{Key: "v", Value: Float(float64(i))}, {Key: "w", Value: Int(i)}}, Time: i},
						Point{Measurement: "m", Tags: b, Fields: []Field{{Key: "v", Value: Float(float64(-i))}}, Time: i},
						pt("o", a, "v", Float(float64(i)), i))
				}
				if oldInSeg {
					mustFlush(t, db)
				}
				del(Selector{Measurement: "m", Tags: a, Start: 3, End: 7})             // v and w of host=a
				del(Selector{Measurement: "m", Field: "v", Tags: b, Start: 8, End: 9}) // one sample of host=b
				del(Selector{Measurement: "m", Field: "w", Start: 0, End: 2})          // w only
				del(Selector{Measurement: "m", Tags: []Tag{{Key: "host", Value: "none"}}, Start: minTime, End: maxTime})
				del(Selector{Measurement: "nosuch", Start: minTime, End: maxTime})
				check("after deletes")
				// Later writes into the deleted ranges are kept.
				write(Point{Measurement: "m", Tags: a, Fields: []Field{{Key: "v", Value: Float(40)}, {Key: "w", Value: Int(40)}}, Time: 4},
					pt("m", a, "v", Float(50), 5), pt("m", b, "v", Float(80), 8), pt("m", a, "w", Int(1), 1), pt("m", a, "v", Float(100), 100))
				check("after rewrites")
				if newInSeg {
					mustFlush(t, db)
					check("after flush")
				}
				db = reopen(t, db, dir, opts)
				check("after reopen")
				mustCompact(t, db)
				check("after compact")
				write(pt("m", a, "v", Float(3), 3))
				del(Selector{Measurement: "m", Start: 9, End: 10})
				mustFlush(t, db)
				mustCompact(t, db)
				check("after second compact")
				db = reopen(t, db, dir, opts)
				check("after second reopen")
			})
		}
	}
}

// TestTombstonesSurviveRestart checks that deletes of flushed data survive
// Close/Open and a crash, with and without a flush after the delete.
func TestTombstonesSurviveRestart(t *testing.T) {
	for _, flushAfter := range []bool{false, true} {
		for _, crash := range []bool{false, true} {
			t.Run(fmt.Sprintf("flushAfter=%v/crash=%v", flushAfter, crash), func(t *testing.T) {
				dir := t.TempDir()
				opts := quietOptions()
				opts.DisableBackgroundCompaction = true
				db := openDB(t, dir, opts)
				m := NewRefModel()
				var pts []Point
				for i := range int64(50) {
					pts = append(pts, pt("m", []Tag{{Key: "s", Value: fmt.Sprint(i % 3)}}, "v", Int(i), i))
				}
				mustWrite(t, db, pts...)
				m.write(pts)
				mustFlush(t, db)
				sels := []Selector{
					{Measurement: "m", Tags: []Tag{{Key: "s", Value: "1"}}, Start: 10, End: 40},
					{Measurement: "m", Start: 45, End: maxTime},
				}
				for _, sel := range sels {
					mustDelete(t, db, sel)
					m.delete(sel)
				}
				if flushAfter {
					more := []Point{pt("m", nil, "v", Int(-1), 1000)}
					mustWrite(t, db, more...)
					m.write(more)
					mustFlush(t, db)
				}
				if crash {
					db = openDB(t, crashCopy(t, dir), opts)
				} else {
					db = reopen(t, db, dir, opts)
				}
				checkQuery(t, db, m, rawAll("m"), minTime, "after restart")
				mustCompact(t, db)
				checkQuery(t, db, m, rawAll("m"), minTime, "after restart and compact")
			})
		}
	}
}

// TestTombstonesDroppedByCompaction checks that Stats().Tombstones falls to
// zero once compaction has rewritten every sample a delete covers.
func TestTombstonesDroppedByCompaction(t *testing.T) {
	dir := t.TempDir()
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	db := openDB(t, dir, opts)
	m := NewRefModel()
	for f := range 3 {
		var pts []Point
		for i := range int64(100) {
			pts = append(pts, pt("m", []Tag{{Key: "f", Value: fmt.Sprint(f)}}, "v", Float(float64(i)), i))
		}
		mustWrite(t, db, pts...)
		m.write(pts)
		mustFlush(t, db)
	}
	sels := []Selector{
		{Measurement: "m", Start: 20, End: 30},
		{Measurement: "m", Tags: []Tag{{Key: "f", Value: "1"}}, Start: 50, End: 80},
	}
	for _, sel := range sels {
		mustDelete(t, db, sel)
		m.delete(sel)
	}
	if n := db.Stats().Tombstones; n != len(sels) {
		t.Fatalf("Tombstones = %d after %d deletes, want %d", n, len(sels), len(sels))
	}
	mustCompact(t, db)
	checkQuery(t, db, m, rawAll("m"), minTime, "after compact")
	if n := db.Stats().Tombstones; n != 0 {
		t.Fatalf("Tombstones = %d after Compact rewrote every covered sample, want 0", n)
	}
	db = reopen(t, db, dir, opts)
	checkQuery(t, db, m, rawAll("m"), minTime, "after reopen")
	if n := db.Stats().Tombstones; n != 0 {
		t.Fatalf("Tombstones = %d after reopen, want 0", n)
	}
}

// segmentSamples counts the samples in the live segments of db.
func segmentSamples(db *DB) int64 {
	db.mu.Lock()
	defer db.mu.Unlock()
	var n int64
	for _, level := range db.mu.v.Levels {
		for _, h := range level {
			n += int64(h.Meta.Samples)
		}
	}
	return n
}

func segmentBytes(st Stats) int64 {
	var n int64
	for _, b := range st.BytesPerLevel {
		n += b
	}
	return n
}

func segmentCount(st Stats) int {
	n := 0
	for _, c := range st.SegmentsPerLevel {
		n += c
	}
	return n
}

// TestRetention checks that samples older than now minus Retention are
// invisible at once and dropped by compaction, and that their series keep
// their kind.
func TestRetention(t *testing.T) {
	const t0 = int64(1_700_000_000) * 1e9
	var now atomic.Int64
	now.Store(t0 - 3*int64(time.Hour)) // nothing is old yet
	opts := &Options{
		Logger:                      slog.New(slog.DiscardHandler),
		Retention:                   time.Hour,
		Now:                         func() time.Time { return time.Unix(0, now.Load()) },
		DisableBackgroundCompaction: true,
		L0CompactionTrigger:         2,
		BlockSamples:                64,
	}
	dir := t.TempDir()
	db := openDB(t, dir, opts)
	m := NewRefModel()
	write := func(pts []Point) {
		t.Helper()
		mustWrite(t, db, pts...)
		m.write(pts)
	}
	// Segment A: old samples only, of a series that has nothing else.
	var pts []Point
	for i := range int64(1000) {
		pts = append(pts, pt("m", []Tag{{Key: "s", Value: "old"}}, "v", Float(float64(i)), t0-3*int64(time.Hour)+i*int64(time.Second)))
	}
	write(pts)
	mustFlush(t, db)
	// Segment B: old and new samples.
	pts = pts[:0]
	for i := range int64(1000) {
		pts = append(pts, pt("m", []Tag{{Key: "s", Value: "mixed"}}, "v", Int(i), t0-2*int64(time.Hour)+i*int64(time.Second)))
	}
	for i := range int64(100) {
		pts = append(pts, pt("m", []Tag{{Key: "s", Value: "mixed"}}, "v", Int(-i), t0-int64(30*time.Minute)+i*int64(time.Second)))
	}
	write(pts)
	mustFlush(t, db)
	// Newest data, in the memtable, including a sample at the cutoff.
	write([]Point{pt("m", []Tag{{Key: "s", Value: "new"}}, "v", Uint(7), t0-int64(time.Hour)),
		pt("m", []Tag{{Key: "s", Value: "new"}}, "v", Uint(8), t0)})

	checkQuery(t, db, m, rawAll("m"), minTime, "before the clock moves")
	before := db.Stats()

	now.Store(t0)
	cutoff := t0 - int64(time.Hour)
	checkQuery(t, db, m, rawAll("m"), cutoff, "after the clock moved")
	for _, agg := range allAggs[1:] {
		checkQuery(t, db, m, Query{Selector: Selector{Measurement: "m", Start: minTime, End: maxTime}, Agg: agg}, cutoff, "after the clock moved")
		checkQuery(t, db, m, Query{Selector: Selector{Measurement: "m", Start: t0 - 4*int64(time.Hour), End: t0 + 1}, Agg: agg, Every: int64(time.Hour)}, cutoff, "after the clock moved")
	}

	mustFlush(t, db)
	mustCompact(t, db)
	m.expire(cutoff)
	checkQuery(t, db, m, rawAll("m"), cutoff, "after compact")
	after := db.Stats()
	if got, want := segmentSamples(db), int64(m.samples()); got != want {
		t.Errorf("segments hold %d samples after Compact, want %d (the unexpired ones)", got, want)
	}
	if segmentBytes(after) >= segmentBytes(before) {
		t.Errorf("segment bytes %d -> %d: expired data was not dropped", segmentBytes(before), segmentBytes(after))
	}
	if after.SegmentsPerLevel[0] != 0 {
		t.Errorf("SegmentsPerLevel = %v after Compact", after.SegmentsPerLevel)
	}
	checkKinds(t, db, m, "after compact")
	db = reopen(t, db, dir, opts)
	checkQuery(t, db, m, rawAll("m"), cutoff, "after reopen")
	checkKinds(t, db, m, "after reopen")
	if got := segmentSamples(db); got != int64(m.samples()) {
		t.Errorf("segments hold %d samples after reopen, want %d", got, m.samples())
	}

	// Everything expires: the series are invisible and dropped, kinds stay.
	now.Store(t0 + 2*int64(time.Hour))
	if res := mustQuery(t, db, rawAll("m")); len(res) != 0 {
		t.Fatalf("expired data visible: %s", formatSeries(res))
	}
	mustCompact(t, db)
	if st := db.Stats(); segmentCount(st) != 0 {
		t.Errorf("SegmentsPerLevel = %v after everything expired and Compact", st.SegmentsPerLevel)
	}
	checkKinds(t, db, m, "after everything expired")
}

// TestMaxInt64Unselectable checks that a sample at math.MaxInt64 is stored
// but cannot be selected by a half-open range, and that one at
// math.MinInt64 can.
func TestMaxInt64Unselectable(t *testing.T) {
	dir := t.TempDir()
	opts := quietOptions()
	db := openDB(t, dir, opts)
	mustWrite(t, db, pt("m", nil, "v", Int(1), math.MinInt64), pt("m", nil, "v", Int(2), 0), pt("m", nil, "v", Int(3), math.MaxInt64))
	for _, step := range []string{"memtable", "flush", "compact", "reopen"} {
		switch step {
		case "flush":
			mustFlush(t, db)
		case "compact":
			mustCompact(t, db)
		case "reopen":
			db = reopen(t, db, dir, opts)
		}
		res := mustQuery(t, db, rawAll("m"))
		got := samplesOf(t, res)
		if len(got) != 2 || got[0].Time != math.MinInt64 || !got[0].Value.Equal(Int(1)) || got[1].Time != 0 || !got[1].Value.Equal(Int(2)) {
			t.Fatalf("%s: [MinInt64, MaxInt64) returned %v, want [MinInt64=1 0=2]", step, got)
		}
		if res := mustQuery(t, db, Query{Selector: Selector{Measurement: "m", Start: 1, End: math.MaxInt64}}); len(res) != 0 {
			t.Fatalf("%s: [1, MaxInt64) returned %s", step, formatSeries(res))
		}
		cnt := samplesOf(t, mustQuery(t, db, Query{Selector: Selector{Measurement: "m", Start: math.MinInt64, End: math.MaxInt64}, Agg: AggCount}))
		if len(cnt) != 1 || cnt[0].Time != math.MinInt64 || !cnt[0].Value.Equal(Int(2)) {
			t.Fatalf("%s: count over [MinInt64, MaxInt64) = %v, want [MinInt64=2]", step, cnt)
		}
		last := samplesOf(t, mustQuery(t, db, Query{Selector: Selector{Measurement: "m", Start: math.MinInt64, End: math.MaxInt64}, Agg: AggLast}))
		if len(last) != 1 || !last[0].Value.Equal(Int(2)) {
			t.Fatalf("%s: last over [MinInt64, MaxInt64) = %v, want 2", step, last)
		}
	}
	// The stored sample is still a sample of the series: same kind only.
	if err := db.Write([]Point{pt("m", nil, "v", Float(1), math.MaxInt64)}); !errors.Is(err, ErrFieldTypeConflict) {
		t.Fatalf("float into int series: %v", err)
	}
}
