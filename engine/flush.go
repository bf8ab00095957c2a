package engine

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"time"
	"unsafe"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/vfs"
	"github.com/stratadb/strata/segment"
)

// Flush writes the memtable to a segment and returns when that segment and
// the manifest naming it are durable.
func (db *DB) Flush() error {
	if err := db.checkOpen(); err != nil {
		return err
	}
	if err := db.checkWritable(); err != nil {
		return err
	}
	db.commitMu.Lock()
	if err := db.checkOpen(); err != nil {
		db.commitMu.Unlock()
		return err
	}
	var err error
	if mem := db.mu.mem; mem.t.Len() > 0 || mem.deletes {
		err = db.sealLocked(true)
	}
	db.mu.Lock()
	var target *memRef
	if n := len(db.mu.imm); n > 0 {
		target = db.mu.imm[n-1]
	}
	db.mu.Unlock()
	db.commitMu.Unlock()
	if err != nil {
		return err
	}
	return db.waitFlushed(target)
}

// waitFlushed blocks until m (and every memtable sealed before it) is
// flushed, or a background error stops flushing.
func (db *DB) waitFlushed(m *memRef) error {
	if m == nil {
		return nil
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	for slices.Contains(db.mu.imm, m) {
		if db.mu.bgErr != nil {
			return db.mu.bgErr
		}
		db.mu.cond.Wait()
	}
	return nil
}

// flushLoop flushes sealed memtables, oldest first, until the DB closes
// and nothing is left to flush.
func (db *DB) flushLoop() {
	for {
		db.mu.Lock()
		for len(db.mu.imm) == 0 && !db.mu.closing {
			db.mu.cond.Wait()
		}
		if len(db.mu.imm) == 0 || db.mu.bgErr != nil {
			db.mu.Unlock()
			return
		}
		m := db.mu.imm[0]
		db.mu.Unlock()

		if err := db.flushMemtable(m); err != nil {
			db.logger.Error("flush failed; writes are stopped", "err", err)
			db.mu.Lock()
			if db.mu.bgErr == nil {
				db.mu.bgErr = fmt.Errorf("flush: %w", err)
			}
			db.mu.cond.Broadcast()
			db.mu.Unlock()
			return
		}
		db.maybeScheduleCompaction()
	}
}

func (db *DB) allocFileNum() uint64 {
	db.mu.Lock()
	defer db.mu.Unlock()
	n := db.mu.nextFile
	db.mu.nextFile++
	db.noteFile(n)
	return n
}

// flushMemtable writes m to a new L0 segment, publishes it with a manifest
// edit and removes the WAL files m covered.
func (db *DB) flushMemtable(m *memRef) error {
	start := time.Now()
	// Every operation logged in m's WAL files (and any after) is resolved
	// before m is flushed: a write or delete whose WAL record failed is
	// undone first, and never reaches a segment or the manifest.
	db.vis.wait(db.seq.Load())
	snap, err := db.acquireSnapshot()
	if err != nil {
		return err
	}
	defer db.releaseSnapshot(snap)
	// The segment applies every tombstone of the snapshot (a mask on m's
	// samples), so it starts with the largest of them applied.
	tombs := snap.tombstones
	tombApplied := m.tombApplied
	for _, t := range tombs {
		tombApplied = max(tombApplied, t.seq)
	}

	// Series in key order.
	ids := m.t.IDs()
	db.cat.sortByKeyRanks(ids, false)

	var h *segHandle
	if len(ids) > 0 {
		num := db.allocFileNum()
		path := filepath.Join(db.dir, segName(num))
		w, err := segment.Create(path, segment.WriterOptions{FS: db.fs, BlockSamples: db.opts.BlockSamples, Series: len(ids)})
		if err != nil {
			return err
		}
		var buf []point.Sample
		var stombs []tombstone
		for _, id := range ids {
			meta, _ := db.cat.meta(id)
			stombs = db.seriesTombstones(id, tombs, m.tombApplied, stombs[:0])
			view := snap.memView(m, stombs)
			buf = m.t.Read(id, math.MinInt64, math.MaxInt64, &view, buf[:0])
			if len(buf) == 0 {
				continue
			}
			// Add copies the key: no need to allocate a copy here.
			if err := w.Add(unsafe.Slice(unsafe.StringData(meta.key), len(meta.key)), meta.kind, buf); err != nil {
				w.Abort()
				return err
			}
		}
		sm, err := w.Finish()
		if err != nil {
			w.Abort()
			return err
		}
		if sm.Series > 0 {
			r, err := segment.Open(db.fs, path)
			if err != nil {
				return fmt.Errorf("reopen flushed segment: %w", err)
			}
			h = newSegHandle(num, 0, tombApplied, r)
		} else {
			db.removeSegmentFile(num)
		}
	}
	// Count the flush before it becomes visible, so a caller that Flush
	// woke sees it in Stats.
	db.st.flushes.Add(1)
	db.st.flushNanos.Add(int64(time.Since(start)))
	if h != nil {
		db.st.flushBytes.Add(h.meta.Size)
	}
	err = db.logAndApply(func(levels *[maxLevels][]*segHandle) {
		if h != nil {
			levels[0] = append(levels[0], h)
		}
	}, m, math.MinInt64)
	if err != nil {
		// The manifest may name the segment even though writing it failed
		// (a rename that landed before a failed directory sync), so the file
		// stays; Open removes it if no manifest lists it.
		if h != nil {
			h.r.Close()
		}
		return err
	}
	if err := db.wal.RemoveBefore(m.walEnd); err != nil {
		db.logger.Warn("remove flushed wal files", "err", err)
	}
	if h != nil {
		db.logger.Debug("flushed memtable", "segment", filepath.Base(h.meta.Path), "samples", h.meta.Samples, "bytes", h.meta.Size, "took", time.Since(start))
	}
	return nil
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
		if err := db.catf.persist(db.cat, flushed.seriesEnd); err != nil {
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
		seriesCount: uint64(db.catf.n),
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
