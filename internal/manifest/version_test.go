package manifest

import (
	"slices"
	"testing"
)

// TestVersionReferences follows two segments through an edit: a reader
// holding the old version keeps the dropped segment open, and its last
// reference releases it as obsolete while the kept one stays.
func TestVersionReferences(t *testing.T) {
	a, b, c := &Handle{FileNum: 1}, &Handle{FileNum: 2}, &Handle{FileNum: 3}
	var released []*Handle
	release := func(h *Handle) { released = append(released, h) }

	v1 := NewVersion([MaxLevels][]*Handle{0: {b, a}})
	if !slices.Equal(v1.Levels[0], []*Handle{a, b}) {
		t.Fatalf("L0 not by file number: %v", v1.Levels[0])
	}
	v1.Ref() // a reader
	// A compaction swaps a for c; a failed manifest write abandons it.
	edit := func(levels *[MaxLevels][]*Handle) {
		levels[0] = slices.DeleteFunc(levels[0], func(h *Handle) bool { return h == a })
		levels[1] = append(levels[1], c)
	}
	v2 := v1.Apply(edit)
	if len(v1.Levels[0]) != 2 {
		t.Fatal("Apply changed the version it started from")
	}
	v2.Abandon()
	if c.refs.Load() != 0 || a.refs.Load() != 1 {
		t.Fatalf("abandon left references: a %d, c %d", a.refs.Load(), c.refs.Load())
	}
	v2 = v1.Apply(edit)
	if got := v2.Record(); !slices.Equal(got, []Segment{{FileNum: 2, Level: 0}, {FileNum: 3, Level: 1}}) {
		t.Fatalf("record %v", got)
	}
	Retire(v1, v2, release)
	if len(released) != 0 || !a.Obsolete() || b.Obsolete() || v1.Refs() != 1 {
		t.Fatalf("after retire: released %v, a obsolete %v, b obsolete %v, refs %d", released, a.Obsolete(), b.Obsolete(), v1.Refs())
	}
	v1.Unref(release) // the reader is done
	if !slices.Equal(released, []*Handle{a}) {
		t.Fatalf("released %v, want only the dropped segment", released)
	}
	v2.Unref(release)
	if !slices.Equal(released, []*Handle{a, b, c}) {
		t.Fatalf("released %v after the last version", released)
	}
}

// TestFilesObsolete checks the allocator and what a manifest records as
// obsolete: allocated or live numbers the version does not list, until
// they are forgotten.
func TestFilesObsolete(t *testing.T) {
	live := &Handle{FileNum: 4}
	v := NewVersion([MaxLevels][]*Handle{2: {live}})
	var f Files
	f.Reset(7, v)
	if n := f.Alloc(); n != 7 || f.Next() != 8 {
		t.Fatalf("alloc %d, next %d", n, f.Next())
	}
	f.Alloc()
	if got := f.Obsolete(v); !slices.Equal(got, []uint64{7, 8}) {
		t.Fatalf("obsolete %v", got)
	}
	f.Forget(7)
	if got := f.Obsolete(NewVersion([MaxLevels][]*Handle{})); !slices.Equal(got, []uint64{4, 8}) {
		t.Fatalf("obsolete after forget %v", got)
	}
}
