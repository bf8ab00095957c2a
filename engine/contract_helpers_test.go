package engine_test

// Black-box contract tests: they use only the exported API of package engine
// and hold it to the sentences of docs/design.md's "Public API" and "Opening a
// directory" sections. Each check runs against the same data in every state
// the data can be in (memtable, segment, compacted, WAL replay, read-only),
// since the contract is the same in all of them. None of these tests may
// be skipped; a case the engine fails is kept out until it is fixed.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

// cStep is one mutation of a database under test.
type cStep func(t *testing.T, db *engine.DB)

// cState names a way to bring written data to the state it is checked in.
type cState struct {
	name string
	// flushEach flushes after every step (so deletes land as tombstones
	// over segments); then fin runs.
	flushEach bool
	fin       func(t *testing.T, db *engine.DB, dir string, opts *engine.Options) *engine.DB
	// tune, when set, changes the options of this state.
	tune func(o *engine.Options)
}

func cReopen(readOnly bool) func(t *testing.T, db *engine.DB, dir string, opts *engine.Options) *engine.DB {
	return func(t *testing.T, db *engine.DB, dir string, opts *engine.Options) *engine.DB {
		t.Helper()
		if err := db.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		o := *opts
		o.ReadOnly = readOnly
		db2, err := engine.Open(dir, &o)
		if err != nil {
			t.Fatalf("reopen (read-only %v): %v", readOnly, err)
		}
		return db2
	}
}

func cFlush(t *testing.T, db *engine.DB) {
	t.Helper()
	if err := db.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

func cCompact(t *testing.T, db *engine.DB) {
	t.Helper()
	if err := db.Compact(); err != nil {
		t.Fatalf("compact: %v", err)
	}
}

var cStates = []cState{
	{name: "memtable", fin: func(t *testing.T, db *engine.DB, _ string, _ *engine.Options) *engine.DB { return db }},
	{name: "flushed", fin: func(t *testing.T, db *engine.DB, _ string, _ *engine.Options) *engine.DB { cFlush(t, db); return db }},
	{name: "flush-each", flushEach: true, fin: func(t *testing.T, db *engine.DB, _ string, _ *engine.Options) *engine.DB { return db }},
	{name: "compacted", flushEach: true, fin: func(t *testing.T, db *engine.DB, _ string, _ *engine.Options) *engine.DB {
		cFlush(t, db)
		cCompact(t, db)
		return db
	}},
	{name: "wal-replay", fin: cReopen(false)},
	{name: "compacted-reopened", flushEach: true, fin: func(t *testing.T, db *engine.DB, dir string, opts *engine.Options) *engine.DB {
		cFlush(t, db)
		cCompact(t, db)
		return cReopen(false)(t, db, dir, opts)
	}},
	{name: "read-only", flushEach: true, fin: cReopen(true)},
	{name: "read-only-wal", fin: cReopen(true)},
	// A tiny memtable: writes rotate it and flush in the background, so
	// reads merge several memtables and segments.
	{name: "small-memtable", tune: func(o *engine.Options) { o.MemTableBytes = 2 << 10 },
		fin: func(t *testing.T, db *engine.DB, _ string, _ *engine.Options) *engine.DB { return db }},
}

// cOpts returns quiet options with a fixed clock.
func cOpts(now int64) *engine.Options {
	return &engine.Options{
		Sync:   engine.SyncNever,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:    func() time.Time { return time.Unix(0, now) },
	}
}

// inStates runs steps on a fresh database in every state and then check.
// A nil opts means cOpts(0).
func inStates(t *testing.T, opts *engine.Options, steps []cStep, check func(t *testing.T, db *engine.DB)) {
	t.Helper()
	runStates(t, opts, cStates, steps, check)
}

// inWritableStates is inStates without the read-only state, for checks
// that write.
func inWritableStates(t *testing.T, opts *engine.Options, steps []cStep, check func(t *testing.T, db *engine.DB)) {
	t.Helper()
	runStates(t, opts, slices.DeleteFunc(slices.Clone(cStates), func(s cState) bool { return strings.HasPrefix(s.name, "read-only") }), steps, check)
}

func runStates(t *testing.T, opts *engine.Options, states []cState, steps []cStep, check func(t *testing.T, db *engine.DB)) {
	t.Helper()
	if opts == nil {
		opts = cOpts(0)
	}
	for _, st := range states {
		t.Run(st.name, func(t *testing.T) {
			opts := opts
			if st.tune != nil {
				o := *opts
				st.tune(&o)
				opts = &o
			}
			dir := t.TempDir()
			db, err := engine.Open(dir, opts)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			for _, s := range steps {
				s(t, db)
				if st.flushEach {
					cFlush(t, db)
				}
			}
			db = st.fin(t, db, dir, opts)
			defer db.Close()
			check(t, db)
		})
	}
}

func cWrite(pts ...engine.Point) cStep {
	return func(t *testing.T, db *engine.DB) {
		t.Helper()
		if err := db.Write(pts); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
}

func cDelete(s engine.Selector) cStep {
	return func(t *testing.T, db *engine.DB) {
		t.Helper()
		if err := db.Delete(context.Background(), s); err != nil {
			t.Fatalf("delete %+v: %v", s, err)
		}
	}
}

// cp builds a point with one field; tags as "k=v" strings.
func cp(m string, field string, v engine.Value, ts int64, tags ...string) engine.Point {
	p := engine.Point{Measurement: m, Fields: []engine.Field{{Key: field, Value: v}}, Time: ts}
	for _, kv := range tags {
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			panic("bad tag " + kv)
		}
		p.Tags = append(p.Tags, engine.Tag{Key: k, Value: val})
	}
	return p
}

// cKeyEsc escapes as line protocol does (and the canonical key defines).
func cKeyEsc(s string, eq bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ',' || c == ' ' || c == '\\' || (eq && c == '=') {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// cKey is the canonical series key, written from its definition in docs/design.md.
func cKey(m string, tags []engine.Tag, field string) string {
	tags = slices.Clone(tags)
	slices.SortFunc(tags, func(a, b engine.Tag) int { return strings.Compare(a.Key, b.Key) })
	var b strings.Builder
	b.WriteString(cKeyEsc(m, false))
	for _, t := range tags {
		b.WriteString("," + cKeyEsc(t.Key, true) + "=" + cKeyEsc(t.Value, true))
	}
	b.WriteString(" " + cKeyEsc(field, true))
	return b.String()
}

// cFmt renders a result as one line per sample, keyed canonically, so that
// a mismatch prints readably and comparison includes order, time, kind and
// value.
func cFmt(res []engine.Series) string {
	var b strings.Builder
	for _, s := range res {
		if !slices.IsSortedFunc(s.Tags, func(a, b engine.Tag) int { return strings.Compare(a.Key, b.Key) }) {
			fmt.Fprintf(&b, "UNSORTED TAGS ")
		}
		fmt.Fprintf(&b, "%s:", cKey(s.Measurement, s.Tags, s.Field))
		for _, x := range s.Samples {
			fmt.Fprintf(&b, " %d=%s(%s)", x.Time, x.Value.Kind(), x.Value)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func cQuery(t *testing.T, db *engine.DB, q engine.Query) []engine.Series {
	t.Helper()
	res, err := db.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("query %+v: %v", q, err)
	}
	return res
}

func cWantQuery(t *testing.T, db *engine.DB, q engine.Query, want string) {
	t.Helper()
	got := cFmt(cQuery(t, db, q))
	if got != want {
		t.Errorf("query %+v:\ngot:\n%swant:\n%s", q, got, want)
	}
}

func cWantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: err = %v, want %v", what, err, target)
	}
}

// cSortedByKey reports whether series come in canonical key byte order.
func cSortedByKey(res []engine.Series) bool {
	return slices.IsSortedFunc(res, func(a, b engine.Series) int {
		return strings.Compare(cKey(a.Measurement, a.Tags, a.Field), cKey(b.Measurement, b.Tags, b.Field))
	})
}
