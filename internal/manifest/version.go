package manifest

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/stratadb/strata/segment"
)

// Versions: the live set of segments and how it changes.
//
// A version is an immutable list of live segments per level. Readers hold
// a reference to the version they read and each segment counts the
// versions that list it, so compaction never deletes a file under a
// query: a segment that left the current version is closed, and deleted
// when obsolete, at its last reference. Every change (a flush adds an L0
// segment, a compaction swaps inputs for outputs) is one edit: Apply makes
// the next version, the engine writes the manifest that describes it
// (Record) and installs it, and Retire drops the version it replaced.

// MaxLevels is the number of levels of a version.
const MaxLevels = 7

// NewHandle returns the handle of the open segment r, numbered fileNum, at
// level, with tombstones up to tombApplied applied. No version lists it
// yet.
func NewHandle(fileNum uint64, level int, tombApplied uint64, r *segment.Reader) *Handle {
	h := &Handle{FileNum: fileNum, Level: level, Reader: r, Meta: r.Meta()}
	h.TombApplied.Store(tombApplied)
	return h
}

// Handle is an open segment shared by the versions that list it.
type Handle struct {
	FileNum uint64
	Level   int
	// TombApplied: tombstones with seq <= it are applied to (or cannot
	// touch) the segment's data. It only grows, when a manifest edit finds
	// that no live tombstone above it affects the segment.
	TombApplied atomic.Uint64
	Reader      *segment.Reader
	Meta        segment.Meta
	// IDs maps the segment's series to catalog ids, built on first use by
	// the reader that needs it.
	IDs SeriesIDs

	refs     atomic.Int32 // versions that list it
	obsolete atomic.Bool  // removed from the current version: delete at last unref
}

// Obsolete reports whether the segment left the current version: at its
// last reference its file is deleted, not only closed.
func (h *Handle) Obsolete() bool { return h.obsolete.Load() }

// SeriesIDs maps a segment's series to catalog ids, built on first use.
type SeriesIDs struct {
	once  sync.Once
	byPos []uint64 // catalog id of the segment's i-th series
	ok    bool
}

// Get returns the ids by position and whether every series has one,
// calling build the first time.
func (s *SeriesIDs) Get(build func() ([]uint64, bool)) ([]uint64, bool) {
	s.once.Do(func() { s.byPos, s.ok = build() })
	return s.byPos, s.ok
}

// Version is an immutable set of live segments. Queries hold a reference
// to the version they read, so compaction never deletes a file under them.
type Version struct {
	refs   atomic.Int32
	Levels [MaxLevels][]*Handle // L0 by FileNum ascending (oldest first); others by FirstKey
}

func sortLevels(v *Version) {
	slices.SortFunc(v.Levels[0], func(a, b *Handle) int { return cmp.Compare(a.FileNum, b.FileNum) })
	for l := 1; l < MaxLevels; l++ {
		slices.SortFunc(v.Levels[l], func(a, b *Handle) int { return strings.Compare(string(a.Meta.FirstKey), string(b.Meta.FirstKey)) })
	}
}

// NewVersion returns a version listing levels, each segment referenced.
// The caller holds its one reference.
func NewVersion(levels [MaxLevels][]*Handle) *Version {
	v := &Version{Levels: levels}
	v.refs.Store(1)
	for _, level := range v.Levels {
		for _, h := range level {
			h.refs.Add(1)
		}
	}
	sortLevels(v)
	return v
}

// Ref takes a reference to v.
func (v *Version) Ref() { v.refs.Add(1) }

// Refs returns the references held to v.
func (v *Version) Refs() int32 { return v.refs.Load() }

// Unref drops a reference; the last one releases the version's segments,
// calling release for each that no version lists any more: the caller
// closes it and, when it is obsolete, deletes its file.
func (v *Version) Unref(release func(*Handle)) {
	if v.refs.Add(-1) != 0 {
		return
	}
	for _, level := range v.Levels {
		for _, h := range level {
			if h.refs.Add(-1) == 0 {
				release(h)
			}
		}
	}
}

// Apply returns the next version: v's levels changed by edit, which may
// add and remove segments but not change those it keeps. Each segment it
// lists is referenced; the caller holds the version's one reference until
// it installs it (then Retire the one it replaced) or Abandons it.
func (v *Version) Apply(edit func(levels *[MaxLevels][]*Handle)) *Version {
	levels := v.Levels
	for l := range levels {
		levels[l] = slices.Clone(levels[l])
	}
	edit(&levels)
	return NewVersion(levels)
}

// Abandon undoes the references Apply took for a version that is never
// installed. Nothing is released: a segment the edit added is the
// caller's to close.
func (v *Version) Abandon() {
	for _, level := range v.Levels {
		for _, h := range level {
			h.refs.Add(-1)
		}
	}
}

// Retire marks the segments of old that next does not list obsolete, so
// that their files are deleted when no query reads them, and drops the
// reference old held as the current version.
func Retire(old, next *Version, release func(*Handle)) {
	live := make(map[*Handle]bool)
	for _, level := range next.Levels {
		for _, h := range level {
			live[h] = true
		}
	}
	for _, level := range old.Levels {
		for _, h := range level {
			if !live[h] {
				h.obsolete.Store(true)
			}
		}
	}
	old.Unref(release)
}

// Record returns what a manifest records of v's segments.
func (v *Version) Record() []Segment {
	var out []Segment
	for l, level := range v.Levels {
		for _, h := range level {
			out = append(out, Segment{FileNum: h.FileNum, Level: l, TombApplied: h.TombApplied.Load()})
		}
	}
	return out
}

// Files allocates segment file numbers and holds the numbers of the
// segment files that may be on disk: live ones, outputs being written,
// and dropped ones not yet removed. The manifest lists those that are not
// live as obsolete, so that Open can tell a leftover from a lost file.
type Files struct {
	mu   sync.Mutex
	next uint64
	nums map[uint64]bool
}

// Reset starts over from a manifest: next is its next file number and v
// lists its segments.
func (f *Files) Reset(next uint64, v *Version) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next = next
	f.nums = make(map[uint64]bool)
	for _, level := range v.Levels {
		for _, h := range level {
			f.nums[h.FileNum] = true
		}
	}
}

// Alloc returns a new segment file number and records that its file may
// exist on disk.
func (f *Files) Alloc() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.next
	f.next++
	if f.nums == nil {
		f.nums = make(map[uint64]bool)
	}
	f.nums[n] = true
	return n
}

// Next returns the next file number: every number in use is below it.
func (f *Files) Next() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.next
}

// Forget records that segment file num is removed.
func (f *Files) Forget(num uint64) {
	f.mu.Lock()
	delete(f.nums, num)
	f.mu.Unlock()
}

// Obsolete returns, sorted, the segment files that may be on disk but
// that v does not list: what a manifest describing v records as obsolete.
func (f *Files) Obsolete(v *Version) []uint64 {
	live := make(map[uint64]bool)
	for _, level := range v.Levels {
		for _, h := range level {
			live[h.FileNum] = true
		}
	}
	f.mu.Lock()
	var out []uint64
	for n := range f.nums {
		if !live[n] {
			out = append(out, n)
		}
	}
	f.mu.Unlock()
	slices.Sort(out)
	return out
}
