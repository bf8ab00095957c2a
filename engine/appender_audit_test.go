package engine

// Adversarial tests of the Appender against its contract (docs/design.md,
// "Appender"): refs that outlive their series' data, refs that were never
// valid, kind conflicts, series limits, validation parity with Write,
// atomicity of a failed Commit and durability of a committed one. They
// extend appender_test.go and appender_model_test.go where those are thin.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/point"
)

// wantErrIs fails unless err wraps target.
func wantErrIs(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got %v, want an error wrapping %v", what, err, target)
	}
}

// allKinds is a value of each kind.
var allKinds = []Value{Float(1), Int(1), Uint(1), Bool(true), String("x")}

// kindsBut returns a value of every kind but k.
func kindsBut(k Kind) []Value {
	var out []Value
	for _, v := range allKinds {
		if v.Kind() != k {
			out = append(out, v)
		}
	}
	return out
}

// checkKindFixed checks that series (m, tags, field) takes only values of
// kind k, by ref, by ref 0 and by Write, and that nothing refused is stored.
func checkKindFixed(t *testing.T, db *DB, ref SeriesRef, m string, tags []Tag, field string, k Kind, where string) {
	t.Helper()
	before := dump(t, db, m)
	a := db.Appender()
	for _, v := range kindsBut(k) {
		if ref != 0 {
			_, err := a.Append(ref, "", nil, "", 77, v)
			wantErrIs(t, fmt.Sprintf("%s: %s by ref into a %s series", where, v.Kind(), k), err, ErrFieldTypeConflict)
		}
		_, err := a.Append(0, m, tags, field, 77, v)
		wantErrIs(t, fmt.Sprintf("%s: %s by ref 0 into a %s series", where, v.Kind(), k), err, ErrFieldTypeConflict)
		err = db.Write([]Point{pt(m, tags, field, v, 77)})
		wantErrIs(t, fmt.Sprintf("%s: Write of %s into a %s series", where, v.Kind(), k), err, ErrFieldTypeConflict)
	}
	if a.pending() != 0 {
		t.Fatalf("%s: %d refused samples pending", where, a.pending())
	}
	mustCommit(t, a)
	if after := dump(t, db, m); after != before {
		t.Fatalf("%s: refused samples stored:\n%swas:\n%s", where, after, before)
	}
}

// A ref stays valid, and names its series, after every sample of the
// series is deleted (all time), whether the delete is still a tombstone or
// has been applied by flush and compaction. The kind stays fixed. Samples
// appended after the Delete are kept; those before it are gone, including
// one at the time a later one is written again.
func TestAppenderAuditRefAfterDelete(t *testing.T) {
	for _, apply := range []string{"tombstone", "flush", "flush+compact"} {
		t.Run(apply, func(t *testing.T) {
			opts := quietOptions()
			opts.DisableBackgroundCompaction = true
			db := openDB(t, t.TempDir(), opts)
			a := db.Appender()
			r := mustAppend(t, a, 0, "m", hostTag("a"), "v", 10, Int(1))
			other := mustAppend(t, a, 0, "m", hostTag("b"), "v", 10, Int(2))
			mustAppend(t, a, r, "", nil, "", 20, Int(3))
			mustCommit(t, a)
			// Commit again so r is the created series' id ref, not the
			// pending one, and the pending one also checked.
			rPend := r
			r = mustAppend(t, a, r, "", nil, "", 30, Int(4))
			mustCommit(t, a)
			if apply != "tombstone" {
				mustFlush(t, db)
			}
			mustDelete(t, db, Selector{Measurement: "m", Tags: hostTag("a")})
			switch apply {
			case "flush":
				mustFlush(t, db)
			case "flush+compact":
				mustFlush(t, db)
				mustCompact(t, db)
			}
			if got, want := dump(t, db, "m"), "m,[{host b}] v 10 2\n"; got != want {
				t.Fatalf("after delete:\n%swant:\n%s", got, want)
			}
			checkKindFixed(t, db, r, "m", hostTag("a"), "v", KindInt, "after delete")
			// Both refs of the series still name it; one sample at a
			// time that was deleted, one new.
			r = mustAppend(t, a, r, "ignored", hostTag("b"), "ignored", 10, Int(5))
			mustAppend(t, a, rPend, "", nil, "", 40, Int(6))
			mustAppend(t, a, other, "", nil, "", 40, Int(7))
			mustCommit(t, a)
			want := "m,[{host a}] v 10 5\nm,[{host a}] v 40 6\nm,[{host b}] v 10 2\nm,[{host b}] v 40 7\n"
			if got := dump(t, db, "m"); got != want {
				t.Fatalf("appended by ref after delete:\n%swant:\n%s", got, want)
			}
			mustFlush(t, db)
			mustCompact(t, db)
			if got := dump(t, db, "m"); got != want {
				t.Fatalf("after flush and compaction:\n%swant:\n%s", got, want)
			}
			if n := db.cat.Len(); n != 2 {
				t.Fatalf("catalog holds %d series, want 2", n)
			}
		})
	}
}

// A ref stays valid after its series' samples expire and compaction drops
// them; the kind stays fixed, across a reopen too (by ref 0: refs of the
// old handle are refused).
func TestAppenderAuditRefAfterRetention(t *testing.T) {
	const hour = int64(time.Hour)
	base := 1000 * hour
	var now atomic.Int64
	now.Store(base)
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	opts.Retention = time.Hour
	opts.Now = func() time.Time { return time.Unix(0, now.Load()) }
	dir := t.TempDir()
	db := openDB(t, dir, opts)
	a := db.Appender()
	r := mustAppend(t, a, 0, "m", nil, "s", base-hour/2, String("old"))
	mustCommit(t, a)
	r = mustAppend(t, a, r, "", nil, "", base-hour/4, String("old2"))
	mustCommit(t, a)
	mustFlush(t, db)
	now.Store(base + 2*hour) // everything expires
	mustCompact(t, db)
	if got := dump(t, db, "m"); got != "" {
		t.Fatalf("after expiry:\n%s", got)
	}
	checkKindFixed(t, db, r, "m", nil, "s", KindString, "after expiry")
	r = mustAppend(t, a, r, "", nil, "", base+2*hour, String("new"))
	// An expired time is accepted (as Write accepts it) and not shown.
	mustAppend(t, a, r, "", nil, "", base, String("expired"))
	mustCommit(t, a)
	if err := db.Write([]Point{pt("m", nil, "s", String("expired too"), base)}); err != nil {
		t.Fatalf("Write of an expired time: %v", err)
	}
	want := fmt.Sprintf("m,[] s %d new\n", base+2*hour)
	if got := dump(t, db, "m"); got != want {
		t.Fatalf("appended after expiry:\n%swant:\n%s", got, want)
	}
	db = reopen(t, db, dir, opts)
	if _, err := db.Appender().Append(r, "", nil, "", base+3*hour, String("x")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ref of the previous handle: %v", err)
	}
	checkKindFixed(t, db, 0, "m", nil, "s", KindString, "after expiry and reopen")
	if got := dump(t, db, "m"); got != want {
		t.Fatalf("after reopen:\n%swant:\n%s", got, want)
	}
}

// Refs that were never handed out by this handle: garbage values, refs of
// another open handle (another database), refs of this handle's pending
// series after a Rollback even once another writer has created that very
// series, and refs forged with a valid check but naming nothing. Each is
// refused with ErrInvalid (or, forged with a kind, a conflict), never a
// write anywhere, never a panic.
func TestAppenderAuditForeignRefs(t *testing.T) {
	db1 := openDB(t, t.TempDir(), quietOptions())
	db2 := openDB(t, t.TempDir(), quietOptions())
	// The same series in both, so that a misdirected ref would land in a
	// series of the same name and kind.
	var refs1, refs2 []SeriesRef
	for _, x := range []struct {
		db   *DB
		refs *[]SeriesRef
	}{{db1, &refs1}, {db2, &refs2}} {
		a := x.db.Appender()
		for i := range 8 {
			*x.refs = append(*x.refs, mustAppend(t, a, 0, "m", hostTag(fmt.Sprint(i)), "v", 1, Float(float64(i))))
		}
		pending := append([]SeriesRef(nil), (*x.refs)...)
		mustCommit(t, a)
		for i := range *x.refs {
			(*x.refs)[i] = mustAppend(t, a, (*x.refs)[i], "", nil, "", 2, Float(float64(i)))
		}
		mustCommit(t, a)
		*x.refs = append(*x.refs, pending...) // committed pending refs: valid too
	}
	before1, before2 := dump(t, db1, "m"), dump(t, db2, "m")
	a1 := db1.Appender()
	for _, r := range refs2 {
		if _, err := a1.Append(r, "m", hostTag("0"), "v", 3, Float(-1)); !errors.Is(err, ErrInvalid) {
			t.Errorf("ref %#x of another handle: %v", uint64(r), err)
		}
	}
	garbage := []SeriesRef{1 << 40, 1<<40 | 1, 1 << 63, 1<<37 | 1, 1<<36 | 1<<32 | 1, 0xdeadbeef}
	for _, r := range garbage {
		if _, err := a1.Append(r, "m", hostTag("0"), "v", 3, Float(-1)); !errors.Is(err, ErrInvalid) {
			t.Errorf("garbage ref %#x: %v", uint64(r), err)
		}
	}
	// Forged refs with a valid check: ids and slots that name nothing.
	n := uint64(db1.cat.Len())
	for _, r := range []SeriesRef{
		db1.refs.ref(n+1, KindFloat, false),           // id n: not in the catalog
		db1.refs.ref(1<<31, KindFloat, false),         // far past it
		db1.refs.ref(1<<20, KindFloat, true),          // slot never allocated, chunk missing
		db1.refs.ref(2000, KindFloat, true),           // slot never allocated, chunk present
		db1.refs.ref(1<<32-1, KindFloat, true),        // the last slot
		db1.refs.ref(1<<32-1, KindFloat, false),       // the last id
		db1.refs.ref(uint64(1), Kind(0), false),       // no kind
		db1.refs.ref(uint64(1), Kind(15), false),      // a kind that does not exist
		db1.refs.ref(uint64(1), Kind(15), true),       // pending, no such kind
		db1.refs.ref(uint64(1)<<32, KindFloat, false), // low bits 0 once masked
	} {
		_, err := a1.Append(r, "m", hostTag("0"), "v", 3, Float(-1))
		if err == nil {
			err = a1.Commit()
		}
		if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrFieldTypeConflict) {
			t.Errorf("forged ref %#x: %v", uint64(r), err)
		}
		a1.Rollback()
	}
	mustCommit(t, a1)
	if got := dump(t, db1, "m"); got != before1 {
		t.Fatalf("foreign refs wrote into db1:\n%swas:\n%s", got, before1)
	}
	if got := dump(t, db2, "m"); got != before2 {
		t.Fatalf("foreign refs wrote into db2:\n%swas:\n%s", got, before2)
	}

	// A rolled-back pending ref stays refused once the series exists:
	// created by Write, by another appender, or by this one with ref 0.
	for _, how := range []string{"write", "appender", "same appender"} {
		a := db1.Appender()
		key := "rb-" + how
		r := mustAppend(t, a, 0, key, nil, "v", 1, Float(1))
		if err := a.Rollback(); err != nil {
			t.Fatal(err)
		}
		switch how {
		case "write":
			mustWrite(t, db1, pt(key, nil, "v", Float(2), 2))
		case "appender":
			b := db1.Appender()
			mustAppend(t, b, 0, key, nil, "v", 2, Float(2))
			mustCommit(t, b)
		case "same appender":
			mustAppend(t, a, 0, key, nil, "v", 2, Float(2))
			mustCommit(t, a)
		}
		if _, err := a.Append(r, "", nil, "", 3, Float(3)); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s: rolled-back ref after the series was created: %v", how, err)
		}
		if got, want := dump(t, db1, key), key+",[] v 2 2\n"; got != want {
			t.Fatalf("%s: stored:\n%swant:\n%s", how, got, want)
		}
	}
}

// Two appenders append the same new series; both commit. There is one
// series holding both samples, and each appender's ref names it. With
// different kinds, the second Commit fails whole with a conflict naming
// the sample, stores nothing, and its ref is refused afterwards.
func TestAppenderAuditTwoAppendersSameNewSeries(t *testing.T) {
	t.Run("same kind", func(t *testing.T) {
		db := openDB(t, t.TempDir(), quietOptions())
		a, b := db.Appender(), db.Appender()
		ra := mustAppend(t, a, 0, "m", hostTag("x"), "v", 1, Float(1))
		rb := mustAppend(t, b, 0, "m", hostTag("x"), "v", 2, Float(2))
		mustAppend(t, b, 0, "m", hostTag("y"), "v", 2, Float(3))
		mustCommit(t, a)
		mustCommit(t, b)
		ra = mustAppend(t, a, ra, "", nil, "", 3, Float(4))
		rb = mustAppend(t, b, rb, "", nil, "", 4, Float(5))
		if ra != rb {
			t.Fatalf("one series, refs %#x and %#x", uint64(ra), uint64(rb))
		}
		mustCommit(t, a)
		mustCommit(t, b)
		want := "m,[{host x}] v 1 1\nm,[{host x}] v 2 2\nm,[{host x}] v 3 4\nm,[{host x}] v 4 5\nm,[{host y}] v 2 3\n"
		if got := dump(t, db, "m"); got != want {
			t.Fatalf("stored:\n%swant:\n%s", got, want)
		}
		if n := db.cat.Len(); n != 2 {
			t.Fatalf("catalog holds %d series, want 2", n)
		}
	})
	t.Run("other kind", func(t *testing.T) {
		db := openDB(t, t.TempDir(), quietOptions())
		mustWrite(t, db, pt("m", hostTag("old"), "v", Float(0), 0))
		a, b := db.Appender(), db.Appender()
		mustAppend(t, a, 0, "m", hostTag("x"), "v", 1, Float(1))
		rOld := mustAppend(t, b, 0, "m", hostTag("old"), "v", 2, Float(2))
		rb := mustAppend(t, b, 0, "m", hostTag("x"), "v", 2, Int(2))
		mustAppend(t, b, 0, "m", hostTag("y"), "v", 2, Int(3))
		mustCommit(t, a)
		err := b.Commit()
		var pe *PointError
		if !errors.Is(err, ErrFieldTypeConflict) || !errors.As(err, &pe) || pe.Index != 1 {
			t.Fatalf("commit of the other kind: %v", err)
		}
		want := "m,[{host old}] v 0 0\nm,[{host x}] v 1 1\n"
		if got := dump(t, db, "m"); got != want {
			t.Fatalf("stored:\n%swant:\n%s", got, want)
		}
		if _, err := b.Append(rb, "", nil, "", 3, Int(3)); !errors.Is(err, ErrInvalid) {
			t.Fatalf("ref of a series whose commit failed: %v", err)
		}
		mustAppend(t, b, rOld, "", nil, "", 3, Float(3))
		mustCommit(t, b)
		if n := db.cat.Len(); n != 2 {
			t.Fatalf("catalog holds %d series, want 2", n)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		// Many appenders race to create the same fresh series, each
		// round; each commits once per round, so every sample lands.
		db := openDB(t, t.TempDir(), quietOptions())
		const workers, rounds = 4, 30
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		start := make(chan struct{})
		for w := range workers {
			wg.Go(func() {
				a := db.Appender()
				<-start
				for r := range rounds {
					ref, err := a.Append(0, "m", hostTag(fmt.Sprint(r)), "v", int64(w), Int(int64(w)))
					if err == nil {
						_, err = a.Append(ref, "", nil, "", int64(100+w), Int(int64(w)))
					}
					if err == nil {
						err = a.Commit()
					}
					if err != nil {
						errs <- fmt.Errorf("worker %d round %d: %w", w, r, err)
						return
					}
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		res := mustQuery(t, db, rawAll("m"))
		if len(res) != rounds || db.cat.Len() != rounds {
			t.Fatalf("%d series queried, %d in the catalog, want %d", len(res), db.cat.Len(), rounds)
		}
		for _, s := range res {
			if len(s.Samples) != 2*workers {
				t.Fatalf("series %v: %d samples, want %d", s.Tags, len(s.Samples), 2*workers)
			}
		}
	})
}

// A batch holding two samples of one new series with different kinds:
// Write refuses the whole call; the Appender refuses the second sample at
// Append and keeps the batch, so Commit stores exactly what one Write of
// the pending samples (the first) stores. The same by ref, and for a
// series that exists.
func TestAppenderAuditBatchKindConflictParity(t *testing.T) {
	wdb := openDB(t, t.TempDir(), quietOptions())
	adb := openDB(t, t.TempDir(), quietOptions())
	pts := []Point{pt("m", nil, "a", Float(1), 1), pt("m", nil, "b", Bool(true), 1), pt("m", nil, "a", Int(2), 2)}
	err := wdb.Write(pts)
	var pe *PointError
	if !errors.Is(err, ErrFieldTypeConflict) || !errors.As(err, &pe) || pe.Index != 2 {
		t.Fatalf("Write: %v", err)
	}
	a := adb.Appender()
	ra := mustAppend(t, a, 0, "m", nil, "a", 1, Float(1))
	rb := mustAppend(t, a, 0, "m", nil, "b", 1, Bool(true))
	_, err = a.Append(0, "m", nil, "a", 2, Int(2))
	wantErrIs(t, "second kind of a pending series, ref 0", err, ErrFieldTypeConflict)
	_, err = a.Append(ra, "", nil, "", 2, Int(2))
	wantErrIs(t, "second kind of a pending series, by ref", err, ErrFieldTypeConflict)
	_, err = a.Append(rb, "", nil, "", 2, Float(2))
	wantErrIs(t, "float by a pending bool ref", err, ErrFieldTypeConflict)
	if a.pending() != 2 {
		t.Fatalf("%d samples pending, want 2", a.pending())
	}
	mustCommit(t, a)
	mustWrite(t, wdb, pts[:2]...)
	if w, got := dump(t, wdb, "m"), dump(t, adb, "m"); got != w {
		t.Fatalf("Appender stored:\n%sone Write of the pending samples:\n%s", got, w)
	}
	// Kinds are fixed now, by ref (pending and id refs) and by name.
	for _, r := range []SeriesRef{ra, mustAppend(t, a, ra, "", nil, "", 3, Float(3))} {
		for _, v := range kindsBut(KindFloat) {
			_, err := a.Append(r, "", nil, "", 4, v)
			wantErrIs(t, "other kind by ref after commit", err, ErrFieldTypeConflict)
		}
	}
	checkKindFixed(t, adb, rb, "m", nil, "b", KindBool, "bool series")
}

// Validation parity: every point Write refuses for its series or value,
// Append with ref 0 refuses with the same sentinel, whether the tag set is
// new, known or the series exists; every one Write takes, Append takes and
// stores alike.
func TestAppenderAuditValidationParity(t *testing.T) {
	manyTags := make([]Tag, MaxTags+1)
	for i := range manyTags {
		manyTags[i] = Tag{Key: fmt.Sprintf("k%04d", i), Value: "v"}
	}
	// A key that fits MaxKeyLen raw but not escaped.
	commas := strings.Repeat(",", MaxKeyLen/2+10)
	type tc struct {
		name  string
		m     string
		tags  []Tag
		field string
		v     Value
	}
	invalid := []tc{
		{"empty measurement", "", nil, "f", Float(1)},
		{"newline measurement", "m\n", nil, "f", Float(1)},
		{"cr measurement", "m\r", nil, "f", Float(1)},
		{"empty tag key", "m", []Tag{{Key: "", Value: "1"}}, "f", Float(1)},
		{"empty tag value", "m", []Tag{{Key: "k", Value: ""}}, "f", Float(1)},
		{"cr tag value", "m", []Tag{{Key: "k", Value: "a\rb"}}, "f", Float(1)},
		{"newline tag key", "m", []Tag{{Key: "k\n", Value: "1"}}, "f", Float(1)},
		{"duplicate tag same value", "m", []Tag{{Key: "k", Value: "1"}, {Key: "k", Value: "1"}}, "f", Float(1)},
		{"duplicate tag unsorted", "m", []Tag{{Key: "k", Value: "2"}, {Key: "a", Value: "1"}, {Key: "k", Value: "1"}}, "f", Float(1)},
		{"too many tags", "m", manyTags, "f", Float(1)},
		{"empty field", "m", nil, "", Float(1)},
		{"newline field", "m", nil, "f\n", Float(1)},
		{"long field key", "m", nil, strings.Repeat("f", MaxKeyLen+1), Float(1)},
		{"long escaped key", "m", []Tag{{Key: "k", Value: commas}}, "f", Float(1)},
		{"long escaped field", "m", nil, commas, Float(1)},
		{"NaN", "m", nil, "f", Float(math.NaN())},
		{"+Inf", "m", nil, "f", Float(math.Inf(1))},
		{"-Inf", "m", nil, "f", Float(math.Inf(-1))},
		{"no value", "m", nil, "f", Value{}},
		{"long string", "m", nil, "f", String(strings.Repeat("s", MaxStringLen+1))},
	}
	for _, state := range []string{"empty", "set known", "series exists"} {
		t.Run(state, func(t *testing.T) {
			wdb := openDB(t, t.TempDir(), quietOptions())
			adb := openDB(t, t.TempDir(), quietOptions())
			for _, c := range invalid {
				if state != "empty" && c.m != "" && !strings.ContainsAny(c.m, "\r\n") {
					// The tag set (valid tags only) and, for
					// "series exists", the field of the same kind.
					field := "other"
					if state == "series exists" && c.field != "" && !strings.ContainsAny(c.field, "\r\n") && len(c.field) <= 1000 {
						field = c.field
					}
					v := c.v
					if err := validValue(v); err != nil {
						v = Float(1)
					}
					p := pt(c.m, validTagsOf(c.tags), field, v, 0)
					for _, db := range []*DB{wdb, adb} {
						_ = db.Write([]Point{p}) // may be refused (conflict): that's fine
					}
				}
				werr := wdb.Write([]Point{pt(c.m, c.tags, c.field, c.v, 5)})
				a := adb.Appender()
				_, aerr := a.Append(0, c.m, c.tags, c.field, 5, c.v)
				if werr == nil || !errors.Is(werr, ErrInvalid) {
					t.Errorf("%s: Write: %v, want ErrInvalid", c.name, werr)
				}
				if !errors.Is(aerr, ErrInvalid) {
					t.Errorf("%s: Append: %v, want ErrInvalid (Write: %v)", c.name, aerr, werr)
				}
				if a.pending() != 0 {
					t.Errorf("%s: refused sample pending", c.name)
				}
				a.Rollback()
			}
		})
	}

	// Valid edge cases: the same in both, across a flush and a reopen.
	valid := []tc{
		{"escapes", "m ,=\\", []Tag{{Key: "k ,=\\", Value: "v ,=\\"}}, "f ,=\\", Float(1)},
		{"unicode", "mé", []Tag{{Key: "ключ", Value: "値"}}, "f\u00a0", Int(-1)},
		{"unsorted tags", "m", []Tag{{Key: "z", Value: "1"}, {Key: "a", Value: "2"}, {Key: "m", Value: "3"}}, "f", Uint(math.MaxUint64)},
		{"int min", "m", nil, "i", Int(math.MinInt64)},
		{"int max", "m", nil, "j", Int(math.MaxInt64)},
		{"negative zero", "m", nil, "z", Float(math.Copysign(0, -1))},
		{"subnormal", "m", nil, "sub", Float(math.SmallestNonzeroFloat64)},
		{"max float", "m", nil, "big", Float(-math.MaxFloat64)},
		{"empty string", "m", nil, "es", String("")},
		{"binary string", "m", nil, "bs", String("\x00\xff\n\r\"\\")},
		{"bool false", "m", nil, "b", Bool(false)},
		{"key at MaxKeyLen", "m", nil, strings.Repeat("f", MaxKeyLen-2), Float(2)},
		{"many tags", "wide", manyTags[:MaxTags], "f", Float(3)},
	}
	times := []int64{math.MinInt64, -1, 0, 1, math.MaxInt64 - 1}
	wdir, adir := t.TempDir(), t.TempDir()
	wdb, adb := openDB(t, wdir, quietOptions()), openDB(t, adir, quietOptions())
	a := adb.Appender()
	for i, c := range valid {
		ts := times[i%len(times)]
		werr := wdb.Write([]Point{pt(c.m, c.tags, c.field, c.v, ts)})
		_, aerr := a.Append(0, c.m, c.tags, c.field, ts, c.v)
		if werr != nil || aerr != nil {
			t.Errorf("%s: Write %v, Append %v", c.name, werr, aerr)
		}
	}
	mustCommit(t, a)
	ms := []string{"m ,=\\", "mé", "m", "wide"}
	compare := func(when string) {
		t.Helper()
		for _, m := range ms {
			w, g := dump(t, wdb, m), dump(t, adb, m)
			if w != g || w == "" {
				t.Fatalf("%s: measurement %q: Appender stored:\n%.2000s\nWrite stored:\n%.2000s", when, m, g, w)
			}
		}
	}
	compare("in memory")
	mustFlush(t, wdb)
	mustFlush(t, adb)
	wdb, adb = reopen(t, wdb, wdir, quietOptions()), reopen(t, adb, adir, quietOptions())
	compare("after flush and reopen")
}

// validValue reports whether v is a value Write takes.
func validValue(v Value) error {
	return point.ValidateValue(&Field{Key: "f", Value: v})
}

// validTagsOf returns the tags of tags that are valid alone, without
// duplicate keys, at most 10.
func validTagsOf(tags []Tag) []Tag {
	var out []Tag
	seen := map[string]bool{}
	for _, t := range tags {
		if t.Key == "" || t.Value == "" || strings.ContainsAny(t.Key+t.Value, "\r\n") || seen[t.Key] || len(t.Key)+len(t.Value) > 1000 || len(out) == 10 {
			continue
		}
		seen[t.Key] = true
		out = append(out, t)
	}
	return out
}

// A Commit refused for a series limit, with the offending series in the
// middle of the batch, stores nothing: not the samples of existing series
// before it, not the new series before it. It fails as Write of the same
// samples fails, naming the sample. Refs of the batch's new series are
// refused afterwards; refs of existing series are not. Per measurement
// too, with new series of several measurements in one batch.
func TestAppenderAuditSeriesLimitAtomic(t *testing.T) {
	for _, lim := range []string{"MaxSeries", "MaxSeriesPerMeasurement"} {
		t.Run(lim, func(t *testing.T) {
			opts := quietOptions()
			if lim == "MaxSeries" {
				opts.MaxSeries = 4
			} else {
				opts.MaxSeriesPerMeasurement = 2
			}
			wdb := openDB(t, t.TempDir(), opts)
			adb := openDB(t, t.TempDir(), opts)
			seed := []Point{pt("m", hostTag("a"), "v", Float(1), 1), pt("n", hostTag("a"), "v", Float(1), 1)}
			mustWrite(t, wdb, seed...)
			mustWrite(t, adb, seed...)
			// New: m/b, n/b (fit either limit), then m/c (passes it).
			batch := []Point{
				pt("m", hostTag("a"), "v", Float(2), 2),
				pt("m", hostTag("b"), "v", Float(2), 2),
				pt("n", hostTag("b"), "v", Float(2), 2),
				pt("m", hostTag("a"), "v", Float(3), 3),
				pt("m", hostTag("c"), "v", Float(2), 2),
				pt("n", hostTag("a"), "v", Float(3), 3),
			}
			werr := wdb.Write(batch)
			var wpe *PointError
			if !errors.Is(werr, ErrSeriesLimit) || !errors.As(werr, &wpe) || wpe.Index != 4 {
				t.Fatalf("Write: %v", werr)
			}
			a := adb.Appender()
			refs := make([]SeriesRef, len(batch))
			for i, p := range batch {
				refs[i] = mustAppend(t, a, 0, p.Measurement, p.Tags, p.Fields[0].Key, p.Time, p.Fields[0].Value)
			}
			before := adb.Stats().SeriesLimitRefusals
			aerr := a.Commit()
			var ape *PointError
			if !errors.Is(aerr, ErrSeriesLimit) || !errors.As(aerr, &ape) || ape.Index != wpe.Index {
				t.Fatalf("Commit: %v; Write: %v", aerr, werr)
			}
			if n := adb.Stats().SeriesLimitRefusals - before; n != 1 {
				t.Fatalf("%d refusals counted, want 1", n)
			}
			for _, m := range []string{"m", "n"} {
				if w, g := dump(t, wdb, m), dump(t, adb, m); g != w {
					t.Fatalf("%s after a refused Commit:\n%swant (as Write):\n%s", m, g, w)
				}
			}
			if wdb.cat.Len() != 2 || adb.cat.Len() != 2 {
				t.Fatalf("catalogs hold %d and %d series, want 2", wdb.cat.Len(), adb.cat.Len())
			}
			for _, i := range []int{1, 2, 4} {
				if _, err := a.Append(refs[i], "", nil, "", 9, Float(9)); !errors.Is(err, ErrInvalid) {
					t.Fatalf("ref of new series %d of a refused commit: %v", i, err)
				}
			}
			mustAppend(t, a, refs[0], "", nil, "", 9, Float(9))
			mustAppend(t, a, refs[5], "", nil, "", 9, Float(9))
			// Without the series that passes the limit, the rest fits.
			for i, p := range batch {
				if i != 4 {
					mustAppend(t, a, 0, p.Measurement, p.Tags, p.Fields[0].Key, p.Time, p.Fields[0].Value)
				}
			}
			mustCommit(t, a)
			if adb.cat.Len() != 4 {
				t.Fatalf("catalog holds %d series, want 4", adb.cat.Len())
			}
			// Now full: a new series is refused, existing ones go on, by
			// ref and by name, in the same batch as the refused one.
			mustAppend(t, a, refs[0], "", nil, "", 10, Float(10))
			_, err := a.Append(0, "m", hostTag("d"), "v", 10, Float(10))
			if err != nil {
				t.Fatalf("append of a new series (refused at Commit): %v", err)
			}
			err = a.Commit()
			wantErrIs(t, "commit past the limit", err, ErrSeriesLimit)
			mustAppend(t, a, refs[0], "", nil, "", 10, Float(10))
			mustCommit(t, a)
			if got := dump(t, adb, "m"); !strings.Contains(got, "m,[{host a}] v 10 10\n") || strings.Contains(got, "host d") {
				t.Fatalf("stored:\n%s", got)
			}
		})
	}
}

// A series limit counts series another writer created between Append and
// Commit: the batch's series that exist by then are not new, and the
// others are refused once the limit is reached, as Write would.
func TestAppenderAuditSeriesLimitRace(t *testing.T) {
	opts := quietOptions()
	opts.MaxSeries = 2
	db := openDB(t, t.TempDir(), opts)
	a := db.Appender()
	rx := mustAppend(t, a, 0, "m", hostTag("x"), "v", 1, Float(1))
	mustAppend(t, a, 0, "m", hostTag("y"), "v", 1, Float(1))
	mustWrite(t, db, pt("m", hostTag("x"), "v", Float(0), 0)) // 1 series
	mustCommit(t, a)                                          // x exists, y is the second
	if db.cat.Len() != 2 {
		t.Fatalf("%d series", db.cat.Len())
	}
	mustAppend(t, a, rx, "", nil, "", 2, Float(2))
	mustAppend(t, a, 0, "m", hostTag("z"), "v", 2, Float(2))
	err := a.Commit()
	wantErrIs(t, "third series", err, ErrSeriesLimit)
	want := "m,[{host x}] v 0 0\nm,[{host x}] v 1 1\nm,[{host y}] v 1 1\n"
	if got := dump(t, db, "m"); got != want {
		t.Fatalf("stored:\n%swant:\n%s", got, want)
	}
}

// After a refused Append (invalid value, kind conflict, bad ref, batch
// full) the batch is as it was: Commit stores exactly the accepted
// samples, as one Write of them.
func TestAppenderAuditCommitAfterFailedAppend(t *testing.T) {
	opts := quietOptions()
	opts.Sync = SyncNever // 128 MiB batches: the fsync is not what is tested
	wdb := openDB(t, t.TempDir(), opts)
	adb := openDB(t, t.TempDir(), opts)
	mustWrite(t, wdb, pt("m", nil, "f", Float(0), 0))
	mustWrite(t, adb, pt("m", nil, "f", Float(0), 0))
	a := adb.Appender()
	var accepted []Point
	ok := func(ref SeriesRef, p Point) SeriesRef {
		t.Helper()
		accepted = append(accepted, p)
		return mustAppend(t, a, ref, p.Measurement, p.Tags, p.Fields[0].Key, p.Time, p.Fields[0].Value)
	}
	refused := func(ref SeriesRef, p Point, target error) {
		t.Helper()
		n := a.pending()
		_, err := a.Append(ref, p.Measurement, p.Tags, p.Fields[0].Key, p.Time, p.Fields[0].Value)
		wantErrIs(t, fmt.Sprintf("append %v", p), err, target)
		if a.pending() != n {
			t.Fatalf("refused sample changed the batch: %d pending, was %d", a.pending(), n)
		}
	}
	rf := ok(0, pt("m", nil, "f", Float(1), 1))
	rn := ok(0, pt("m", hostTag("new"), "g", Int(1), 1))
	refused(0, pt("m", nil, "f", Int(2), 2), ErrFieldTypeConflict)
	refused(rn, pt("m", hostTag("new"), "g", String("x"), 2), ErrFieldTypeConflict)
	refused(0, pt("m", hostTag("new2"), "g", Float(math.NaN()), 2), ErrInvalid)
	refused(0, pt("m", hostTag("new3"), "", Float(2), 2), ErrInvalid)
	refused(rf, pt("m", nil, "f", Float(math.Inf(1)), 2), ErrInvalid)
	refused(1<<40, pt("m", nil, "f", Float(2), 2), ErrInvalid)
	refused(0, pt("m", []Tag{{Key: "a", Value: "1"}, {Key: "a", Value: "2"}}, "f", Float(2), 2), ErrInvalid)
	ok(rn, pt("m", hostTag("new"), "g", Int(2), 2))
	ok(0, pt("m", hostTag("new"), "g", Int(3), 1)) // same time as an earlier one: last wins
	ok(rf, pt("m", nil, "f", Float(4), 1))
	// A sample that would pass MaxWriteBytes is refused and the batch
	// kept; a batch of exactly MaxWriteBytes is taken, by Write too.
	big := strings.Repeat("b", MaxStringLen)
	rs := SeriesRef(0)
	for i := 0; ; i++ {
		v := String(big)
		if rest := MaxWriteBytes - a.bytes - point.EntryBytes(String("")); rest < MaxStringLen {
			v = String(big[:rest]) // the last one fills the batch to the byte
		}
		p := pt("big", nil, "s", v, int64(i))
		r, err := a.Append(rs, p.Measurement, p.Tags, p.Fields[0].Key, p.Time, p.Fields[0].Value)
		if err != nil {
			t.Fatalf("sample %d of the big series: %v", i, err)
		}
		rs = r
		accepted = append(accepted, p)
		if a.bytes == MaxWriteBytes {
			break
		}
		if a.bytes > MaxWriteBytes {
			t.Fatalf("batch of %d bytes", a.bytes)
		}
	}
	refused(rs, pt("big", nil, "s", String(""), 99), ErrInvalid)
	refused(rf, pt("m", nil, "f", Float(5), 5), ErrInvalid)
	refused(0, pt("m", hostTag("new4"), "f", Float(5), 5), ErrInvalid)
	_, err := a.Append(rf, "", nil, "", 5, Float(5))
	wantErrIs(t, "batch full", err, point.ErrBatchFull)
	if err := wdb.Write(append(slices.Clone(accepted), pt("m", nil, "f", Float(5), 5))); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Write of one sample past MaxWriteBytes: %v", err)
	}
	if err := wdb.Write(accepted); err != nil {
		t.Fatalf("Write of the accepted samples (exactly MaxWriteBytes): %v", err)
	}
	mustCommit(t, a)
	if w, g := dump(t, wdb, "m"), dump(t, adb, "m"); g != w {
		t.Fatalf("Appender stored:\n%s\nWrite stored:\n%s", g, w)
	}
	// The big series: compared by length, not printed.
	lens := func(db *DB) string {
		var b strings.Builder
		for _, x := range samplesOf(t, mustQuery(t, db, rawAll("big"))) {
			fmt.Fprintf(&b, "%d:%d ", x.Time, len(x.Value.Str()))
		}
		return b.String()
	}
	if w, g := lens(wdb), lens(adb); g != w {
		t.Fatalf("big series: Appender stored %s, Write stored %s", g, w)
	}
}

// The life cycle around Close and reuse: Commit after Close is ErrClosed
// even for an empty batch, and stores nothing (a reopen shows it); Append
// by ref and by name is ErrClosed; Rollback works. An appender is reusable
// after a Commit that failed.
func TestAppenderAuditClosedAndReuse(t *testing.T) {
	dir := t.TempDir()
	opts := quietOptions()
	db := openDB(t, dir, opts)
	a, empty := db.Appender(), db.Appender()
	r := mustAppend(t, a, 0, "m", nil, "v", 1, Float(1))
	mustCommit(t, a)
	r = mustAppend(t, a, r, "", nil, "", 2, Float(2))
	mustAppend(t, a, 0, "m", hostTag("new"), "v", 2, Float(2))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	wantErrIs(t, "empty commit after close", empty.Commit(), ErrClosed)
	wantErrIs(t, "new appender's commit after close", db.Appender().Commit(), ErrClosed)
	_, err := a.Append(r, "", nil, "", 3, Float(3))
	wantErrIs(t, "append by ref after close", err, ErrClosed)
	_, err = a.Append(0, "m", nil, "v", 3, Float(3))
	wantErrIs(t, "append by name after close", err, ErrClosed)
	_, err = a.Append(0, "", nil, "", 3, Value{})
	wantErrIs(t, "invalid append after close", err, ErrClosed)
	wantErrIs(t, "commit after close", a.Commit(), ErrClosed)
	if a.pending() != 0 {
		t.Fatalf("%d pending after a failed commit", a.pending())
	}
	if err := a.Rollback(); err != nil {
		t.Fatalf("rollback after close: %v", err)
	}
	db = openDB(t, dir, opts)
	if got, want := dump(t, db, "m"), "m,[] v 1 1\n"; got != want {
		t.Fatalf("after reopen:\n%swant:\n%s", got, want)
	}
	if n := db.cat.Len(); n != 1 {
		t.Fatalf("catalog holds %d series after reopen, want 1", n)
	}
}

// Every committed sample survives a crash under SyncAlways, with the
// series its batch created only in the WAL; nothing of a rolled-back,
// refused or not yet committed batch is there. After the crash the kinds
// are fixed as committed.
func TestAppenderAuditCrashDurable(t *testing.T) {
	dir := t.TempDir()
	opts := quietOptions()
	opts.Sync = SyncAlways
	opts.DisableBackgroundCompaction = true
	opts.MaxSeries = 6
	db := openDB(t, dir, opts)
	a := db.Appender()
	r1 := mustAppend(t, a, 0, "m", hostTag("1"), "v", 1, Float(1))
	r2 := mustAppend(t, a, 0, "m", hostTag("2"), "v", 1, Int(1))
	mustCommit(t, a)
	mustFlush(t, db) // series 1 and 2 in a segment and the catalog file
	r1 = mustAppend(t, a, r1, "", nil, "", 2, Float(2))
	r3 := mustAppend(t, a, 0, "m", hostTag("3"), "v", 2, String("s")) // only in the WAL
	mustAppend(t, a, r2, "", nil, "", 1, Int(11))                     // overwrites
	mustCommit(t, a)
	mustAppend(t, a, r3, "", nil, "", 3, String("t"))
	mustAppend(t, a, 0, "m", hostTag("4"), "v", 3, Bool(true))
	mustCommit(t, a)
	// Rolled back.
	mustAppend(t, a, r1, "", nil, "", 4, Float(-4))
	mustAppend(t, a, 0, "m", hostTag("rb"), "v", 4, Float(-4))
	a.Rollback()
	// Refused at Commit for the series limit (6 would be the 7th).
	mustAppend(t, a, r1, "", nil, "", 5, Float(-5))
	for _, h := range []string{"5", "6", "7"} {
		mustAppend(t, a, 0, "m", hostTag(h), "v", 5, Float(-5))
	}
	wantErrIs(t, "commit past MaxSeries", a.Commit(), ErrSeriesLimit)
	mustDelete(t, db, Selector{Measurement: "m", Tags: hostTag("4")})
	mustAppend(t, a, 0, "m", hostTag("4"), "v", 6, Bool(false))
	mustCommit(t, a)
	// Pending, not committed, at the crash.
	mustAppend(t, a, r1, "", nil, "", 7, Float(-7))
	want := "m,[{host 1}] v 1 1\nm,[{host 1}] v 2 2\n" +
		"m,[{host 2}] v 1 11\n" +
		"m,[{host 3}] v 2 s\nm,[{host 3}] v 3 t\n" +
		"m,[{host 4}] v 6 false\n"
	if got := dump(t, db, "m"); got != want {
		t.Fatalf("before the crash:\n%swant:\n%s", got, want)
	}
	crash := crashCopy(t, dir)
	cdb := openDB(t, crash, opts)
	if got := dump(t, cdb, "m"); got != want {
		t.Fatalf("after the crash:\n%swant:\n%s", got, want)
	}
	if n := cdb.cat.Len(); n != 4 {
		t.Fatalf("catalog holds %d series after the crash, want 4", n)
	}
	checkKindFixed(t, cdb, 0, "m", hostTag("3"), "v", KindString, "after the crash")
	checkKindFixed(t, cdb, 0, "m", hostTag("4"), "v", KindBool, "after the crash, deleted series")
	// The crashed copy takes new series up to the limit, no more.
	ca := cdb.Appender()
	mustAppend(t, ca, 0, "m", hostTag("5"), "v", 8, Float(8))
	mustAppend(t, ca, 0, "m", hostTag("6"), "v", 8, Float(8))
	mustCommit(t, ca)
	mustAppend(t, ca, 0, "m", hostTag("7"), "v", 8, Float(8))
	wantErrIs(t, "commit past MaxSeries after the crash", ca.Commit(), ErrSeriesLimit)
}

// A delete between two commits removes the samples committed before it,
// also those at the time a later commit writes again, and keeps the later
// ones; it does not touch a pending batch, which commits after it.
func TestAppenderAuditDeleteBetweenCommits(t *testing.T) {
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	db := openDB(t, t.TempDir(), opts)
	a := db.Appender()
	r := mustAppend(t, a, 0, "m", nil, "v", 5, Float(1))
	mustAppend(t, a, r, "", nil, "", 6, Float(1))
	mustCommit(t, a)
	mustAppend(t, a, r, "", nil, "", 5, Float(2)) // pending across the delete
	mustAppend(t, a, 0, "m", hostTag("p"), "v", 6, Float(2))
	if err := db.Delete(context.Background(), Selector{Measurement: "m"}); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, db, "m"); got != "" {
		t.Fatalf("after delete:\n%s", got)
	}
	mustCommit(t, a)
	want := "m,[] v 5 2\nm,[{host p}] v 6 2\n"
	if got := dump(t, db, "m"); got != want {
		t.Fatalf("stored:\n%swant:\n%s", got, want)
	}
	mustFlush(t, db)
	mustCompact(t, db)
	if got := dump(t, db, "m"); got != want {
		t.Fatalf("after flush and compaction:\n%swant:\n%s", got, want)
	}
}

// Names full of the characters series keys escape, with series limits on
// (so Commit parses each new series' key for its measurement) and with
// other writes creating some of a pending batch's series before its Commit
// (so Commit looks them up by key): the Appender stores what Write stores.
func TestAppenderAuditEscapedNamesParity(t *testing.T) {
	alphabet := []string{"a", "b", ",", " ", "=", "\\", "\"", "é", "\\,", "\\ "}
	r := rand.New(rand.NewPCG(7, 11))
	name := func() string {
		var b strings.Builder
		for range 1 + r.IntN(3) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	var all []escSeries
	seen := map[string]bool{}
	for len(all) < 60 {
		s := escSeries{m: name(), field: name(), kind: allKinds[r.IntN(len(allKinds))].Kind()}
		keys := map[string]bool{}
		for range r.IntN(3) {
			k := name()
			if !keys[k] {
				keys[k] = true
				s.tags = append(s.tags, Tag{Key: k, Value: name()})
			}
		}
		key := string(point.AppendSeriesKey(nil, s.m, sortedTags(s.tags), s.field))
		// One kind per key, whatever the random draw.
		if seen[key] {
			continue
		}
		seen[key] = true
		all = append(all, s)
	}
	value := func(k Kind, i int) Value {
		switch k {
		case KindFloat:
			return Float(float64(i) + 0.5)
		case KindInt:
			return Int(int64(-i))
		case KindUint:
			return Uint(uint64(i))
		case KindBool:
			return Bool(i%2 == 0)
		}
		return String(fmt.Sprint("s", i))
	}
	for _, lim := range []struct{ all, perMeas int }{{1 << 20, 1 << 20}, {40, 3}} {
		t.Run(fmt.Sprintf("limits %d %d", lim.all, lim.perMeas), func(t *testing.T) {
			escapedNamesParity(t, r, all, lim.all, lim.perMeas, value)
		})
	}
}

func escapedNamesParity(t *testing.T, r *rand.Rand, all []escSeries, maxAll, maxMeas int, value func(Kind, int) Value) {
	opts := quietOptions()
	opts.MaxSeries = maxAll
	opts.MaxSeriesPerMeasurement = maxMeas
	opts.DisableBackgroundCompaction = true
	wdir, adir := t.TempDir(), t.TempDir()
	wdb, adb := openDB(t, wdir, opts), openDB(t, adir, opts)
	wrec, arec := &recorder{t: t}, &recorder{t: t}
	for _, x := range []struct {
		db  *DB
		rec *recorder
	}{{wdb, wrec}, {adb, arec}} {
		if _, err := x.db.Subscribe(x.rec); err != nil {
			t.Fatal(err)
		}
	}
	a := adb.Appender()
	refs := make([]SeriesRef, len(all))
	ts := int64(0)
	refused := 0
	for round := range 60 {
		var batch, others []Point
		saved := slices.Clone(refs)
		for range 1 + r.IntN(10) {
			i := r.IntN(len(all))
			s := all[i]
			ts++
			p := pt(s.m, s.tags, s.field, value(s.kind, int(ts)), ts%17)
			batch = append(batch, p)
			ref := refs[i]
			if r.IntN(3) == 0 {
				ref = 0
			}
			got, err := a.Append(ref, p.Measurement, p.Tags, p.Fields[0].Key, p.Time, p.Fields[0].Value)
			if err != nil {
				t.Fatalf("round %d: append %q %v %q: %v", round, s.m, s.tags, s.field, err)
			}
			refs[i] = got
		}
		// Other writes before the Commit, some of the batch's series.
		for range r.IntN(4) {
			s := all[r.IntN(len(all))]
			ts++
			others = append(others, pt(s.m, s.tags, s.field, value(s.kind, int(ts)), ts%17))
		}
		if len(others) > 0 {
			werr, aerr := wdb.Write(others), adb.Write(others)
			if errClass(werr) != errClass(aerr) || (werr != nil && !errors.Is(werr, ErrSeriesLimit)) {
				t.Fatalf("round %d: other writes: %v and %v", round, werr, aerr)
			}
		}
		werr, aerr := wdb.Write(batch), a.Commit()
		if (werr == nil) != (aerr == nil) || (werr != nil && (!errors.Is(werr, ErrSeriesLimit) || !errors.Is(aerr, ErrSeriesLimit))) {
			t.Fatalf("round %d: Write %v, Commit %v", round, werr, aerr)
		}
		if aerr != nil {
			refused++
			// Refs of the refused batch's new series are refused;
			// go back to the refs from before it.
			refs = saved
		}
		if round%10 == 9 {
			mustFlush(t, wdb)
			mustFlush(t, adb)
		}
	}
	if maxMeas < 1<<20 && refused == 0 {
		t.Fatalf("no batch refused: the limits were not exercised")
	}
	// The change feed sees each Commit as the Write of its samples.
	if len(wrec.logged) != len(arec.logged) || len(wrec.failed)+len(arec.failed) != 0 {
		t.Fatalf("feed: %d records via Write, %d via the Appender; failed %v %v",
			len(wrec.logged), len(arec.logged), wrec.failed, arec.failed)
	}
	for i := range wrec.logged {
		w, g := wrec.logged[i], arec.logged[i]
		if w.Seq != g.Seq || w.Samples != g.Samples || w.Format != g.Format || string(w.Payload) != string(g.Payload) {
			t.Fatalf("feed record %d: Write %+v, Appender %+v", i, w, g)
		}
	}
	compare := func(when string) {
		t.Helper()
		ms := adb.cat.Measurements()
		if w := wdb.cat.Measurements(); !slices.Equal(w, ms) {
			t.Fatalf("%s: measurements %q, Write made %q", when, ms, w)
		}
		for _, m := range ms {
			if w, g := dump(t, wdb, m), dump(t, adb, m); w != g {
				t.Fatalf("%s: measurement %q: Appender stored:\n%sWrite stored:\n%s", when, m, g, w)
			}
		}
		if wdb.cat.Len() != adb.cat.Len() {
			t.Fatalf("%s: %d series, Write made %d", when, adb.cat.Len(), wdb.cat.Len())
		}
	}
	compare("in memory")
	wdb, adb = reopen(t, wdb, wdir, opts), reopen(t, adb, adir, opts)
	compare("after reopen")
}

type escSeries struct {
	m     string
	tags  []Tag
	field string
	kind  Kind
}

// Pending refs across the ref table's chunks: two appenders interleave new
// series past several chunk boundaries (so neither's slots are contiguous),
// re-append each by its pending ref in the same batch and, once committed,
// on the other appender; one of them rolls back, and its refs are refused
// while the other's all name their own series.
func TestAppenderAuditManyPendingRefs(t *testing.T) {
	n := 2*refChunkLen + 100
	if testing.Short() {
		n = refChunkLen + 10
	}
	opts := quietOptions()
	opts.Sync = SyncNever
	db := openDB(t, t.TempDir(), opts)
	a, b := db.Appender(), db.Appender()
	ra, rb := make([]SeriesRef, n), make([]SeriesRef, n)
	for i := range n {
		ra[i] = mustAppend(t, a, 0, "a", hostTag(fmt.Sprint(i)), "v", 1, Int(int64(i)))
		rb[i] = mustAppend(t, b, 0, "b", hostTag(fmt.Sprint(i)), "v", 1, Int(int64(i)))
	}
	for i := n - 1; i >= 0; i-- {
		if r := mustAppend(t, a, ra[i], "", nil, "", 2, Int(int64(i))); r != ra[i] {
			t.Fatalf("pending ref %d changed before Commit", i)
		}
	}
	mustCommit(t, a)
	if err := b.Rollback(); err != nil {
		t.Fatal(err)
	}
	c := db.Appender()
	for i := range n {
		if _, err := c.Append(rb[i], "", nil, "", 3, Int(-1)); !errors.Is(err, ErrInvalid) {
			t.Fatalf("rolled-back ref %d: %v", i, err)
		}
		// By the pending ref of a's committed batch, on another appender.
		ra[i] = mustAppend(t, c, ra[i], "", nil, "", 3, Int(int64(i)))
	}
	mustCommit(t, c)
	res := mustQuery(t, db, rawAll("a"))
	if len(res) != n {
		t.Fatalf("%d series, want %d", len(res), n)
	}
	for _, s := range res {
		if len(s.Samples) != 3 {
			t.Fatalf("series %v: %d samples", s.Tags, len(s.Samples))
		}
		for _, x := range s.Samples {
			if fmt.Sprint(x.Value.Int()) != s.Tags[0].Value {
				t.Fatalf("series %v holds %v at %d", s.Tags, x.Value, x.Time)
			}
		}
	}
	if got := len(mustQuery(t, db, rawAll("b"))); got != 0 || db.cat.Len() != n {
		t.Fatalf("%d series of the rolled-back batch, %d in the catalog", got, db.cat.Len())
	}
}

// The Appender keeps nothing of the caller's tag slice: a decoder that
// reuses one slice for every sample, overwriting it after each Append,
// gets each sample in the series it named at the time.
func TestAppenderAuditReusedTagSlice(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	a := db.Appender()
	tags := make([]Tag, 2)
	buf := []byte("host-0")
	want := ""
	for i := range 5 {
		buf[len(buf)-1] = byte('0' + i)
		tags[0] = Tag{Key: "z", Value: string(buf)} // unsorted on purpose
		tags[1] = Tag{Key: "a", Value: "x"}
		mustAppend(t, a, 0, "m", tags, "v", int64(i), Int(int64(i)))
		tags[0].Value, tags[1].Value = "changed", "changed"
		want += fmt.Sprintf("m,[{a x} {z host-%d}] v %d %d\n", i, i, i)
	}
	mustCommit(t, a)
	if got := dump(t, db, "m"); got != want {
		t.Fatalf("stored:\n%swant:\n%s", got, want)
	}
}
