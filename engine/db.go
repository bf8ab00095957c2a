// Package engine is strata's embedded time-series storage engine: open a
// database with Open, Write points, Query ranges and aggregates, Delete,
// and Close it. Nothing else runs: no server is needed.
//
// # Write path
//
// Write validates its points, resolves each (measurement, tags, field) to a
// dense series id, logs one WAL record for the whole call and applies it to
// the active MemTable. A MemTable past Options.MemTableBytes is sealed and
// flushed in the background to an immutable segment file while writes go
// on into a fresh one; leveled compaction merges segments. A manifest
// replaced atomically names the live segments, so a crash at any instant
// leaves the old state or the new one.
//
// # Concurrency
//
// A DB is safe for concurrent use. Writes and deletes are serialised by a
// commit lock (so WAL order is apply order); SyncAlways writers wait for
// their fsync outside it, sharing fsyncs (group commit). Queries read a
// consistent snapshot of memtables and segments without blocking writers.
//
// # Errors
//
// One convention holds in every strata package, so that a message reads
// each piece of context once:
//
//   - Conditions callers act on are sentinels, matched with errors.Is:
//     ErrInvalid, ErrCorrupt, ErrClosed, ... Their text starts "strata: ".
//   - An error that is such a condition puts the sentinel first and the
//     detail after it: "strata: invalid input: empty measurement".
//   - A leaf package starts the errors it makes with its name ("wal: ",
//     "segment: ", "compaction: ") and names the file it was working on;
//     errors of the filesystem already name their path.
//   - A caller that wraps a lower error adds its own operation before it,
//     never the callee's ("flush: segment: sync /db/000007.seg.tmp: ..."),
//     and returns the error unwrapped when it has nothing to add.
//   - Damaged bytes are a *CorruptionError: file, offset and cause; it
//     matches ErrCorrupt.
package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/stratadb/strata/compaction"
	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/catalog"
	"github.com/stratadb/strata/internal/manifest"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/vfs"
	"github.com/stratadb/strata/memtable"
	"github.com/stratadb/strata/wal"
)

var errNotExist = fs.ErrNotExist

func corruptf(path string, off int64, format string, args ...any) error {
	return base.Corruptf(path, off, format, args...)
}

const (
	lockName    = "LOCK"
	catalogName = "SERIES"
	walDirName  = "wal"
	segSuffix   = ".seg"
	tmpSuffix   = ".tmp"
	maxLevels   = manifest.MaxLevels
)

// segName is the one function that names segment files.
func segName(num uint64) string { return fmt.Sprintf("%06d%s", num, segSuffix) }

func parseSegName(name string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, segSuffix)
	if !ok || len(s) < 6 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// memRef is a memtable with what the engine needs to flush it.
type memRef struct {
	t *memtable.Table
	// Set when the memtable is sealed:
	walEnd      uint64 // its records are in WAL files numbered below walEnd
	tombApplied uint64 // tombstones with seq <= tombApplied are applied to it
	seriesEnd   int    // catalog size at seal: series it may reference
	sealed      bool
	// keyBytes: the key bytes of the series it holds; added to under
	// commitMu, read by throttle without it.
	keyBytes atomic.Int64
	// deletes is set when a Delete ran while this memtable was active, so
	// that Flush and Close persist the tombstone even with no samples.
	deletes bool
	// claimed is set under DB.mu once a flush of m started, flushFailed
	// once that flush failed and left m unpublished (flushLoop).
	claimed, flushFailed bool
}

// DB is an open strata database. It is safe for concurrent use.
type DB struct {
	dir    string
	opts   *Options
	fs     vfs.FS
	logger *slog.Logger
	lock   io.Closer
	wal    *wal.Log
	cat    *catalog.Catalog
	catf   *catalog.File
	policy compaction.Policy

	closed   atomic.Bool
	readOnly bool          // Options.ReadOnly: no lock, no WAL, no background work
	seq      atomic.Uint64 // last sequence number assigned (Write and Delete)
	vis      seqVisibility // what readers see: see readview.go

	rules atomic.Pointer[ruleSet] // retention rules (rules.go); nil: none
	// rollups are the downsampling rules (rollup.go); nil: none.
	rollups atomic.Pointer[rollupSet]

	// files allocates segment file numbers and holds those that may be
	// on disk, for the manifest's obsolete list.
	files manifest.Files

	// commitMu serialises Write and Delete, so that sequence order, WAL order
	// and memtable apply order agree. The fields below are guarded by it.
	commitMu sync.Mutex
	w        writeScratch
	lim      seriesLimiter

	// compactMu lets one compaction run at a time.
	compactMu sync.Mutex

	// versionMu serialises manifest edits (flush and compaction). It is held
	// across the manifest write, never while holding mu.
	versionMu sync.Mutex

	// mu guards the fields of the mu struct; care is taken never to hold it
	// during I/O.
	mu struct {
		sync.Mutex
		cond       *sync.Cond // broadcast when a flush or compaction ends, or on close
		mem        *memRef
		imm        []*memRef // sealed, oldest first
		v          *version  // current
		tombstones []tombstone
		walStart   uint64
		bgErr      error // sticky background failure
		closing    bool
		// flushWaiters counts the callers waiting for a flush (waitFlushed).
		flushWaiters int
		// flushStalls counts the writers stalled because the queue of
		// memtables waiting to flush is full (throttle); background
		// compactions yield to them (yieldToFlush).
		flushStalls int
		// flushing counts the flushes in flight (flushLoop); each has
		// set its memtable's claimed. At most flushLimit run at once:
		// one per core, and no more than can be sealed and waiting.
		flushing, flushLimit int
	}

	compactCh chan struct{}
	bgCtx     context.Context
	bgCancel  context.CancelFunc
	wg        sync.WaitGroup

	st        stats
	rollupExt rollupExtents // Stats.RollupLevels (rollup_stats.go)

	feed feed // change feed subscribers (feed.go)

	refs refTable // appenders' series refs (appender.go)

	// partSamples is PartSamples, lastParallelMin defaultLastParallelMin,
	// seqParallelMin aggParallelMin, parallelFlushMin parallelFlushSeries
	// and scanChunkMax scanChunkSamples; a test sets others on its own DB
	// so that parts, windows and parallel sweeps happen on small data, or
	// not at all.
	partSamples      int
	lastParallelMin  int
	seqParallelMin   int
	parallelFlushMin int
	scanChunkMax     int

	// testAfterCompactionSnapshot, when set by a test, runs in compactOnce
	// right after the compaction has taken its snapshot.
	testAfterCompactionSnapshot func()
	// testInOrder, when set by a test, is called by inOrder's workers
	// with true after each chunk they produce and false as they exit.
	testInOrder func(produced bool)
	// testReadAhead, when set by a test, gets the samples each chunk that
	// QuerySeq read ahead holds (readPartsParallel).
	testReadAhead func(samples int)
	// testAfterReadSnapshot, when set by a test, runs right after a query
	// or a metadata call has taken its snapshot (beginRead).
	testAfterReadSnapshot func()
	// testOnBlockDecode, when set by a test, runs before every segment
	// block a read decodes (after its context check); it may be called
	// from several goroutines at once.
	testOnBlockDecode func()
	// testCompactionContext, when set by a test, wraps the context that
	// compactOnce passes to the merge.
	testCompactionContext func(context.Context) context.Context
	// testBeforeCompactionApply, when set by a test, runs in compactOnce
	// once the outputs are written, before the edit that removes the
	// inputs: when the compaction holds the most disk.
	testBeforeCompactionApply func()
	// testAwaitingTurn, when set by a test, runs when a flush whose
	// segment is written waits for an older memtable's flush to publish.
	testAwaitingTurn func()
	// testCheckpointFS, when set by a test, wraps the filesystem a
	// checkpoint writes its target through.
	testCheckpointFS func(vfs.FS) vfs.FS
}

// writeScratch holds the buffers the write path reuses.
type writeScratch struct {
	tags     []Tag
	key      []byte
	keys     []byte // the bytes of pend's keys (carveKey), reused by the next Write
	entries  []point.Entry
	defs     []wal.SeriesDef
	pend     []pendingSeries
	pendByID map[string]int
	buf      []byte
	// sets remembers the tag set last found for a caller's tag array, by
	// its address: callers that reuse one []Tag per device (most) skip
	// hashing the tags and the map lookup. A hit is taken only when the
	// set's tags and measurement equal the point's, so an array changed in
	// place or freed and reused is simply looked up again. The address is
	// kept as a number: the cache holds no caller memory alive.
	sets []setCacheEntry
	// setCacheOff is set while the cache does not pay: a caller whose
	// tag arrays are fresh on every call (a decoder's) never hits it, and
	// each probe of a large cache is a miss of the CPU's own cache.
	setCacheOff bool

	// presolve's scratch: per point, the hash, measurement and tags of
	// its tag set, and the set found.
	preHash []uint64
	preMeas []string
	preTags [][]Tag
	preSets []*catalog.Set
}

// Whether the tag-set cache pays is judged from every setCacheEvery-th
// point of a call, which probes the cache in any case: when fewer than
// one in setCacheMinHit of at least setCacheSample such probes hit, the
// other points skip the cache until the probes hit again. The probed
// points keep their entries fresh, so a caller that reuses its arrays
// (whose first calls miss while the cache fills) gains the cache back
// once its probes hit.
const (
	setCacheEvery  = 16
	setCacheSample = 16
	setCacheMinHit = 8
)

// presolve looks up the tag sets of points whose tags are sorted all at
// once (catalog.FindSets), for a call that does not use the tag-set
// cache: the result holds each point's set, or nil when it is new, its
// tags unsorted or the call too short to gain from it (then the result
// is nil).
func (w *writeScratch) presolve(cat *catalog.Catalog, points []Point) []*catalog.Set {
	if len(points) < presolveMin {
		return nil
	}
	w.preHash, w.preMeas, w.preTags = w.preHash[:0], w.preMeas[:0], w.preTags[:0]
	for i := range points {
		p := &points[i]
		var h uint64
		if len(p.Tags) > 0 && slices.IsSortedFunc(p.Tags, func(a, b Tag) int { return cmp.Compare(a.Key, b.Key) }) {
			if h = catalog.HashSet(p.Measurement, p.Tags); h == 0 {
				h = 1 // 0 marks a point not looked up; a set hashed 0 is found the slow way
			}
		}
		w.preHash = append(w.preHash, h)
		w.preMeas = append(w.preMeas, p.Measurement)
		w.preTags = append(w.preTags, p.Tags)
	}
	w.preSets = slices.Grow(w.preSets[:0], len(points))[:len(points)]
	cat.FindSets(w.preHash, w.preMeas, w.preTags, w.preSets)
	clear(w.preMeas)
	clear(w.preTags)
	return w.preSets
}

// presolveMin is the shortest call whose sets presolve looks up at once.
const presolveMin = 64

// setCacheOn reports whether every point of a call probes the cache.
func (w *writeScratch) setCacheOn() bool { return !w.setCacheOff }

// setCacheMaxSeries is the most series for which Write uses the tag-set
// cache. Past it the tag sets no longer fit the CPU's caches: a hit costs
// the misses of comparing the set, one point after the other, and
// presolve, which overlaps them, is faster (BenchmarkScale at 200,000
// series: 1.03 s against 1.31 s; at 1,000 series the cache is the
// faster, 127 ms against 164 ms for BenchmarkWrite1M).
const setCacheMaxSeries = 1 << 16

// setCacheUse records that the probes of a call hit hits times.
func (w *writeScratch) setCacheUse(probes, hits int) {
	if probes >= setCacheSample {
		w.setCacheOff = hits*setCacheMinHit < probes
	}
}

// The tag-set cache has a power of two of entries, at least minSetCache
// and at most maxSetCache (16 bytes each): it grows with the catalog. It
// is 4-way set associative: an address picks a group of setCacheWays
// entries (one 64-byte cache line) and may sit in any of them. Direct
// mapped, pairs of tag arrays sharing a slot evicted each other on every
// write.
const (
	minSetCache  = 1 << 12
	maxSetCache  = 2 * setCacheMaxSeries
	setCacheWays = 4
)

// sizeSetCache grows the cache, emptied, to the next power of two of
// series (within the bounds) when the catalog has outgrown it.
func (w *writeScratch) sizeSetCache(series int) {
	want := minSetCache
	for want < series && want < maxSetCache {
		want <<= 1
	}
	if len(w.sets) < want {
		w.sets = make([]setCacheEntry, want)
	}
}

type setCacheEntry struct {
	tags uintptr
	set  *catalog.Set
}

// cachedSet returns the tag set of (measurement, tags) from the cache, or
// nil; slot is where to remember the one a lookup finds: the entry that
// held this address, else an empty one of its group, else one chosen by
// the address's low bits (stale entries are replaced in turn as the
// caller's arrays change).
func (w *writeScratch) cachedSet(measurement string, tags []Tag) (set *catalog.Set, slot *setCacheEntry) {
	if len(tags) == 0 {
		return nil, nil
	}
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(tags)))
	h := uint64(addr) * 0x9E3779B97F4A7C15
	groups := uint(len(w.sets)) / setCacheWays
	g := w.sets[(h>>(64-bits.TrailingZeros(groups)))*setCacheWays:][:setCacheWays]
	for i := range g {
		e := &g[i]
		if e.tags != addr {
			continue
		}
		if e.set != nil && e.set.Is(measurement, tags) {
			return e.set, nil
		}
		return nil, e
	}
	for i := range g {
		if g[i].set == nil {
			return nil, &g[i]
		}
	}
	return nil, &g[(h>>20)%setCacheWays]
}

type pendingSeries struct {
	key  string
	kind Kind
}

// Open opens the database in dir. A missing or empty dir gets a new
// database; a dir that holds something else is ErrNotDatabase, and a
// database whose manifest is missing or damaged is ErrCorrupt: Open never
// deletes, truncates or rewrites a file it cannot prove is its own (see
// open.go). With opts.ReadOnly nothing is created or changed at all. A nil
// opts means the defaults; so does every zero field of a non-nil opts.
func Open(dir string, opts *Options) (*DB, error) {
	opts = opts.Clone()
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	fsys := opts.fs
	if fsys == nil {
		fsys = vfs.Default
	}
	if opts.ReadOnly {
		return openReadOnly(dir, opts, fsys)
	}
	return openWritable(dir, opts, fsys)
}

func (db *DB) releaseAfterFailedOpen() {
	if db.wal != nil {
		db.wal.Close()
	}
	if db.catf != nil {
		db.catf.Close()
	}
	if v := db.mu.v; v != nil {
		db.unrefVersion(v)
	}
	if db.lock != nil {
		db.lock.Close()
	}
}

// Close flushes the memtable, waits for background work to stop and
// releases the directory. A second call returns ErrClosed.
func (db *DB) Close() error {
	if db.closed.Swap(true) {
		return ErrClosed
	}
	if db.readOnly {
		db.bgCancel()
		db.mu.Lock()
		v := db.mu.v
		db.mu.v = nil
		db.mu.Unlock()
		db.unrefVersion(v)
		return nil
	}
	// Wait out writes in flight; no new one starts (closed is set).
	// The last memtable is sealed without rolling the WAL: no write follows
	// it, so its WAL file stays the last one and needs no fsync of its own
	// (a torn tail of the last file is a crash's unacknowledged end).
	db.commitMu.Lock()
	var err error
	if mem := db.mu.mem; mem.t.Len() > 0 || mem.deletes {
		err = db.sealLocked(false)
	}
	db.commitMu.Unlock()

	db.mu.Lock()
	db.mu.closing = true
	db.mu.cond.Broadcast()
	for len(db.mu.imm) > 0 && db.mu.bgErr == nil {
		db.mu.cond.Wait()
	}
	if err == nil {
		err = db.mu.bgErr
	}
	db.mu.Unlock()
	db.bgCancel()
	db.wg.Wait()
	// A Compact called by the user may still be running: it sees the
	// cancelled context and stops; wait for it before tearing down.
	db.compactMu.Lock()
	db.compactMu.Unlock()

	if err == nil {
		// Everything is flushed: every WAL record is in a durable segment
		// (or the file holds none), so the WAL is removed, not fsynced.
		if werr := db.wal.Discard(); !errors.Is(werr, ErrClosed) {
			err = werr
		}
	} else if werr := db.wal.Close(); !errors.Is(werr, ErrClosed) {
		db.logger.Warn("close wal", "err", werr)
	}
	if cerr := db.catf.Close(); err == nil {
		err = cerr
	}
	db.mu.Lock()
	v := db.mu.v
	db.mu.v = nil
	db.mu.Unlock()
	db.unrefVersion(v)
	if lerr := db.lock.Close(); err == nil {
		err = lerr
	}
	return err
}

// checkWritable returns ErrReadOnly on a DB opened ReadOnly.
func (db *DB) checkWritable() error {
	if db.readOnly {
		return ErrReadOnly
	}
	return nil
}

func (db *DB) checkOpen() error {
	if db.closed.Load() {
		return ErrClosed
	}
	return nil
}
