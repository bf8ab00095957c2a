package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/stratadb/strata/internal/vfs"
)

func mustAppend(t testing.TB, a *Appender, ref SeriesRef, m string, tags []Tag, field string, ts int64, v Value) SeriesRef {
	t.Helper()
	r, err := a.Append(ref, m, tags, field, ts, v)
	if err != nil {
		t.Fatalf("append %s %v %s %d: %v", m, tags, field, ts, err)
	}
	if r == 0 {
		t.Fatalf("append %s %v %s: ref 0", m, tags, field)
	}
	return r
}

func mustCommit(t testing.TB, a *Appender) {
	t.Helper()
	if err := a.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// dump renders every sample of measurement m as "key time value" lines.
func dump(t testing.TB, db *DB, m string) string {
	t.Helper()
	var b strings.Builder
	for _, s := range mustQuery(t, db, rawAll(m)) {
		for _, x := range s.Samples {
			fmt.Fprintf(&b, "%s,%v %s %d %v\n", s.Measurement, s.Tags, s.Field, x.Time, x.Value)
		}
	}
	return b.String()
}

func hostTag(h string) []Tag { return []Tag{{Key: "host", Value: h}} }

// Samples appended with ref 0 and then with the refs returned land in the
// series they name, tags in any order, across several commits; Append
// returns the same ref for the same series, different ones otherwise.
func TestAppenderBasic(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	a := db.Appender()
	ra := mustAppend(t, a, 0, "cpu", []Tag{{Key: "host", Value: "a"}, {Key: "dc", Value: "x"}}, "user", 1, Float(1))
	rb := mustAppend(t, a, 0, "cpu", []Tag{{Key: "dc", Value: "x"}, {Key: "host", Value: "b"}}, "user", 1, Float(2))
	rn := mustAppend(t, a, 0, "cpu", []Tag{{Key: "dc", Value: "x"}, {Key: "host", Value: "a"}}, "n", 1, Int(7))
	if r := mustAppend(t, a, 0, "cpu", []Tag{{Key: "dc", Value: "x"}, {Key: "host", Value: "a"}}, "user", 2, Float(3)); r != ra {
		t.Fatalf("same series, ref %#x then %#x", ra, r)
	}
	if ra == rb || ra == rn || rb == rn {
		t.Fatalf("refs not distinct: %#x %#x %#x", ra, rb, rn)
	}
	ra = mustAppend(t, a, ra, "", nil, "", 3, Float(4)) // names not looked at
	mustCommit(t, a)
	// After the commit the pending refs work on another appender too.
	b := db.Appender()
	ra = mustAppend(t, b, ra, "ignored", nil, "ignored", 4, Float(5))
	rb = mustAppend(t, b, rb, "", nil, "", 4, Float(6))
	rn = mustAppend(t, b, rn, "", nil, "", 4, Int(8))
	mustCommit(t, b)
	want := "cpu,[{dc x} {host a}] n 1 7\n" +
		"cpu,[{dc x} {host a}] n 4 8\n" +
		"cpu,[{dc x} {host a}] user 1 1\n" +
		"cpu,[{dc x} {host a}] user 2 3\n" +
		"cpu,[{dc x} {host a}] user 3 4\n" +
		"cpu,[{dc x} {host a}] user 4 5\n" +
		"cpu,[{dc x} {host b}] user 1 2\n" +
		"cpu,[{dc x} {host b}] user 4 6\n"
	if got := dump(t, db, "cpu"); got != want {
		t.Fatalf("stored:\n%swant:\n%s", got, want)
	}
	if st := db.Stats(); st.SamplesWritten != 8 || st.PointsWritten != 8 {
		t.Fatalf("stats: %d points %d samples", st.PointsWritten, st.SamplesWritten)
	}
	// Commit and Rollback of an empty batch are no-ops.
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := a.Rollback(); err != nil {
		t.Fatal(err)
	}
}

// Rollback drops the batch; refs of the series it would have created are
// refused with ErrInvalid from then on (never another series), while refs
// of existing series stay valid.
func TestAppenderRollbackRefs(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	mustWrite(t, db, pt("m", hostTag("old"), "v", Float(1), 1))
	a := db.Appender()
	rOld := mustAppend(t, a, 0, "m", hostTag("old"), "v", 2, Float(2))
	rNew := mustAppend(t, a, 0, "m", hostTag("new"), "v", 2, Float(2))
	if err := a.Rollback(); err != nil {
		t.Fatal(err)
	}
	// Another series takes the id the rolled-back one would have had.
	mustWrite(t, db, pt("m", hostTag("other"), "v", Float(9), 9))
	if _, err := a.Append(rNew, "", nil, "", 3, Float(3)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("append with the ref of a rolled-back series: %v", err)
	}
	if _, err := db.Appender().Append(rNew, "", nil, "", 3, Float(3)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("append with the ref of a rolled-back series, other appender: %v", err)
	}
	mustAppend(t, a, rOld, "", nil, "", 3, Float(3))
	r2 := mustAppend(t, a, 0, "m", hostTag("new"), "v", 4, Float(4))
	mustCommit(t, a)
	mustAppend(t, a, r2, "", nil, "", 5, Float(5))
	mustCommit(t, a)
	want := "m,[{host new}] v 4 4\nm,[{host new}] v 5 5\n" +
		"m,[{host old}] v 1 1\nm,[{host old}] v 3 3\n" +
		"m,[{host other}] v 9 9\n"
	if got := dump(t, db, "m"); got != want {
		t.Fatalf("stored:\n%swant:\n%s", got, want)
	}
}

// Refs never handed out are refused with ErrInvalid, without a panic and
// without a write anywhere.
func TestAppenderInvalidRefs(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	a := db.Appender()
	var refs []SeriesRef
	for i := range 50 {
		refs = append(refs, mustAppend(t, a, 0, "m", hostTag(fmt.Sprint(i)), "v", 1, Float(1)))
	}
	mustCommit(t, a)
	for i := range 50 {
		refs[i] = mustAppend(t, a, refs[i], "", nil, "", 2, Float(2))
	}
	mustCommit(t, a)
	bad := []SeriesRef{1, 2, 49, 50, 51, 1 << 32, 1<<36 | 1, math.MaxUint64, math.MaxUint64 >> 1}
	for _, r := range refs[:5] {
		bad = append(bad, r+1, r-1, r^1<<40, r^1<<36, r&(1<<37-1))
	}
	before := dump(t, db, "m")
	for _, r := range bad {
		if _, err := a.Append(r, "m", hostTag("0"), "v", 3, Float(3)); !errors.Is(err, ErrInvalid) {
			t.Errorf("append with ref %#x: %v", uint64(r), err)
		}
	}
	mustCommit(t, a)
	if after := dump(t, db, "m"); after != before {
		t.Fatalf("invalid refs wrote:\n%s\nbefore:\n%s", after, before)
	}
	// A ref of another handle of the same database is refused too.
	dir := t.TempDir()
	db2 := openDB(t, dir, quietOptions())
	a2 := db2.Appender()
	r := mustAppend(t, a2, 0, "m", nil, "v", 1, Float(1))
	mustCommit(t, a2)
	r = mustAppend(t, a2, r, "", nil, "", 2, Float(2))
	mustCommit(t, a2)
	db2 = reopen(t, db2, dir, quietOptions())
	if _, err := db2.Appender().Append(r, "", nil, "", 3, Float(3)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ref of the previous handle: %v", err)
	}
}

// Kind conflicts: against an existing series at Append (ref 0 or a ref),
// against a series pending in the batch at Append, and against a series
// another writer created meanwhile at Commit, which then stores nothing.
func TestAppenderKindConflicts(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	mustWrite(t, db, pt("m", nil, "f", Float(1), 1))
	a := db.Appender()
	if _, err := a.Append(0, "m", nil, "f", 2, Int(2)); !errors.Is(err, ErrFieldTypeConflict) {
		t.Fatalf("int into float series: %v", err)
	}
	r := mustAppend(t, a, 0, "m", nil, "f", 2, Float(2))
	if _, err := a.Append(r, "", nil, "", 3, String("x")); !errors.Is(err, ErrFieldTypeConflict) {
		t.Fatalf("string with a float ref: %v", err)
	}
	p := mustAppend(t, a, 0, "m", nil, "g", 2, Bool(true))
	if _, err := a.Append(0, "m", nil, "g", 3, Uint(1)); !errors.Is(err, ErrFieldTypeConflict) {
		t.Fatalf("uint into pending bool series: %v", err)
	}
	if _, err := a.Append(p, "", nil, "", 3, Uint(1)); !errors.Is(err, ErrFieldTypeConflict) {
		t.Fatalf("uint with a pending bool ref: %v", err)
	}
	mustCommit(t, a)
	if got, want := dump(t, db, "m"), "m,[] f 1 1\nm,[] f 2 2\nm,[] g 2 true\n"; got != want {
		t.Fatalf("stored:\n%swant:\n%s", got, want)
	}

	// Pending as float here, created as int by a Write before Commit.
	mustAppend(t, a, r, "", nil, "", 5, Float(5))
	mustAppend(t, a, 0, "m", nil, "h", 5, Float(5))
	mustWrite(t, db, pt("m", nil, "h", Int(1), 1))
	err := a.Commit()
	var pe *PointError
	if !errors.Is(err, ErrFieldTypeConflict) || !errors.As(err, &pe) || pe.Index != 1 {
		t.Fatalf("commit after a conflicting write: %v", err)
	}
	if got, want := dump(t, db, "m"), "m,[] f 1 1\nm,[] f 2 2\nm,[] g 2 true\nm,[] h 1 1\n"; got != want {
		t.Fatalf("a failed commit stored something:\n%swant:\n%s", got, want)
	}
	// Pending, created by a Write with the same kind: one series.
	mustAppend(t, a, 0, "m", nil, "k", 6, Float(6))
	mustWrite(t, db, pt("m", nil, "k", Float(1), 1))
	mustCommit(t, a)
	if n := len(mustQuery(t, db, Query{Selector: Selector{Measurement: "m", Field: "k", Start: minTime, End: maxTime}})); n != 1 {
		t.Fatalf("%d series k", n)
	}
}

// Append validates as Write does; a refused sample leaves the batch as it
// was.
func TestAppenderValidation(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	a := db.Appender()
	mustAppend(t, a, 0, "m", nil, "ok", 1, Float(1))
	long := strings.Repeat("k", MaxKeyLen)
	for _, c := range []struct {
		name  string
		m     string
		tags  []Tag
		field string
		v     Value
	}{
		{"empty measurement", "", nil, "f", Float(1)},
		{"empty field", "m", nil, "", Float(1)},
		{"no value", "m", nil, "f", Value{}},
		{"NaN", "m", nil, "f", Float(math.NaN())},
		{"Inf", "m", nil, "f", Float(math.Inf(-1))},
		{"duplicate tag", "m", []Tag{{Key: "a", Value: "1"}, {Key: "a", Value: "2"}}, "f", Float(1)},
		{"empty tag value", "m", []Tag{{Key: "a", Value: ""}}, "f", Float(1)},
		{"newline", "m", []Tag{{Key: "a", Value: "x\ny"}}, "f", Float(1)},
		{"long key", "m", []Tag{{Key: "a", Value: long}}, "f", Float(1)},
		{"long string", "m", nil, "s", String(strings.Repeat("x", MaxStringLen+1))},
	} {
		if _, err := a.Append(0, c.m, c.tags, c.field, 1, c.v); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	mustCommit(t, a)
	if got, want := dump(t, db, "m"), "m,[] ok 1 1\n"; got != want {
		t.Fatalf("stored:\n%swant:\n%s", got, want)
	}
}

// A batch that would pass MaxWriteBytes refuses the sample that would take
// it there; the batch commits whole, and the refused sample goes into the
// next.
func TestAppenderMaxWriteBytes(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	a := db.Appender()
	big := String(strings.Repeat("x", MaxStringLen))
	var r SeriesRef
	n := 0
	for ; ; n++ {
		var err error
		nr, err := a.Append(r, "m", nil, "s", int64(n), big)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("sample %d: %v", n, err)
			}
			break
		}
		r = nr
	}
	if n == 0 || n*MaxStringLen > MaxWriteBytes || (n+1)*MaxStringLen < MaxWriteBytes-MaxStringLen {
		t.Fatalf("refused after %d samples of %d bytes (limit %d)", n, MaxStringLen, MaxWriteBytes)
	}
	mustCommit(t, a)
	mustAppend(t, a, r, "", nil, "", int64(n), big)
	mustCommit(t, a)
	res := mustQuery(t, db, rawAll("m"))
	if got := len(samplesOf(t, res)); got != n+1 {
		t.Fatalf("%d samples stored, want %d", got, n+1)
	}
}

// Several samples of one series and time in a batch: the last wins, as in
// Write.
func TestAppenderDuplicateLastWins(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	a := db.Appender()
	r := mustAppend(t, a, 0, "m", nil, "v", 5, Float(1))
	mustAppend(t, a, r, "", nil, "", 5, Float(2))
	mustAppend(t, a, 0, "m", nil, "v", 5, Float(3))
	mustCommit(t, a)
	if got, want := dump(t, db, "m"), "m,[] v 5 3\n"; got != want {
		t.Fatalf("stored:\n%swant:\n%s", got, want)
	}
}

// Closed and read-only databases.
func TestAppenderClosedReadOnly(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir, quietOptions())
	a := db.Appender()
	r := mustAppend(t, a, 0, "m", nil, "v", 1, Float(1))
	mustCommit(t, a)
	mustAppend(t, a, r, "", nil, "", 2, Float(2))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(); !errors.Is(err, ErrClosed) {
		t.Fatalf("commit after close: %v", err)
	}
	if _, err := a.Append(r, "", nil, "", 3, Float(3)); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	opts := quietOptions()
	opts.ReadOnly = true
	ro := openDB(t, dir, opts)
	if got, want := dump(t, ro, "m"), "m,[] v 1 1\n"; got != want {
		t.Fatalf("stored:\n%swant:\n%s", got, want)
	}
	ra := ro.Appender()
	if _, err := ra.Append(0, "m", nil, "v", 3, Float(3)); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("append read-only: %v", err)
	}
	if err := ra.Commit(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("commit read-only: %v", err)
	}
}

// A Commit whose WAL write fails stores nothing, feeds the batch as not
// logged, and leaves the refs of the series it would have created refused.
func TestAppenderWALFailure(t *testing.T) {
	inj := &vfs.OnIndex{N: 1, Sticky: true, Match: func(op vfs.Op, name string) bool {
		return op == vfs.OpWrite && strings.HasSuffix(name, ".wal")
	}}
	opts := quietOptions()
	opts.fs = vfs.Inject(vfs.Default, inj.Injector())
	db := openDB(t, t.TempDir(), opts)
	rec := &recorder{t: t}
	if _, err := db.Subscribe(rec); err != nil {
		t.Fatal(err)
	}
	a := db.Appender()
	r1 := mustAppend(t, a, 0, "m", hostTag("a"), "v", 1, Float(1))
	mustAppend(t, a, 0, "m", hostTag("b"), "v", 1, Float(2))
	mustAppend(t, a, r1, "", nil, "", 2, Float(3))
	if err := a.Commit(); err == nil {
		t.Fatal("commit with a failing WAL succeeded")
	}
	if len(rec.failed) != 1 || len(rec.logged) != 0 {
		t.Fatalf("feed: logged %d failed %v", len(rec.logged), rec.failed)
	}
	if n := len(mustQuery(t, db, rawAll("m"))); n != 0 {
		t.Fatalf("%d series stored after a failed commit", n)
	}
	if _, err := a.Append(r1, "", nil, "", 3, Float(3)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ref of a series of a failed commit: %v", err)
	}
	if a.pending() != 0 {
		t.Fatalf("%d samples pending after a failed commit", a.pending())
	}
}

// Committed samples are durable as Write's: after a crash (SyncAlways) and
// after a clean reopen, with flushes and compactions in between; refs stay
// valid across flush and compaction.
func TestAppenderDurableAcrossFlushCompactReopen(t *testing.T) {
	dir := t.TempDir()
	opts := quietOptions()
	opts.Sync = SyncAlways
	opts.DisableBackgroundCompaction = true
	db := openDB(t, dir, opts)
	a := db.Appender()
	refs := make([]SeriesRef, 20)
	ts := int64(0)
	round := func() {
		ts++
		for i := range refs {
			refs[i] = mustAppend(t, a, refs[i], "m", hostTag(fmt.Sprintf("h%02d", i)), "v", ts, Int(int64(i)*1000+ts))
		}
		mustCommit(t, a)
	}
	round()
	mustFlush(t, db)
	round()
	mustFlush(t, db)
	round()
	mustCompact(t, db)
	round()
	crash := crashCopy(t, dir)
	want := dump(t, db, "m")
	if strings.Count(want, "\n") != 4*len(refs) {
		t.Fatalf("stored:\n%s", want)
	}
	for i, line := range strings.Split(strings.TrimSpace(want), "\n") {
		host, step := i/4, i%4+1
		if w := fmt.Sprintf("m,[{host h%02d}] v %d %d", host, step, host*1000+step); line != w {
			t.Fatalf("line %d: %q, want %q", i, line, w)
		}
	}
	cdb := openDB(t, crash, opts)
	if got := dump(t, cdb, "m"); got != want {
		t.Fatalf("after crash:\n%swant:\n%s", got, want)
	}
	db = reopen(t, db, dir, opts)
	if got := dump(t, db, "m"); got != want {
		t.Fatalf("after reopen:\n%swant:\n%s", got, want)
	}
}

// The change feed sees an appender's Commit as one batch, exactly as the
// equivalent Write.
func TestAppenderFeed(t *testing.T) {
	feedOf := func(write func(db *DB)) []FeedRecord {
		db := openDB(t, t.TempDir(), quietOptions())
		rec := &recorder{t: t}
		if _, err := db.Subscribe(rec); err != nil {
			t.Fatal(err)
		}
		write(db)
		return rec.logged
	}
	viaWrite := feedOf(func(db *DB) {
		mustWrite(t, db, pt("m", hostTag("a"), "v", Float(1), 1), pt("m", hostTag("b"), "v", Float(2), 1))
		mustWrite(t, db, pt("m", hostTag("a"), "v", Float(3), 2))
	})
	viaAppender := feedOf(func(db *DB) {
		a := db.Appender()
		r := mustAppend(t, a, 0, "m", hostTag("a"), "v", 1, Float(1))
		mustAppend(t, a, 0, "m", hostTag("b"), "v", 1, Float(2))
		mustCommit(t, a)
		mustAppend(t, a, r, "", nil, "", 2, Float(3))
		mustCommit(t, a)
	})
	if len(viaWrite) != 2 || len(viaAppender) != 2 {
		t.Fatalf("records: %d via Write, %d via Appender", len(viaWrite), len(viaAppender))
	}
	for i := range viaWrite {
		w, a := viaWrite[i], viaAppender[i]
		if w.Seq != a.Seq || w.Samples != a.Samples || w.Format != a.Format || string(w.Payload) != string(a.Payload) {
			t.Fatalf("record %d: Write %+v, Appender %+v", i, w, a)
		}
	}
}

// Appenders and Write race to create the same series: each series is
// created once, every sample lands in it, and refs handed out in one
// goroutine work in another after their Commit.
func TestAppenderConcurrentWithWrite(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	const workers, series, rounds = 4, 50, 20
	var wg sync.WaitGroup
	refs := make(chan []SeriesRef, workers)
	errs := make(chan error, workers+1)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := db.Appender()
			mine := make([]SeriesRef, series)
			for r := range rounds {
				for s := range series {
					ref, err := a.Append(mine[s], "m", hostTag(fmt.Sprint(s)), "v", int64(r*workers+w), Float(float64(s)))
					if err != nil {
						errs <- err
						return
					}
					mine[s] = ref
				}
				if err := a.Commit(); err != nil {
					errs <- err
					return
				}
			}
			refs <- mine
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for r := range rounds {
			pts := make([]Point, series)
			for s := range pts {
				pts[s] = pt("m", hostTag(fmt.Sprint(s)), "v", Float(float64(s)), int64(1000+r))
			}
			if err := db.Write(pts); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Every worker's refs, used by one appender here.
	a := db.Appender()
	for range workers {
		for s, r := range <-refs {
			mustAppend(t, a, r, "", nil, "", 5000, Float(float64(s)))
		}
	}
	mustCommit(t, a)
	res := mustQuery(t, db, rawAll("m"))
	if len(res) != series {
		t.Fatalf("%d series, want %d", len(res), series)
	}
	for _, s := range res {
		if len(s.Samples) != workers*rounds+rounds+1 {
			t.Fatalf("series %v: %d samples, want %d", s.Tags, len(s.Samples), workers*rounds+rounds+1)
		}
		for _, x := range s.Samples {
			if fmt.Sprint(x.Value.Float()) != s.Tags[0].Value {
				t.Fatalf("series %v holds %v", s.Tags, x.Value)
			}
		}
	}
	if n := db.cat.Len(); n != series {
		t.Fatalf("catalog holds %d series, want %d", n, series)
	}
}

// Truncate (through SampleAppender) takes back the samples after a mark
// and the series only they named.
func TestAppenderTruncate(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	sa := db.SampleAppender()
	if _, err := sa.Append(0, "m", hostTag("a"), "v", 1, Float(1)); err != nil {
		t.Fatal(err)
	}
	mark := sa.Pending()
	rb, err := sa.Append(0, "m", hostTag("b"), "v", 1, Float(2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.Append(0, "m", hostTag("a"), "v", 2, Float(3)); err != nil {
		t.Fatal(err)
	}
	sa.Truncate(mark)
	if sa.Pending() != mark {
		t.Fatalf("pending %d after truncate to %d", sa.Pending(), mark)
	}
	if err := sa.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, want := dump(t, db, "m"), "m,[{host a}] v 1 1\n"; got != want {
		t.Fatalf("stored:\n%swant:\n%s", got, want)
	}
	if _, err := sa.Append(rb, "", nil, "", 3, Float(3)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ref of a truncated series: %v", err)
	}
	if n := db.cat.Len(); n != 1 {
		t.Fatalf("catalog holds %d series", n)
	}
}

func TestAppenderQueryContext(t *testing.T) {
	// Appended samples are visible to queries once Commit returns.
	db := openDB(t, t.TempDir(), quietOptions())
	a := db.Appender()
	mustAppend(t, a, 0, "m", nil, "v", 1, Float(1))
	if n := len(mustQuery(t, db, rawAll("m"))); n != 0 {
		t.Fatalf("%d series visible before Commit", n)
	}
	mustCommit(t, a)
	if _, err := db.Query(context.Background(), rawAll("m")); err != nil {
		t.Fatal(err)
	}
	if n := len(mustQuery(t, db, rawAll("m"))); n != 1 {
		t.Fatalf("%d series visible after Commit", n)
	}
}
