package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/stratadb/strata/internal/manifest"
	"github.com/stratadb/strata/wal"
)

// Versions: the live set of segments and how it changes. internal/manifest
// owns versions, their references and the manifest's format; the engine
// decides the edits, installs each version beside its memtables and
// removes files through its filesystem. Every change (a flush adds an L0
// segment, a compaction swaps inputs for outputs) is one edit applied by
// logAndApply, which writes the manifest that describes the new version
// before installing it.

// segHandle is an open segment shared by the versions that list it.
type segHandle = manifest.Handle

// version is an immutable set of live segments. Queries hold a reference
// to the version they read, so compaction never deletes a file under them.
type version = manifest.Version

// removeSegmentFile removes segment file num, which no manifest lists, and
// forgets it once it is gone.
func (db *DB) removeSegmentFile(num uint64) {
	path := filepath.Join(db.dir, segName(num))
	if err := db.fs.Remove(path); err != nil && !errors.Is(err, errNotExist) {
		db.logger.Warn("remove unused segment", "file", path, "err", err)
		return
	}
	db.files.Forget(num)
}

// unrefVersion drops a reference; the last one releases the version's
// segments, closing (and, when obsolete, deleting) those no version lists.
func (db *DB) unrefVersion(v *version) { v.Unref(db.releaseSegment) }

// releaseSegment closes h, which no version lists any more, and deletes
// its file when it left the current version.
func (db *DB) releaseSegment(h *segHandle) {
	if err := h.Reader.Close(); err != nil {
		db.logger.Warn("close segment", "file", h.Meta.Path, "err", err)
	}
	if h.Obsolete() {
		if err := db.fs.Remove(h.Meta.Path); err != nil && !errors.Is(err, errNotExist) {
			db.logger.Warn("remove obsolete segment", "file", h.Meta.Path, "err", err)
			return
		}
		db.files.Forget(h.FileNum)
	}
}

// manifestTombstones returns the tombstones as the manifest records them.
func manifestTombstones(tombs []tombstone) []wal.Delete {
	out := make([]wal.Delete, len(tombs))
	for i, t := range tombs {
		out[i] = wal.Delete{Seq: t.seq, Selector: t.sel}
	}
	return out
}

// tombstonesOf returns the tombstones manifest m records.
func tombstonesOf(m *manifest.Manifest) []tombstone {
	out := make([]tombstone, len(m.Tombstones))
	for i, d := range m.Tombstones {
		out[i] = tombstone{seq: d.Seq, sel: d.Selector}
	}
	return out
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
	cur := db.mu.v
	walStart := db.mu.walStart
	if flushed != nil {
		walStart = flushed.walEnd
	}
	tombs := db.mu.tombstones
	db.mu.Unlock()

	nv := cur.Apply(edit)

	// A tombstone is dropped once every source it could apply to has applied
	// it. Segments record how far they have; memtables hold nothing written
	// before their tombApplied, but they are not durable (the WAL replays
	// them with their tombstones), so the manifest keeps what the segments
	// need and memory what both need.
	segOldest := db.raiseTombApplied(&nv.Levels, tombs)
	// Unpublished deletes may still fail; those that succeed are replayed
	// from the WAL, which keeps every record after walStart.
	kept := pruneTombstones(tombstonesAsOf(tombs, db.vis.published.Load()), segOldest, nil)

	m := manifest.Manifest{
		NextFile:    db.files.Next(),
		WALStart:    walStart,
		LastSeq:     db.seq.Load(),
		SeriesCount: uint64(db.catf.Persisted()),
		Segments:    nv.Record(),
		Tombstones:  manifestTombstones(kept),
		Obsolete:    db.files.Obsolete(nv),
	}
	m.SetExpiredBefore(max(expiredBefore, db.vis.floor.Load()))
	if err := manifest.Write(db.fs, db.dir, &m); err != nil {
		// Undo the references Apply took. Which manifest is on disk is
		// now unknown, so stop: later writes fail until the DB is reopened,
		// and Open settles the state from whatever manifest survived.
		nv.Abandon()
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
	db.vis.raiseFloor(m.ExpiredBefore())
	// Deletes may have added tombstones and seals memtables since the
	// snapshot: prune what is in memory now.
	db.mu.tombstones = pruneTombstones(db.mu.tombstones, segOldest, append(slices.Clip(db.mu.imm), db.mu.mem))
	db.mu.cond.Broadcast()
	db.mu.Unlock()

	// Segments that left the version are deleted when no query reads them.
	manifest.Retire(old, nv, db.releaseSegment)
	return nil
}
