package engine

import (
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"github.com/stratadb/strata/internal/catalog"
	"github.com/stratadb/strata/internal/point"
)

// TestWriteReusedTagArray writes through one []Tag that the caller changes
// in place between writes, and through the same array under another
// measurement: the write path's cache of tag sets by array address must
// never put a point in the series of the array's earlier content.
func TestWriteReusedTagArray(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	tags := []Tag{{Key: "d", Value: "a"}, {Key: "s", Value: "x"}}
	write := func(m string, tm int64, v int64) {
		t.Helper()
		mustWrite(t, db, Point{Measurement: m, Tags: tags, Fields: []Field{{Key: "v", Value: Int(v)}}, Time: tm})
	}
	write("m", 1, 1)
	write("m", 2, 2) // a hit
	tags[0].Value = "b"
	write("m", 3, 3) // same address, another series
	write("n", 4, 4) // same address and tags, another measurement
	tags[1] = Tag{Key: "s", Value: "y"}
	write("m", 5, 5)
	tags[0].Value = "a"
	tags[1].Value = "x"
	write("m", 6, 6) // back to the first series
	tags[0], tags[1] = tags[1], tags[0]
	write("m", 7, 7) // the same tags out of order: the same series
	write("m", 8, 8)
	tags[0], tags[1] = tags[1], tags[0]
	write("m", 9, 9)
	if tags[0].Key != "d" || tags[1].Key != "s" {
		t.Fatalf("Write changed the caller's tags: %v", tags)
	}
	want := map[string][]int64{
		"m,d=a,s=x v": {1, 2, 6, 7, 8, 9},
		"m,d=b,s=x v": {3},
		"m,d=b,s=y v": {5},
		"n,d=b,s=x v": {4},
	}
	for _, m := range []string{"m", "n"} {
		for _, s := range mustQuery(t, db, Query{Selector: Selector{Measurement: m}}) {
			key := s.Key()
			var got []int64
			for _, smp := range s.Samples {
				if smp.Value.Int() != smp.Time {
					t.Fatalf("%s: sample %+v", key, smp)
				}
				got = append(got, smp.Time)
			}
			if w, ok := want[key]; !ok || len(got) != len(w) || !slices.Equal(got, w) {
				t.Fatalf("%s holds %v, want %v", key, got, w)
			}
			delete(want, key)
		}
	}
	if len(want) != 0 {
		t.Fatalf("series missing: %v", want)
	}
}

// TestSetCacheAssociative fills a quarter of the tag-set cache with
// distinct tag arrays and checks that nearly all of them hit on the next
// round: a direct-mapped cache loses about a fifth of them to collisions
// at this load, a 4-way one almost none. The arrays are carved from one
// backing array, as a caller holding a tag array per device has them, so
// that where the test's heap happens to put them does not decide the
// count.
func TestSetCacheAssociative(t *testing.T) {
	var w writeScratch
	w.sizeSetCache(minSetCache)
	n := len(w.sets) / 4
	arrays := make([][]Tag, n)
	backing := make([]Tag, n)
	sets := make([]*catalog.Set, n)
	cat := catalog.New()
	for i := range n {
		backing[i] = Tag{Key: "device_id", Value: fmt.Sprintf("dev-%05d", i)}
		arrays[i] = backing[i : i+1 : i+1]
		if _, err := cat.AddKey([]byte(point.SeriesKey("m", arrays[i], "f")), KindFloat); err != nil {
			t.Fatal(err)
		}
		sets[i] = cat.FindSet(catalog.HashSet("m", arrays[i]), "m", arrays[i])
	}
	for round := range 3 {
		hits := 0
		for i, tags := range arrays {
			set, slot := w.cachedSet("m", tags)
			switch {
			case set == sets[i]:
				hits++
			case set != nil:
				t.Fatalf("array %d: cached set %v, want %v", i, set.Tags(), sets[i].Tags())
			default:
				*slot = setCacheEntry{tags: uintptr(unsafe.Pointer(unsafe.SliceData(tags))), set: sets[i]}
			}
		}
		if round > 0 && hits < n*95/100 {
			t.Fatalf("round %d: %d of %d arrays hit the cache", round, hits, n)
		}
	}
	// A changed array at a cached address misses, and its slot is the one
	// that address held.
	arrays[7][0].Value = "other"
	if set, slot := w.cachedSet("m", arrays[7]); set != nil || slot == nil || slot.set != sets[7] {
		t.Fatalf("changed array: set %v, slot %+v", set, slot)
	}
}

// TestSetCacheOffForFreshArrays checks that the tag-set cache turns off
// for a caller whose tag arrays are fresh on every call (a decoder's),
// and back on once the caller reuses its arrays, with every point stored
// in its series either way.
func TestSetCacheOffForFreshArrays(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	const devices = 1024
	reused := make([][]Tag, devices)
	for d := range reused {
		reused[d] = []Tag{{Key: "d", Value: fmt.Sprintf("%04d", d)}}
	}
	call := func(tm int64, fresh bool) {
		t.Helper()
		pts := make([]Point, devices)
		for d := range pts {
			tags := reused[d]
			if fresh {
				tags = slices.Clone(tags)
			}
			pts[d] = Point{Measurement: "m", Tags: tags, Fields: []Field{{Key: "v", Value: Int(tm)}}, Time: tm}
		}
		mustWrite(t, db, pts...)
	}
	tm := int64(0)
	for range 3 {
		tm++
		call(tm, true)
	}
	if !db.w.setCacheOff {
		t.Fatal("the cache stayed on for fresh tag arrays")
	}
	for range 3 {
		tm++
		call(tm, false)
	}
	if db.w.setCacheOff {
		t.Fatal("the cache stayed off for reused tag arrays")
	}
	res := mustQuery(t, db, rawAll("m"))
	if len(res) != devices {
		t.Fatalf("%d series, want %d", len(res), devices)
	}
	for _, s := range res {
		if len(s.Samples) != int(tm) {
			t.Fatalf("series %v: %d samples, want %d", s.Tags, len(s.Samples), tm)
		}
		for i, x := range s.Samples {
			if x.Time != int64(i+1) || x.Value.Int() != int64(i+1) {
				t.Fatalf("series %v sample %d: %d=%v", s.Tags, i, x.Time, x.Value)
			}
		}
	}
}

// TestPresolveMixedCall writes one call that presolve looks up at once:
// known series with fresh sorted and unsorted tag arrays, the same tags
// under another measurement, new series and points without tags, and
// checks that every point lands in its series.
func TestPresolveMixedCall(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	tagsOf := func(d int) []Tag {
		return []Tag{{Key: "a", Value: fmt.Sprint(d % 3)}, {Key: "d", Value: fmt.Sprintf("%03d", d)}}
	}
	var first []Point
	for d := range 100 {
		first = append(first, Point{Measurement: "m", Tags: tagsOf(d), Fields: []Field{{Key: "v", Value: Int(0)}}, Time: 0})
	}
	mustWrite(t, db, first...)

	db.w.setCacheOff = true // as for a caller whose arrays are always fresh
	var pts []Point
	want := map[string][]int64{} // series key -> times
	add := func(m string, tags []Tag, tm int64) {
		pts = append(pts, Point{Measurement: m, Tags: tags, Fields: []Field{{Key: "v", Value: Int(tm)}}, Time: tm})
		sorted := slices.Clone(tags)
		point.SortTags(sorted)
		key := point.SeriesKey(m, sorted, "v")
		want[key] = append(want[key], tm)
	}
	for d := range 100 {
		want[point.SeriesKey("m", tagsOf(d), "v")] = []int64{0}
	}
	for d := range 150 { // 100 known, 50 new
		tags := tagsOf(d)
		if d%2 == 1 {
			tags[0], tags[1] = tags[1], tags[0] // unsorted: the slow path
		}
		add("m", tags, 1)
		add("n", tagsOf(d), 1) // the same tags, another measurement
	}
	add("m", nil, 1)
	add("m", nil, 2)
	mustWrite(t, db, pts...)
	if pre := db.w.preSets; len(pre) != len(pts) {
		t.Fatalf("presolve looked up %d points, want %d", len(pre), len(pts))
	}
	got := map[string][]int64{}
	for _, m := range []string{"m", "n"} {
		for _, s := range mustQuery(t, db, rawAll(m)) {
			for _, x := range s.Samples {
				if x.Value.Int() != x.Time {
					t.Fatalf("%s: sample %d=%v", s.Key(), x.Time, x.Value)
				}
				got[s.Key()] = append(got[s.Key()], x.Time)
			}
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d series, want %d", len(got), len(want))
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Fatalf("series %s: times %v, want %v", k, got[k], w)
		}
	}
}
