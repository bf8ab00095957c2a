package engine

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/stratadb/strata/internal/vfs"
	"github.com/stratadb/strata/segment"
)

// Versions: the live set of segments and how it changes.
//
// A version is an immutable list of live segments per level. Readers hold
// a reference to the version they read and each segment counts the
// versions that list it, so compaction never deletes a file under a
// query: a segment that left the current version is closed, and deleted
// when obsolete, at its last reference. Every change (a flush adds an L0
// segment, a compaction swaps inputs for outputs) is one edit applied by
// logAndApply, which writes the manifest (manifest.go) that describes the
// new version before installing it.

func newSegHandle(fileNum uint64, level int, tombApplied uint64, r *segment.Reader) *segHandle {
	h := &segHandle{fileNum: fileNum, level: level, r: r, meta: r.Meta()}
	h.tombApplied.Store(tombApplied)
	return h
}

// segHandle is an open segment shared by the versions that list it.
type segHandle struct {
	fileNum uint64
	level   int
	// tombApplied: tombstones with seq <= it are applied to (or cannot
	// touch) the segment's data. It only grows, when a manifest edit finds
	// that no live tombstone above it affects the segment.
	tombApplied atomic.Uint64
	r           *segment.Reader
	meta        segment.Meta
	refs        atomic.Int32 // versions that list it
	obsolete    atomic.Bool  // removed from the current version: delete at last unref
	ids         segIDs       // catalog ids of its series, built on first use (readview.go)
}

// version is an immutable set of live segments. Queries hold a reference
// to the version they read, so compaction never deletes a file under them.
type version struct {
	refs   atomic.Int32
	levels [maxLevels][]*segHandle // L0 by fileNum ascending (oldest first); others by FirstKey
}

func sortLevels(v *version) {
	slices.SortFunc(v.levels[0], func(a, b *segHandle) int { return cmp.Compare(a.fileNum, b.fileNum) })
	for l := 1; l < maxLevels; l++ {
		slices.SortFunc(v.levels[l], func(a, b *segHandle) int { return strings.Compare(string(a.meta.FirstKey), string(b.meta.FirstKey)) })
	}
}

// noteFile records that segment file num may exist on disk.
func (db *DB) noteFile(num uint64) {
	db.files.Lock()
	db.files.nums[num] = true
	db.files.Unlock()
}

// forgetFile records that segment file num is removed.
func (db *DB) forgetFile(num uint64) {
	db.files.Lock()
	delete(db.files.nums, num)
	db.files.Unlock()
}

// removeSegmentFile removes segment file num, which no manifest lists, and
// forgets it once it is gone.
func (db *DB) removeSegmentFile(num uint64) {
	path := filepath.Join(db.dir, segName(num))
	if err := db.fs.Remove(path); err != nil && !errors.Is(err, errNotExist) {
		db.logger.Warn("remove unused segment", "file", path, "err", err)
		return
	}
	db.forgetFile(num)
}

// obsoleteFiles returns, sorted, the segment files that may be on disk but
// that v does not list: what a manifest describing v records as obsolete.
func (db *DB) obsoleteFiles(v *version) []uint64 {
	live := make(map[uint64]bool)
	for _, level := range v.levels {
		for _, h := range level {
			live[h.fileNum] = true
		}
	}
	db.files.Lock()
	var out []uint64
	for n := range db.files.nums {
		if !live[n] {
			out = append(out, n)
		}
	}
	db.files.Unlock()
	slices.Sort(out)
	return out
}

func (v *version) ref() { v.refs.Add(1) }

// unrefVersion drops a reference; the last one releases the version's
// segments, closing (and, when obsolete, deleting) those no version lists.
func (db *DB) unrefVersion(v *version) {
	if v.refs.Add(-1) != 0 {
		return
	}
	for _, level := range v.levels {
		for _, h := range level {
			db.unrefSegment(h)
		}
	}
}

func (db *DB) unrefSegment(h *segHandle) {
	if h.refs.Add(-1) != 0 {
		return
	}
	if err := h.r.Close(); err != nil {
		db.logger.Warn("close segment", "file", h.meta.Path, "err", err)
	}
	if h.obsolete.Load() {
		if err := db.fs.Remove(h.meta.Path); err != nil && !errors.Is(err, errNotExist) {
			db.logger.Warn("remove obsolete segment", "file", h.meta.Path, "err", err)
			return
		}
		db.forgetFile(h.fileNum)
	}
}

// newVersion returns a version listing levels, each segment referenced.
func newVersion(levels [maxLevels][]*segHandle) *version {
	v := &version{levels: levels}
	v.refs.Store(1)
	for _, level := range v.levels {
		for _, h := range level {
			h.refs.Add(1)
		}
	}
	sortLevels(v)
	return v
}

func (db *DB) allocFileNum() uint64 {
	db.mu.Lock()
	defer db.mu.Unlock()
	n := db.mu.nextFile
	db.mu.nextFile++
	db.noteFile(n)
	return n
}

// logAndApply computes the next version with edit, writes the manifest that
// describes it and installs it. When flushed is non-nil, that memtable
// leaves the immutable list in the same step, the WAL start moves past it
// and the series it may reference are made durable in the catalog first.
// expiredBefore is the expiry floor the edit relies on (math.MinInt64 when
// it drops nothing by retention): the manifest records it with the edit.
func (db *DB) logAndApply(edit func(levels *[maxLevels][]*segHandle), flushed *memRef, expiredBefore int64) error {
	db.versionMu.Lock()
	defer db.versionMu.Unlock()

	// The edit may make a delete durable (in the manifest, or applied to a
	// segment): first make every write logged before it durable too, so that
	// a power loss under SyncInterval or SyncNever still leaves a prefix of
	// the operations. Close's final flush covers everything written, so it
	// needs no WAL fsync.
	if flushed == nil || flushed.walEnd <= db.wal.CurrentFile() {
		if err := db.wal.Sync(); err != nil {
			return err // wal errors name the log and file
		}
	}

	if flushed != nil {
		if err := db.catf.Persist(db.cat, flushed.seriesEnd); err != nil {
			return err
		}
	}

	db.mu.Lock()
	levels := db.mu.v.levels
	for l := range levels {
		levels[l] = slices.Clone(levels[l])
	}
	walStart := db.mu.walStart
	if flushed != nil {
		walStart = flushed.walEnd
	}
	tombs := db.mu.tombstones
	nextFile := db.mu.nextFile
	db.mu.Unlock()

	edit(&levels)
	nv := newVersion(levels)

	// A tombstone is dropped once every source it could apply to has applied
	// it. Segments record how far they have; memtables hold nothing written
	// before their tombApplied, but they are not durable (the WAL replays
	// them with their tombstones), so the manifest keeps what the segments
	// need and memory what both need.
	segOldest := db.raiseTombApplied(&nv.levels, tombs)
	// Unpublished deletes may still fail; those that succeed are replayed
	// from the WAL, which keeps every record after walStart.
	kept := pruneTombstones(tombstonesAsOf(tombs, db.vis.published.Load()), segOldest, nil)

	m := manifest{
		nextFile:    nextFile,
		walStart:    walStart,
		lastSeq:     db.seq.Load(),
		seriesCount: uint64(db.catf.Persisted()),
	}
	m.setExpiredBefore(max(expiredBefore, db.vis.floor.Load()))
	for l, level := range nv.levels {
		for _, h := range level {
			m.segments = append(m.segments, manifestSegment{fileNum: h.fileNum, level: l, tombApplied: h.tombApplied.Load()})
		}
	}
	m.tombstones = kept
	m.obsolete = db.obsoleteFiles(nv)
	if err := vfs.WriteFileAtomic(db.fs, filepath.Join(db.dir, manifestName), m.marshal()); err != nil {
		// Undo the references newVersion took. Which manifest is on disk is
		// now unknown, so stop: later writes fail until the DB is reopened,
		// and Open settles the state from whatever manifest survived.
		for _, level := range nv.levels {
			for _, h := range level {
				h.refs.Add(-1)
			}
		}
		err = fmt.Errorf("write manifest: %w", err)
		db.mu.Lock()
		if db.mu.bgErr == nil {
			db.mu.bgErr = err
		}
		db.mu.cond.Broadcast()
		db.mu.Unlock()
		return err
	}

	db.mu.Lock()
	old := db.mu.v
	db.mu.v = nv
	db.mu.walStart = walStart
	if flushed != nil {
		db.mu.imm = slices.DeleteFunc(db.mu.imm, func(m *memRef) bool { return m == flushed })
	}
	// The floor rises only once the manifest holds it, and before any
	// reader can miss the data the edit dropped.
	db.vis.raiseFloor(m.expiredBefore())
	// Deletes may have added tombstones and seals memtables since the
	// snapshot: prune what is in memory now.
	db.mu.tombstones = pruneTombstones(db.mu.tombstones, segOldest, append(slices.Clip(db.mu.imm), db.mu.mem))
	db.mu.cond.Broadcast()
	db.mu.Unlock()

	// Segments that left the version are deleted when no query reads them.
	live := make(map[*segHandle]bool)
	for _, level := range nv.levels {
		for _, h := range level {
			live[h] = true
		}
	}
	for _, level := range old.levels {
		for _, h := range level {
			if !live[h] {
				h.obsolete.Store(true)
			}
		}
	}
	db.unrefVersion(old)
	return nil
}
