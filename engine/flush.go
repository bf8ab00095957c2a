package engine

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/stratadb/strata/internal/manifest"
	"github.com/stratadb/strata/internal/point"
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
	db.mu.flushWaiters++
	defer func() { db.mu.flushWaiters-- }()
	for slices.Contains(db.mu.imm, m) {
		if db.mu.bgErr != nil {
			return db.mu.bgErr
		}
		db.mu.cond.Wait()
	}
	return nil
}

// flushLoop flushes sealed memtables until the DB closes and nothing is
// left to flush. Up to flushLimit of them are encoded at once, each on a
// goroutine of its own, and they are published in the order they were
// sealed (flushMemtable). A writer faster than one flush fills the queue
// and stalls; while it waits, its core encodes the next memtable instead
// of idling (the 1M x 3 insert of BenchmarkScale stalled a third of its
// time behind one flush at a time, each flushing 440,000 one-sample
// series on one core).
func (db *DB) flushLoop() {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		db.mu.Lock()
		var m *memRef
		for {
			if db.mu.bgErr != nil || db.mu.closing && len(db.mu.imm) == 0 {
				db.mu.Unlock()
				return
			}
			if db.mu.flushing < db.mu.flushLimit {
				if i := slices.IndexFunc(db.mu.imm, func(m *memRef) bool { return !m.claimed }); i >= 0 {
					m = db.mu.imm[i]
					break
				}
			}
			db.mu.cond.Wait()
		}
		m.claimed = true
		db.mu.flushing++
		// Numbered now, in the order of sealing: L0 is ordered by file
		// number, oldest first, whichever flush finishes first.
		num := db.files.Alloc()
		db.mu.Unlock()

		wg.Go(func() {
			err := db.flushMemtable(m, num)
			first := false
			db.mu.Lock()
			db.mu.flushing--
			if err != nil {
				m.flushFailed = true
				if first = db.mu.bgErr == nil; first {
					db.mu.bgErr = fmt.Errorf("flush: %w", err)
				}
			}
			db.mu.cond.Broadcast()
			db.mu.Unlock()
			switch {
			case err == nil:
				db.maybeScheduleCompaction()
			case first:
				db.logger.Error("flush failed; writes are stopped", "err", err)
			}
		})
	}
}

// awaitTurn blocks until every memtable sealed before m is flushed (m is the
// oldest sealed), so that segments and WAL removals are published in order,
// and returns how long it waited. When an older flush fails, m is left
// unpublished too, and awaitTurn returns the background error. A failure
// elsewhere (a compaction) does not stop m's turn from coming, as it never
// stopped a lone flush from publishing.
func (db *DB) awaitTurn(m *memRef) (waited time.Duration, err error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.mu.imm[0] == m {
		return 0, nil
	}
	start := time.Now()
	for db.mu.imm[0] != m {
		if db.mu.imm[0].flushFailed {
			return time.Since(start), db.mu.bgErr
		}
		if hook := db.testAwaitingTurn; hook != nil {
			hook()
		}
		db.mu.cond.Wait()
	}
	return time.Since(start), nil
}

// flushMemtable writes m to a new L0 segment, publishes it with a manifest
// edit and removes the WAL files m covered.
func (db *DB) flushMemtable(m *memRef, num uint64) error {
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
	// The manifest edit needs the catalog to hold the series m may
	// reference: they are persisted while the series are sorted and their
	// blocks encoded, not after.
	persisted := db.persistCatalogAsync(m)
	h, err := db.writeFlushSegment(m, snap, num)
	if perr := persisted(); err == nil {
		err = perr
	}
	// The flush's own time leaves out the wait for older flushes.
	var waited time.Duration
	if err == nil {
		waited, err = db.awaitTurn(m)
		start = start.Add(waited)
	}
	if err != nil {
		// A published segment stays until Open removes it: no manifest
		// lists it.
		if h != nil {
			h.Reader.Close()
		}
		return err
	}
	// Count the flush before it becomes visible, so a caller that Flush
	// woke sees it in Stats.
	db.st.flushes.Add(1)
	db.st.flushNanos.Add(int64(time.Since(start)))
	if h != nil {
		db.st.flushBytes.Add(h.Meta.Size)
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
			h.Reader.Close()
		}
		return err
	}
	if err := db.wal.RemoveBefore(m.walEnd); err != nil {
		db.logger.Warn("remove flushed wal files", "err", err)
	}
	if h != nil {
		db.logger.Debug("flushed memtable", "segment", filepath.Base(h.Meta.Path), "samples", h.Meta.Samples, "bytes", h.Meta.Size, "took", time.Since(start))
	}
	return nil
}

// persistCatalogAsync appends to the series catalog, on a goroutine of its
// own, the series m may reference, as the manifest edit publishing m would
// (logAndApply then finds them persisted), and returns a function that
// waits for it. Encoding, compressing and syncing the entries of a flush of
// 200,000 new series took a sixth of the time Close waited for the flush;
// they now overlap the sort and the encoding of its blocks.
func (db *DB) persistCatalogAsync(m *memRef) func() error {
	done := make(chan error, 1)
	go func() {
		db.versionMu.Lock()
		defer db.versionMu.Unlock()
		// As in logAndApply: what was logged before the edit is durable
		// first, except for Close's final flush, which covers it all.
		if m.walEnd <= db.wal.CurrentFile() {
			if err := db.wal.Sync(); err != nil {
				done <- err
				return
			}
		}
		done <- db.catf.Persist(db.cat, m.seriesEnd)
	}()
	return func() error { return <-done }
}

// writeFlushSegment writes the samples of m that snap sees to a new L0
// segment and returns its handle, or nil when m holds no samples.
func (db *DB) writeFlushSegment(m *memRef, snap *snapshot, num uint64) (*segHandle, error) {
	// The segment applies every tombstone of the snapshot (a mask on m's
	// samples), so it starts with the largest of them applied.
	tombs := snap.tombstones
	tombApplied := m.tombApplied
	for _, t := range tombs {
		tombApplied = max(tombApplied, t.seq)
	}

	// Series in key order.
	ids := m.t.IDs()
	db.cat.SortByKeyRanks(ids, false)
	if len(ids) == 0 {
		db.files.Forget(num) // no file was created under it
		return nil, nil
	}
	path := filepath.Join(db.dir, segName(num))
	// The segment's Reader loads its index when a read first needs it
	// (FinishReader opens it lazily): a flush of a million series would
	// otherwise hold an index of about a hundred megabytes that only
	// compaction, which streams it, may ever read.
	w, err := segment.Create(path, segment.WriterOptions{FS: db.fs, BlockSamples: db.opts.BlockSamples, Series: len(ids)})
	if err != nil {
		return nil, err
	}
	// A flush of many series that someone waits for (Close, Flush,
	// writers stalled behind it) encodes its blocks on every core, in key
	// order all the same. Others encode on the flush's goroutine: a
	// background flush leaves the other cores to the writes it runs
	// beside, and a flush of few long series gains little from the
	// workers for the copies they take (Close after 1,000 series x 1,000
	// points: 24-26 ms and 53 MB allocated in parallel, 31-34 ms and 2 MB
	// on one goroutine; after 200,000 x 10 the workers save a third).
	var enc blockEncoder = serialEncoder{w}
	if len(ids) >= db.parallelFlushMin && db.flushAwaited() {
		enc = segment.NewParallel(w, 0)
	}
	var buf []point.Sample
	var stombs []tombstone
	for _, id := range ids {
		meta, _ := db.cat.Meta(id)
		stombs = db.seriesTombstones(id, tombs, m.tombApplied, stombs[:0])
		view := snap.memView(m, stombs)
		buf = m.t.Read(id, math.MinInt64, math.MaxInt64, &view, buf[:0])
		if len(buf) == 0 {
			continue
		}
		// Add copies the key and samples: no need to allocate a copy here.
		if err := enc.Add(unsafe.Slice(unsafe.StringData(meta.Key), len(meta.Key)), meta.Kind, buf); err != nil {
			enc.Abort()
			w.Abort()
			return nil, err
		}
	}
	if err := enc.Close(); err != nil {
		w.Abort()
		return nil, err
	}
	r, err := w.FinishReader()
	if err != nil {
		// A failed Finish removed the file; a failed open of the published
		// file leaves it to Open, which removes it as no manifest lists it.
		return nil, err
	}
	if r.NumSeries() == 0 {
		r.Close()
		db.removeSegmentFile(num)
		return nil, nil
	}
	return manifest.NewHandle(num, 0, tombApplied, r), nil
}

// parallelFlushSeries is the fewest series a flush encodes on every core.
const parallelFlushSeries = 16 << 10

// blockEncoder is where a flush hands each series' samples: the segment
// Writer itself, or a segment.Parallel feeding it.
type blockEncoder interface {
	Add(key []byte, kind Kind, samples []point.Sample) error
	Close() error
	Abort()
}

// serialEncoder encodes on the flush's goroutine, through the Writer.
type serialEncoder struct{ w *segment.Writer }

func (e serialEncoder) Add(key []byte, kind Kind, samples []point.Sample) error {
	return e.w.Add(key, kind, samples)
}
func (serialEncoder) Close() error { return nil }
func (serialEncoder) Abort()       {}

// flushAwaited reports whether a caller waits for the flush running now,
// and no other flush runs beside it: the DB is closing, Flush is waiting,
// or a second sealed memtable is queued behind it (writers stall once the
// queue is full).
func (db *DB) flushAwaited() bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.mu.flushing == 1 && (db.mu.closing || db.mu.flushWaiters > 0 || len(db.mu.imm) > 1)
}
