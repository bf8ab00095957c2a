package engine

import (
	"fmt"
	"runtime"
	"testing"
)

// Wide points: resolving a point's fields and tags must cost about the
// same per field and per tag at the limits as for narrow points. These
// tests check the algorithmic properties that make it so, and count
// allocations; they time nothing (BenchmarkWideTags and
// BenchmarkWideFields measure time).

// checkFieldIndex checks that the catalog of db resolves every series of
// every tag set by its key to its id. That a set with many fields finds
// each in O(1) is checked where the catalog lives (internal/catalog's
// TestFieldIndex).
func checkFieldIndex(t *testing.T, db *DB) {
	t.Helper()
	for id := range uint64(db.cat.Len()) {
		m, _ := db.cat.Meta(id)
		if got, ok := db.cat.Lookup(m.Key); !ok || got != id {
			t.Fatalf("Lookup(%q) = %d, %v; want %d", m.Key, got, ok, id)
		}
	}
}

func TestWideFieldLookup(t *testing.T) {
	dir := t.TempDir()
	opts := quietOptions()
	opts.Sync = SyncNever
	db := openDB(t, dir, opts)
	host := []Tag{{Key: "host", Value: "a"}}
	// One point creating a wide set, a set growing one field per write to
	// three times the fields the catalog scans (8: its fieldScanMax), and
	// a narrow set.
	mustWrite(t, db, Point{Measurement: "wide", Tags: host, Fields: wideFields(3000), Time: 1})
	for i := range 3 * 8 {
		mustWrite(t, db, pt("grow", host, fmt.Sprintf("f%d", i), Int(int64(i)), int64(i)))
	}
	mustWrite(t, db, Point{Measurement: "narrow", Tags: host, Fields: wideFields(8), Time: 1})
	checkFieldIndex(t, db)
	// A known wide set resolves without creating anything; a duplicate
	// field is still refused.
	before := db.Stats().Series
	mustWrite(t, db, Point{Measurement: "wide", Tags: host, Fields: wideFields(3000), Time: 2})
	if n := db.Stats().Series; n != before {
		t.Fatalf("rewriting known fields created %d series", n-before)
	}
	dup := append(wideFields(3000), Field{Key: "field00007", Value: Float(1)})
	if err := db.Write([]Point{{Measurement: "wide", Tags: host, Fields: dup, Time: 3}}); err == nil {
		t.Fatal("a duplicate field among 3001 was accepted")
	}
	// The catalog loaded at Open builds the same index.
	mustFlush(t, db)
	db = reopen(t, db, dir, opts)
	checkFieldIndex(t, db)
	if res := mustQuery(t, db, rawAll("wide")); len(res) != 3000 || len(res[0].Samples) != 2 {
		t.Fatalf("read back %d wide series", len(res))
	}
}

// allocsPerOp runs f runs times and returns the allocations and bytes
// allocated per run.
func allocsPerOp(runs int, f func(i int)) (allocs, bytes float64) {
	f(-1) // warm up
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range runs {
		f(i)
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(runs), float64(after.TotalAlloc-before.TotalAlloc) / float64(runs)
}

// TestWidePointAllocsLinear checks that the allocations of a Write grow
// about linearly with the point's tags (each point a new series) and with
// its fields (a known tag set): per tag or field, the widest point may
// allocate at most twice as much as a narrow one.
func TestWidePointAllocsLinear(t *testing.T) {
	const runs = 8
	opts := quietOptions()
	opts.Sync = SyncNever
	opts.DisableBackgroundCompaction = true
	opts.MemTableBytes = 1 << 30 // nothing flushes while counting
	newTags := func(n int) (float64, float64) {
		db := openDB(t, t.TempDir(), opts)
		pts := make([]Point, runs+1)
		for i := range pts {
			pts[i] = Point{Measurement: "wide", Tags: wideTags(i, n), Fields: []Field{{Key: "v", Value: Float(1)}}}
		}
		a, b := allocsPerOp(runs, func(i int) { mustWrite(t, db, pts[i+1]) })
		if s := db.Stats().Series; s != runs+1 {
			t.Fatalf("%d series, want %d", s, runs+1)
		}
		return a / float64(n), b / float64(n)
	}
	knownFields := func(n int) (float64, float64) {
		db := openDB(t, t.TempDir(), opts)
		p := Point{Measurement: "wide", Tags: []Tag{{Key: "host", Value: "a"}}, Fields: wideFields(n)}
		mustWrite(t, db, p)
		a, b := allocsPerOp(runs, func(i int) {
			p.Time = int64(i + 2)
			mustWrite(t, db, p)
		})
		return a / float64(n), b / float64(n)
	}
	for _, c := range []struct {
		name       string
		f          func(n int) (float64, float64)
		small, big int
	}{
		{"tags", newTags, 64, MaxTags},
		{"fields", knownFields, 512, MaxFields},
	} {
		sa, sb := c.f(c.small)
		ba, bb := c.f(c.big)
		t.Logf("%s: %d: %.3f allocs, %.1f B each; %d: %.3f allocs, %.1f B each", c.name, c.small, sa, sb, c.big, ba, bb)
		// A small constant covers allocations that do not scale at all.
		if ba > 2*sa+0.05 || bb > 2*sb+1 {
			t.Errorf("%s: per %s, %d allocate %.3f times %.1f B; %d allocate %.3f times %.1f B: more than twice",
				c.name, c.name, c.big, ba, bb, c.small, sa, sb)
		}
	}
}
