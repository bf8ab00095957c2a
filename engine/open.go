package engine

// Opening a directory: what Open creates, what it trusts, and the only
// files it ever removes.
//
// A directory is a strata database when it holds a MANIFEST that starts
// with the manifest magic "SMAN". A new database is created only in a
// missing directory or an empty one (one holding nothing but the LOCK file
// and a MANIFEST.tmp that a creation interrupted by a crash may leave), and
// its first manifest is written before any other file, so every database
// has one. Anything else is left alone:
//
//   - A non-empty directory that is no database (no MANIFEST with the magic
//     and no file of the engine's own format: a SERIES starting "SSER", a
//     %06d.seg starting "STSG", a wal/%08d.wal starting "SWAL") is
//     ErrNotDatabase, and nothing in it is created, changed or removed.
//   - A directory holding strata files but no readable manifest is
//     ErrCorrupt, and nothing is removed: `strata repair` rebuilds a
//     manifest when an operator asks. The one exception is a database that
//     never flushed, written by an older release that created the manifest
//     at the first flush: no segment file, and a WAL that starts at file 1
//     with sequence number 1, so the WAL provably holds its whole history.
//
// Recovery first validates everything (manifest, catalog, every listed
// segment, the whole WAL with its file numbers and sequence numbers) without
// changing a byte, and only then repairs: it cuts the torn tail of the last
// WAL file and of the catalog, and removes the files of the engine's own
// naming that are provably leftovers:
//
//   - a segment numbered at or above the manifest's next file number: the
//     output of a flush or compaction whose manifest edit never landed (its
//     data is still in the WAL or in the listed inputs);
//   - a segment the manifest lists as obsolete: a compaction input, or an
//     abandoned output, whose removal was interrupted;
//   - %06d.seg.tmp and MANIFEST.tmp: a write interrupted before its rename.
//
// Any other unlisted segment is evidence of damage (ErrCorrupt). A version
// 1 manifest (older releases) has no obsolete list; its unlisted segments
// below the next file number are removed, as those releases did.
//
// ReadOnly opens change nothing and take no lock: they read the manifest,
// the catalog, the listed segments and the WAL (a torn tail ignored, not
// cut) as they are, and retry from a fresh manifest when a writer in
// another process removes a file between the manifest read and its open.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/stratadb/strata/compaction"
	"github.com/stratadb/strata/internal/catalog"
	"github.com/stratadb/strata/internal/manifest"
	"github.com/stratadb/strata/internal/vfs"
	"github.com/stratadb/strata/segment"
	"github.com/stratadb/strata/wal"
)

// Magics of the engine's files, for telling a database without its manifest
// from a directory that is no database. segmentMagic is segment/writer.go's
// header magic and walMagic wal/wal.go's file magic (checked by a test).
const (
	segmentMagic = "STSG"
	walMagic     = "SWAL"
)

// readOnlyAttempts bounds how often a ReadOnly Open starts over from a fresh
// manifest when a writer removes a file under it.
const readOnlyAttempts = 50

// dirKind classifies a directory for Open.
type dirKind int

const (
	dirMissing    dirKind = iota
	dirEmpty              // nothing but LOCK and MANIFEST.tmp
	dirDatabase           // a MANIFEST with the magic
	dirNoManifest         // strata files, but no MANIFEST with the magic
	dirForeign            // not empty and nothing of strata's
)

// inspectDir classifies dir, reading a few bytes of a few files; it
// changes nothing.
func inspectDir(fs vfs.FS, dir string) (dirKind, error) {
	names, err := fs.ReadDir(dir)
	if errors.Is(err, iofs.ErrNotExist) {
		return dirMissing, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", dir, err)
	}
	if slices.Contains(names, checkpointMarker) {
		return 0, errIncompleteCheckpoint(dir)
	}
	empty := true
	for _, n := range names {
		if !leftoverOfCreate(fs, dir, n) {
			empty = false
			break
		}
	}
	if empty {
		return dirEmpty, nil
	}
	if slices.Contains(names, manifest.Name) {
		p, err := readPrefix(fs, filepath.Join(dir, manifest.Name), len(manifest.Magic))
		if err != nil {
			return 0, fmt.Errorf("read manifest: %w", err)
		}
		if manifest.HasMagic(p) {
			return dirDatabase, nil
		}
	}
	ours, err := hasStrataFiles(fs, dir, names)
	if err != nil {
		return 0, err
	}
	if ours {
		return dirNoManifest, nil
	}
	return dirForeign, nil
}

// leftoverOfCreate reports whether the entry name of dir is what an Open
// that created a database and stopped before its first manifest leaves
// behind: an empty LOCK file (strata never writes to it), or a
// MANIFEST.tmp that holds a prefix of a manifest. Anyone else's file of
// the same name makes the directory not empty.
func leftoverOfCreate(fs vfs.FS, dir, name string) bool {
	path := filepath.Join(dir, name)
	switch name {
	case lockName:
		// Stat, not read: the lock may be held, and Windows' locks are
		// mandatory.
		info, err := fs.Stat(path)
		if errors.Is(err, iofs.ErrNotExist) {
			return true // removed since the listing
		}
		return err == nil && info.Mode().IsRegular() && info.Size() == 0
	case manifest.Name + tmpSuffix:
		p, err := readPrefix(fs, path, len(manifest.Magic))
		if errors.Is(err, iofs.ErrNotExist) {
			return true
		}
		// A directory, or unreadable: not provably ours.
		return err == nil && strings.HasPrefix(manifest.Magic, string(p))
	}
	return false
}

// readPrefix returns up to n bytes from the start of path.
func readPrefix(fs vfs.FS, path string, n int) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	m, err := f.ReadAt(b, 0)
	if m < n && err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:m], nil
}

// hasStrataFiles reports whether names (the entries of dir) include a file
// of strata's naming that carries its format's magic.
func hasStrataFiles(fs vfs.FS, dir string, names []string) (bool, error) {
	check := func(path, magic string) (bool, error) {
		p, err := readPrefix(fs, path, len(magic))
		if err != nil {
			if errors.Is(err, iofs.ErrNotExist) {
				return false, nil
			}
			return false, fmt.Errorf("read %s: %w", path, err)
		}
		return string(p) == magic, nil
	}
	for _, n := range names {
		var ok bool
		var err error
		switch _, isSeg := parseSegName(n); {
		case n == catalogName:
			ok, err = check(filepath.Join(dir, n), catalog.Magic)
		case isSeg:
			ok, err = check(filepath.Join(dir, n), segmentMagic)
		case n == walDirName:
			walNames, lerr := fs.ReadDir(filepath.Join(dir, n))
			if lerr != nil {
				continue // not a directory, or unreadable: not ours
			}
			for _, wn := range walNames {
				if _, isWAL := wal.ParseFileName(wn); isWAL {
					if ok, err = check(filepath.Join(dir, n, wn), walMagic); ok || err != nil {
						break
					}
				}
			}
		}
		if ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// errNoManifest explains a database without its manifest.
func errNoManifest(dir string) error {
	return corruptf(filepath.Join(dir, manifest.Name), 0,
		"the directory holds strata files but no manifest; nothing was changed (run strata repair to rebuild one)")
}

// legacyManifest returns the manifest of a database that never flushed,
// written before every database had a manifest: one with no segment file
// whose WAL starts at file 1. Recovery then checks that the WAL's first
// record has sequence number 1, so the WAL holds the whole history. It
// returns nil when dir is not such a database.
func legacyManifest(fs vfs.FS, dir string) (*manifest.Manifest, error) {
	names, err := fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	for _, n := range names {
		if _, ok := parseSegName(strings.TrimSuffix(n, tmpSuffix)); ok {
			return nil, nil
		}
	}
	nums, err := wal.Files(fs, filepath.Join(dir, walDirName))
	if err != nil || len(nums) == 0 || nums[0] != 1 {
		return nil, nil
	}
	return &manifest.Manifest{NextFile: 1, WALStart: 1}, nil
}

// newDB returns a DB for dir with nothing loaded.
func newDB(dir string, opts *Options, fsys vfs.FS) *DB {
	db := &DB{
		dir:      dir,
		opts:     opts,
		fs:       fsys,
		readOnly: opts.ReadOnly,
		logger:   opts.Logger.With("db", dir),
		cat:      catalog.New(),
		policy: compaction.Policy{
			L0Trigger:     opts.L0CompactionTrigger,
			Multiplier:    opts.LevelMultiplier,
			L1TargetBytes: opts.L1TargetBytes,
			MaxLevels:     maxLevels,
		},
		compactCh:        make(chan struct{}, 1),
		partSamples:      PartSamples,
		lastParallelMin:  defaultLastParallelMin,
		seqParallelMin:   aggParallelMin,
		parallelFlushMin: parallelFlushSeries,
		scanChunkMax:     scanChunkSamples,
	}
	db.mu.cond = sync.NewCond(&db.mu.Mutex)
	rs, _ := compileRules(opts.RetentionRules, opts.Retention) // validated by Options.Validate
	db.rules.Store(rs)
	rus, _ := compileRollups(opts.Rollups) // validated by Options.Validate
	db.rollups.Store(rus)
	db.w.pendByID = make(map[string]int)
	return db
}

// openWritable opens or creates the database in dir for writing.
func openWritable(dir string, opts *Options, fsys vfs.FS) (*DB, error) {
	kind, err := inspectDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	switch kind {
	case dirForeign:
		return nil, fmt.Errorf("open %s: %w (the directory is not empty)", dir, ErrNotDatabase)
	case dirDatabase, dirNoManifest:
		// Check the manifest before taking the lock, which creates LOCK
		// when it is missing: a damaged database is reported unchanged.
		// Under the lock it is read again.
		var err error
		if kind == dirDatabase {
			_, err = readManifest(fsys, dir)
		} else if m, lerr := legacyManifest(fsys, dir); lerr != nil || m == nil {
			err = cmp.Or(lerr, errNoManifest(dir))
		}
		if err != nil {
			return nil, err
		}
	case dirMissing:
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create database dir: %w", err)
		}
		if err := fsys.SyncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
			return nil, fmt.Errorf("sync parent of database dir: %w", err)
		}
	}
	lock, err := fsys.Lock(filepath.Join(dir, lockName))
	if err != nil {
		if errors.Is(err, vfs.ErrLocked) {
			return nil, fmt.Errorf("%w: open %s", ErrLocked, dir)
		}
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	db := newDB(dir, opts, fsys)
	db.lock = lock
	m, err := db.writableManifest()
	if err == nil {
		err = db.recover(m)
	}
	if err != nil {
		db.releaseAfterFailedOpen()
		return nil, err
	}
	db.vis.start(db.seq.Load(), db.vis.floor.Load())
	db.feed.recovered = db.seq.Load()
	db.bgCtx, db.bgCancel = context.WithCancel(context.Background())
	db.mu.flushLimit = max(1, min(runtime.GOMAXPROCS(0), db.opts.MaxImmutableMemTables))
	db.wg.Go(db.flushLoop)
	db.wg.Go(db.compactLoop)
	db.maybeScheduleCompaction()
	return db, nil
}

// writableManifest classifies the directory again, now under the lock (a
// process may have created a database meanwhile), and returns its manifest,
// writing the first one of a new database.
func (db *DB) writableManifest() (*manifest.Manifest, error) {
	kind, err := inspectDir(db.fs, db.dir)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", db.dir, err)
	}
	switch kind {
	case dirDatabase:
		return readManifest(db.fs, db.dir)
	case dirEmpty, dirMissing:
		m := manifest.New()
		if err := manifest.Write(db.fs, db.dir, m); err != nil {
			return nil, fmt.Errorf("write first manifest: %w", err)
		}
		return m, nil
	case dirNoManifest:
		m, err := legacyManifest(db.fs, db.dir)
		if err != nil {
			return nil, err
		}
		if m == nil {
			return nil, errNoManifest(db.dir)
		}
		return m, nil
	}
	return nil, fmt.Errorf("open %s: %w (the directory is not empty)", db.dir, ErrNotDatabase)
}

// readManifest reads and decodes the manifest of the database in dir.
func readManifest(fs vfs.FS, dir string) (*manifest.Manifest, error) {
	path := filepath.Join(dir, manifest.Name)
	data, err := vfs.ReadFile(fs, path)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, errNoManifest(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	return manifest.Unmarshal(path, data)
}

// openReadOnly opens the database in dir without changing anything.
func openReadOnly(dir string, opts *Options, fsys vfs.FS) (*DB, error) {
	kind, err := inspectDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	switch kind {
	case dirMissing, dirEmpty:
		return nil, fmt.Errorf("open %s read-only: %w (the directory is missing or empty)", dir, ErrNotDatabase)
	case dirForeign:
		return nil, fmt.Errorf("open %s: %w (the directory is not empty)", dir, ErrNotDatabase)
	}
	var lastErr error
	for range readOnlyAttempts {
		db := newDB(dir, opts, fsys)
		var m *manifest.Manifest
		var before []byte
		if kind == dirNoManifest {
			if m, err = legacyManifest(fsys, dir); err == nil && m == nil {
				err = errNoManifest(dir)
			}
		} else {
			path := filepath.Join(dir, manifest.Name)
			if before, err = vfs.ReadFile(fsys, path); err == nil {
				m, err = manifest.Unmarshal(path, before)
			}
		}
		if err == nil {
			if err = db.recover(m); err == nil {
				db.vis.start(db.seq.Load(), db.vis.floor.Load())
				db.bgCtx, db.bgCancel = context.WithCancel(context.Background())
				return db, nil
			}
			db.releaseAfterFailedOpen()
		}
		lastErr = err
		// A writer may have replaced the manifest and removed a file it
		// named: start over from the new manifest. The same manifest and
		// the same failure twice is the answer.
		after, rerr := vfs.ReadFile(fsys, filepath.Join(dir, manifest.Name))
		if kind == dirDatabase && rerr == nil && string(after) != string(before) {
			continue
		}
		if !errors.Is(err, iofs.ErrNotExist) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("open %s read-only: the database kept changing: %w", dir, lastErr)
}

// leftover is an unlisted file that recovery removes once all is validated.
type leftover struct {
	name, why string
}

// recover loads the manifest's state: the series catalog, the listed
// segments and a replay of the WAL into a fresh memtable. Read-only, that
// is all. Writable, it then cuts torn tails, removes provable leftovers and
// opens the WAL for appending: nothing is changed before every check has
// passed.
func (db *DB) recover(m *manifest.Manifest) error {
	// The segments' indexes load while the catalog does: with a million
	// series each takes about as long as the other.
	readers, errs := make([]*segment.Reader, len(m.Segments)), make([]error, len(m.Segments))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(m.Segments)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(m.Segments); i = int(next.Add(1) - 1) {
				readers[i], errs[i] = segment.Open(db.fs, filepath.Join(db.dir, segName(m.Segments[i].FileNum)))
			}
		})
	}
	cat, err := db.readCatalog(m)
	wg.Wait()
	if err == nil {
		for i, e := range errs {
			if e != nil {
				err = e
				if errors.Is(e, iofs.ErrNotExist) {
					path := filepath.Join(db.dir, segName(m.Segments[i].FileNum))
					err = &CorruptionError{Path: path, Offset: 0, Err: fmt.Errorf("segment listed in the manifest is missing: %w", e)}
				}
				break
			}
		}
	}
	if err != nil {
		for _, r := range readers {
			if r != nil {
				r.Close()
			}
		}
		return err
	}

	var levels [maxLevels][]*segHandle
	live := make(map[uint64]bool, len(m.Segments))
	for i, ms := range m.Segments {
		h := manifest.NewHandle(ms.FileNum, ms.Level, ms.TombApplied, readers[i])
		levels[ms.Level] = append(levels[ms.Level], h)
		live[ms.FileNum] = true
	}
	db.mu.v = manifest.NewVersion(levels)
	db.files.Reset(m.NextFile, db.mu.v)
	db.mu.walStart = m.WALStart
	db.mu.tombstones = tombstonesOf(m)
	db.seq.Store(m.LastSeq)
	db.vis.floor.Store(m.ExpiredBefore())

	// Read-only, the check alone: a leftover stays for the writer to remove.
	leftovers, err := db.findLeftovers(m, live)
	if err != nil {
		return err
	}

	walDir := filepath.Join(db.dir, walDirName)
	res, err := db.replayWAL(m, walDir)
	if err != nil {
		return err
	}
	if db.readOnly {
		if res.Torn {
			db.logger.Info("ignored torn wal tail (read-only)", "file", res.TruncatedFile, "offset", res.TruncatedOffset, "bytes", res.TruncatedBytes)
		}
		return nil
	}

	// Everything is validated: repair.
	if db.catf, err = cat.Open(db.fs, db.logger); err != nil {
		return err
	}
	if res.Torn {
		if err := wal.TruncateTail(db.fs, &res); err != nil {
			return err
		}
		db.logger.Warn("truncated torn wal tail", "file", res.TruncatedFile, "offset", res.TruncatedOffset, "bytes", res.TruncatedBytes)
	}
	for _, l := range leftovers {
		if err := db.fs.Remove(filepath.Join(db.dir, l.name)); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return fmt.Errorf("remove leftover %s: %w", l.name, err)
		}
		db.logger.Info("removed leftover file", "file", l.name, "why", l.why)
	}
	if m.Format != manifest.FormatVersion {
		// A legacy or version 1 manifest: write the current format now.
		nm := *m
		nm.Format = manifest.FormatVersion
		nm.Obsolete = nil
		if err := manifest.Write(db.fs, db.dir, &nm); err != nil {
			return fmt.Errorf("write manifest: %w", err)
		}
	}

	w, err := wal.Open(walDir, wal.Options{
		FS:           db.fs,
		SegmentBytes: db.opts.WALSegmentBytes,
		Sync:         db.opts.Sync,
		SyncInterval: db.opts.SyncInterval,
		Logger:       db.logger,
		MinFile:      max(m.WALStart, 1),
	})
	if err != nil {
		return fmt.Errorf("open wal: %w", err)
	}
	db.wal = w
	if err := w.RemoveBefore(m.WALStart); err != nil {
		return fmt.Errorf("remove covered wal files: %w", err)
	}
	return nil
}

// findLeftovers returns the unlisted files of the engine's naming in the
// database directory that recovery may remove, and ErrCorrupt for an
// unlisted segment that is not provably a leftover.
func (db *DB) findLeftovers(m *manifest.Manifest, live map[uint64]bool) ([]leftover, error) {
	names, err := db.fs.ReadDir(db.dir)
	if err != nil {
		return nil, fmt.Errorf("list database dir: %w", err)
	}
	obsolete := make(map[uint64]bool, len(m.Obsolete))
	for _, n := range m.Obsolete {
		obsolete[n] = true
	}
	var out []leftover
	for _, name := range names {
		if name == manifest.Name+tmpSuffix {
			out = append(out, leftover{name, "interrupted manifest write"})
			continue
		}
		if base, ok := strings.CutSuffix(name, tmpSuffix); ok {
			if n, isSeg := parseSegName(base); isSeg && segName(n) == base {
				out = append(out, leftover{name, "interrupted segment write"})
			}
			continue
		}
		num, isSeg := parseSegName(name)
		if !isSeg || segName(num) != name || live[num] {
			continue
		}
		switch {
		case num >= m.NextFile:
			out = append(out, leftover{name, "output of an unfinished flush or compaction"})
		case obsolete[num]:
			out = append(out, leftover{name, "obsolete segment whose removal was interrupted"})
		case m.Format == manifest.FormatVersionV1:
			out = append(out, leftover{name, "unlisted segment of a version 1 manifest"})
		default:
			return nil, corruptf(filepath.Join(db.dir, name), 0,
				"segment is not listed in the manifest and is no leftover of an unfinished flush or compaction; nothing was changed (run strata repair)")
		}
	}
	return out, nil
}

// replayWAL replays the WAL from the manifest's start into a fresh
// memtable, checking that the records' sequence numbers are consecutive
// and start no later than just past the manifest's. It changes nothing: a
// torn tail is reported in the result.
func (db *DB) replayWAL(m *manifest.Manifest, walDir string) (wal.ReplayResult, error) {
	mem := db.newMemRef(0)
	var batch wal.Batch
	var del wal.Delete
	// A delete that every segment has applied is not a live tombstone, even
	// if its WAL record is replayed.
	segOldest := uint64(math.MaxUint64)
	for _, ms := range m.Segments {
		segOldest = min(segOldest, ms.TombApplied)
	}
	// A replayed delete marks the replayed memtable so Close persists it.
	replayedDeletes := false
	known := make(map[uint64]bool, len(db.mu.tombstones))
	for _, t := range db.mu.tombstones {
		known[t.seq] = true
	}
	var prevSeq uint64
	first := true
	checkSeq := func(seq uint64) error {
		if first {
			first = false
			if seq > m.LastSeq+1 {
				return fmt.Errorf("%w: the first wal record has sequence number %d, but the manifest's last is %d: records are missing", ErrCorrupt, seq, m.LastSeq)
			}
		} else if seq != prevSeq+1 {
			return fmt.Errorf("%w: wal sequence numbers jump from %d to %d: records are missing", ErrCorrupt, prevSeq, seq)
		}
		prevSeq = seq
		if seq > db.seq.Load() {
			db.seq.Store(seq)
		}
		return nil
	}
	res, err := wal.ReplayDir(db.fs, walDir, wal.ReplayOptions{From: max(m.WALStart, 1), ReadOnly: true}, func(file uint64, typ byte, payload []byte) error {
		switch typ {
		case wal.RecordBatch:
			if err := batch.Unmarshal(payload); err != nil {
				return err
			}
			if err := checkSeq(batch.Seq); err != nil {
				return err
			}
			for _, d := range batch.Series {
				if m, ok := db.cat.Meta(d.ID); ok {
					if m.Key != string(d.Key) {
						return fmt.Errorf("%w: wal series %d is %q, catalog says %q", ErrCorrupt, d.ID, d.Key, m.Key)
					}
					continue
				}
				if d.ID != uint64(db.cat.Len()) {
					return fmt.Errorf("%w: wal series id %d out of sequence", ErrCorrupt, d.ID)
				}
				if _, err := db.cat.AddKey(d.Key, d.Kind); err != nil {
					return fmt.Errorf("%w: %v", ErrCorrupt, err)
				}
			}
			for _, e := range batch.Entries {
				if m, ok := db.cat.Meta(e.ID); !ok || m.Kind != e.Value.Kind() {
					return fmt.Errorf("%w: wal entry for unknown series %d or wrong kind", ErrCorrupt, e.ID)
				}
			}
			if err := mem.t.ApplySeq(batch.Entries, batch.Seq); err != nil {
				return fmt.Errorf("%w: wal batch %d: %v", ErrCorrupt, batch.Seq, err)
			}
		case wal.RecordDelete:
			if err := del.Unmarshal(payload); err != nil {
				return err
			}
			if err := checkSeq(del.Seq); err != nil {
				return err
			}
			if !known[del.Seq] && del.Seq > segOldest {
				known[del.Seq] = true
				sel := del.Selector
				sel.Tags = slices.Clone(sel.Tags) // Unmarshal reuses the slice
				db.mu.tombstones = append(db.mu.tombstones, tombstone{seq: del.Seq, sel: sel})
			}
			db.applyDeleteToMem(mem.t, &del.Selector)
			replayedDeletes = true
		default:
			return fmt.Errorf("%w: unknown wal record type %d", ErrCorrupt, typ)
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("replay wal: %w", err)
	}
	if res.Records > 0 {
		db.logger.Info("replayed wal", "files", res.Files, "records", res.Records, "samples", mem.t.Len())
	}
	mem.deletes = replayedDeletes
	db.mu.mem = mem
	return res, nil
}

// readCatalog reads the series catalog into db.cat without changing the
// file: a torn tail is only measured.
func (db *DB) readCatalog(m *manifest.Manifest) (*catalog.Loaded, error) {
	path := filepath.Join(db.dir, catalogName)
	lc := &catalog.Loaded{Path: path}
	data, err := vfs.ReadFile(db.fs, path)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read series catalog: %w", err)
	default:
		lc.Exists = true
		if lc.Version, lc.Valid, lc.Torn, err = catalog.Parse(path, data, db.cat); err != nil {
			return nil, err
		}
	}
	lc.N = db.cat.Len()
	if uint64(lc.N) < m.SeriesCount {
		return nil, corruptf(path, lc.Valid, "catalog holds %d series, manifest expects %d", lc.N, m.SeriesCount)
	}
	return lc, nil
}
