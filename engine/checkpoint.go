package engine

// Checkpoint: an online, consistent copy of a database.
//
// A checkpoint is an ordinary database directory: a MANIFEST, the series
// catalog (SERIES), the segments the manifest lists and the WAL files from
// the manifest's WAL start. Open reads it like any other database; replaying
// its WAL brings it to the checkpoint's sequence number.
//
//	dir/
//	  CHECKPOINT-INCOMPLETE   while the copy is under way (removed last)
//	  SERIES                  a prefix of the source's catalog
//	  NNNNNN.seg              hard links to the source's segments (or copies)
//	  wal/NNNNNNNN.wal        copies of the source's WAL files
//	  MANIFEST                written after everything else is durable
//
// Consistency, on a writable DB: Checkpoint holds versionMu, so no flush or
// compaction publishes a manifest meanwhile, and takes commitMu just long
// enough to read the last sequence number S and rotate the WAL: every write
// and delete up to S is then in a WAL file below the new one, whole, and
// none after S is. The manifest on disk is the live one (manifest edits
// hold versionMu); its segments are pinned by a reference to the current
// version, so compaction never removes them under the copy. The catalog
// prefix and the WAL files are copied before versionMu is released (a later
// flush may remove WAL files); the segments, immutable, are linked after.
// Writes go on throughout: they wait only for the rotation.
//
// On a ReadOnly DB, whose directory a writer in another process may change,
// Checkpoint copies from the manifest on disk, then validates the copy as
// Open would (every listed segment, the catalog, consecutive WAL sequence
// numbers) and starts over from a fresh manifest when the writer removed or
// rotated a file under it.
//
// The marker file makes a checkpoint that stopped part-way (a crash, a full
// disk) recognisably incomplete: Open of a directory holding it fails, so
// an incomplete copy never opens with silent gaps.

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stratadb/strata/internal/manifest"
	"github.com/stratadb/strata/internal/vfs"
	"github.com/stratadb/strata/wal"
)

// checkpointMarker is the file that marks an unfinished checkpoint.
const checkpointMarker = "CHECKPOINT-INCOMPLETE"

// CheckpointInfo describes a finished checkpoint.
type CheckpointInfo struct {
	Seq   uint64 // the sequence number the checkpoint is consistent as of
	Files int    // files in the checkpoint
	Bytes int64  // total size of the checkpoint's files
}

// errIncompleteCheckpoint is what Open says of a directory holding the
// marker of an unfinished checkpoint.
func errIncompleteCheckpoint(dir string) error {
	return corruptf(filepath.Join(dir, checkpointMarker), 0,
		"the directory is an incomplete checkpoint (the copy stopped before it finished); remove it and take another")
}

// Checkpoint writes to dir, which must not exist or be empty, a complete
// database that Open reads: every write acknowledged before Checkpoint was
// called is in it, and it is consistent as of one sequence number (never
// half a batch, never half a delete), which the result reports. Writes,
// flushes and compactions go on meanwhile. Segments are hard-linked where
// dir is on the same filesystem and copied otherwise; nothing of the source
// changes. A checkpoint that fails or is interrupted leaves dir marked
// incomplete: Open of it fails until it is removed.
//
// On a ReadOnly DB, Checkpoint copies the database as it is on disk when
// called, which a writer in another process may be changing.
func (db *DB) Checkpoint(ctx context.Context, dir string) (CheckpointInfo, error) {
	if err := db.checkOpen(); err != nil {
		return CheckpointInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return CheckpointInfo{}, err
	}
	if dir == "" {
		return CheckpointInfo{}, fmt.Errorf("checkpoint: %w: empty directory name", ErrInvalid)
	}
	if inside, err := withinDir(db.dir, dir); err != nil {
		return CheckpointInfo{}, fmt.Errorf("checkpoint: %w", err)
	} else if inside {
		return CheckpointInfo{}, fmt.Errorf("checkpoint: %w: %s is the database's own directory or inside it", ErrInvalid, dir)
	}
	cp := &checkpointer{db: db, dir: dir, fs: db.fs}
	if wrap := db.testCheckpointFS; wrap != nil {
		cp.fs = wrap(db.fs)
	}
	if err := cp.prepare(); err != nil {
		return CheckpointInfo{}, fmt.Errorf("checkpoint: %w", err)
	}
	var info CheckpointInfo
	var err error
	if db.readOnly {
		info, err = cp.runReadOnly(ctx)
	} else {
		info, err = cp.runWritable(ctx)
	}
	if err != nil {
		return CheckpointInfo{}, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	return info, nil
}

// withinDir reports whether b (which may be missing) names directory a or
// a path inside it, symbolic links resolved where the path exists.
func withinDir(a, b string) (bool, error) {
	aa, err := resolvePath(a)
	if err != nil {
		return false, err
	}
	bb, err := resolvePath(b)
	if err != nil {
		return false, err
	}
	rel, err := filepath.Rel(aa, bb)
	if err != nil {
		return false, nil // on another volume
	}
	return rel == "." || rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)), nil
}

// resolvePath returns p absolute and clean, with the symbolic links of its
// longest existing ancestor resolved.
func resolvePath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for dir := abs; ; {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

type checkpointer struct {
	db    *DB
	dir   string
	fs    vfs.FS // the target's filesystem: the DB's, but for tests
	files int
	bytes int64
	// created lists the files written, so that a read-only attempt that
	// lost a race can start over in an empty directory.
	created []string
	// Set by captureLocked for a writable DB.
	walEnd  uint64 // WAL files below it hold every record up to the checkpoint's seq
	catSize int64  // bytes of the catalog file to copy
}

// prepare makes dir (missing or empty) and puts the marker in it.
func (cp *checkpointer) prepare() error {
	fs := cp.fs
	names, err := fs.ReadDir(cp.dir)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		if err := fs.MkdirAll(cp.dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", cp.dir, err)
		}
		if err := fs.SyncDir(filepath.Dir(filepath.Clean(cp.dir))); err != nil {
			return fmt.Errorf("sync parent of %s: %w", cp.dir, err)
		}
	case err != nil:
		return fmt.Errorf("list %s: %w", cp.dir, err)
	case len(names) > 0:
		return fmt.Errorf("%w: %s is not empty", ErrInvalid, cp.dir)
	}
	f, err := fs.Create(filepath.Join(cp.dir, checkpointMarker))
	if err != nil {
		return fmt.Errorf("create marker: %w", err)
	}
	if _, err = f.Write([]byte("strata checkpoint in progress\n")); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.MkdirAll(filepath.Join(cp.dir, walDirName), 0o755)
	}
	if err == nil {
		err = fs.SyncDir(cp.dir)
	}
	if err != nil {
		return fmt.Errorf("create marker: %w", err)
	}
	return nil
}

// runWritable takes the checkpoint of a writable DB.
func (cp *checkpointer) runWritable(ctx context.Context) (CheckpointInfo, error) {
	db := cp.db
	db.versionMu.Lock()
	m, v, seq, err := cp.captureLocked()
	if err == nil {
		// The catalog prefix and the WAL files: a flush may rewrite the
		// one's tail and remove the others once versionMu is released.
		err = cp.copyLogs(ctx, m.WALStart, cp.walEnd, cp.catSize)
	}
	db.versionMu.Unlock()
	if v != nil {
		defer db.unrefVersion(v)
	}
	if err != nil {
		return CheckpointInfo{}, err
	}
	if err := cp.copySegments(ctx, m); err != nil {
		return CheckpointInfo{}, err
	}
	m.LastSeq = max(m.LastSeq, seq)
	m.Obsolete = nil
	m.Format = manifest.FormatVersion
	if err := cp.finish(m); err != nil {
		return CheckpointInfo{}, err
	}
	return CheckpointInfo{Seq: seq, Files: cp.files, Bytes: cp.bytes}, nil
}

// captureLocked, under versionMu, fixes what the checkpoint holds: the
// sequence number, the WAL files below a fresh rotation, the live manifest
// and its version (referenced).
func (cp *checkpointer) captureLocked() (*manifest.Manifest, *version, uint64, error) {
	db := cp.db
	db.mu.Lock()
	bgErr := db.mu.bgErr
	db.mu.Unlock()
	if bgErr != nil {
		return nil, nil, 0, bgErr
	}
	db.commitMu.Lock()
	if err := db.checkOpen(); err != nil {
		db.commitMu.Unlock()
		return nil, nil, 0, err
	}
	// The last sequence number handed out, not the last published: Rotate
	// fsyncs every record up to seq, so a write or delete still waiting for
	// its fsync finds it done and is acknowledged; and Rotate fails once any
	// fsync has failed (even one that fails while it waits), so no refused
	// operation is in the files it returns.
	seq := db.seq.Load()
	walEnd, err := db.wal.Rotate()
	db.commitMu.Unlock()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("rotate wal: %w", err)
	}
	cp.walEnd = walEnd
	m, err := readManifest(db.fs, db.dir)
	if err != nil {
		return nil, nil, 0, err
	}
	db.mu.Lock()
	v := db.mu.v
	if v != nil {
		v.Ref()
	}
	db.mu.Unlock()
	if v == nil {
		return nil, nil, 0, ErrClosed
	}
	// The manifest on disk is the current version: both change only under
	// versionMu.
	var live []uint64
	for _, level := range v.Levels {
		for _, h := range level {
			live = append(live, h.FileNum)
		}
	}
	listed := make([]uint64, 0, len(m.Segments))
	for _, s := range m.Segments {
		listed = append(listed, s.FileNum)
	}
	slices.Sort(live)
	slices.Sort(listed)
	if !slices.Equal(live, listed) {
		return nil, v, 0, fmt.Errorf("%w: the manifest on disk does not list the live segments", ErrCorrupt)
	}
	cp.catSize = db.catf.Size()
	return m, v, seq, nil
}

// runReadOnly takes the checkpoint of a ReadOnly DB from the files on disk,
// starting over when a writer changes them under the copy.
func (cp *checkpointer) runReadOnly(ctx context.Context) (CheckpointInfo, error) {
	var lastErr error
	for range readOnlyAttempts {
		info, err := cp.readOnlyAttempt(ctx)
		if err == nil {
			return info, nil
		}
		if ctx.Err() != nil {
			return CheckpointInfo{}, err
		}
		// A file removed under the copy, or a WAL rotated between the copies
		// of two files: start over from the manifest the writer left.
		if !errors.Is(err, iofs.ErrNotExist) && !errors.Is(err, ErrCorrupt) {
			return CheckpointInfo{}, err
		}
		lastErr = err
		if cerr := cp.clear(); cerr != nil {
			return CheckpointInfo{}, cerr
		}
	}
	return CheckpointInfo{}, fmt.Errorf("the database kept changing: %w", lastErr)
}

func (cp *checkpointer) readOnlyAttempt(ctx context.Context) (CheckpointInfo, error) {
	db := cp.db
	m, err := readManifest(db.fs, db.dir)
	if err != nil {
		return CheckpointInfo{}, err
	}
	// Segments first: the catalog read after the manifest holds at least
	// the series its segments name.
	if err := cp.copySegments(ctx, m); err != nil {
		return CheckpointInfo{}, err
	}
	catInfo, err := db.fs.Stat(filepath.Join(db.dir, catalogName))
	catSize := int64(-1)
	if err == nil {
		catSize = catInfo.Size()
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return CheckpointInfo{}, fmt.Errorf("stat series catalog: %w", err)
	}
	// Every WAL file from the manifest's start, as listed now: all but the
	// last are complete; the last may end in a record being written, which
	// Open treats as the torn tail it is.
	nums, err := wal.Files(db.fs, filepath.Join(db.dir, walDirName))
	if err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return CheckpointInfo{}, err
	}
	walEnd := max(m.WALStart, 1)
	if len(nums) > 0 {
		walEnd = max(walEnd, nums[len(nums)-1]+1)
	}
	if err := cp.copyLogs(ctx, m.WALStart, walEnd, catSize); err != nil {
		return CheckpointInfo{}, err
	}
	m.Obsolete = nil
	m.Format = manifest.FormatVersion
	// Validate the copy as Open would, and learn its sequence number.
	seq, err := cp.validate(m)
	if err != nil {
		return CheckpointInfo{}, err
	}
	m.LastSeq = max(m.LastSeq, seq)
	if err := cp.finish(m); err != nil {
		return CheckpointInfo{}, err
	}
	return CheckpointInfo{Seq: m.LastSeq, Files: cp.files, Bytes: cp.bytes}, nil
}

// validate loads the copy read-only, as Open does, and returns the last
// sequence number its WAL replays.
func (cp *checkpointer) validate(m *manifest.Manifest) (uint64, error) {
	opts := cp.db.opts.Clone()
	opts.ReadOnly = true
	opts.Logger = slog.New(slog.DiscardHandler)
	c := newDB(cp.dir, opts, cp.fs)
	err := c.recover(m)
	seq := c.seq.Load()
	c.releaseAfterFailedOpen()
	return seq, err
}

// clear removes what an attempt wrote, leaving the marker.
func (cp *checkpointer) clear() error {
	for _, p := range cp.created {
		if err := cp.fs.Remove(p); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return fmt.Errorf("start over: %w", err)
		}
	}
	cp.created, cp.files, cp.bytes = nil, 0, 0
	return nil
}

// copyLogs copies the first catSize bytes of the catalog (none when
// negative) and the WAL files numbered from walStart below walEnd.
func (cp *checkpointer) copyLogs(ctx context.Context, walStart, walEnd uint64, catSize int64) error {
	db := cp.db
	if catSize >= 0 {
		if err := cp.copyFile(ctx, filepath.Join(db.dir, catalogName), filepath.Join(cp.dir, catalogName), catSize); err != nil {
			return fmt.Errorf("copy series catalog: %w", err)
		}
	}
	for n := max(walStart, 1); n < walEnd; n++ {
		name := wal.FileName(n)
		src := filepath.Join(db.dir, walDirName, name)
		err := cp.copyFile(ctx, src, filepath.Join(cp.dir, walDirName, name), -1)
		if errors.Is(err, iofs.ErrNotExist) && db.readOnly {
			return err
		}
		if err != nil {
			return fmt.Errorf("copy wal file: %w", err)
		}
	}
	return nil
}

// copySegments links (or copies) the segments m lists.
func (cp *checkpointer) copySegments(ctx context.Context, m *manifest.Manifest) error {
	for _, s := range m.Segments {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := segName(s.FileNum)
		src, dst := filepath.Join(cp.db.dir, name), filepath.Join(cp.dir, name)
		err := vfs.Link(cp.fs, src, dst)
		if err == nil {
			cp.created = append(cp.created, dst)
			info, serr := cp.fs.Stat(dst)
			if serr != nil {
				return fmt.Errorf("stat linked segment: %w", serr)
			}
			cp.files++
			cp.bytes += info.Size()
			continue
		}
		if errors.Is(err, iofs.ErrNotExist) {
			return err
		}
		if err := cp.copyFile(ctx, src, dst, -1); err != nil {
			if errors.Is(err, iofs.ErrNotExist) {
				return err
			}
			return fmt.Errorf("copy segment: %w", err)
		}
	}
	return nil
}

// copyBufSize is the unit of copies, between checks of the context.
const copyBufSize = 1 << 20

// copyFile copies the first n bytes of src (all of it when n < 0) to a
// new file dst and fsyncs it.
func (cp *checkpointer) copyFile(ctx context.Context, src, dst string, n int64) error {
	in, err := cp.db.fs.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if n < 0 {
		info, err := in.Stat()
		if err != nil {
			return err
		}
		n = info.Size()
	}
	out, err := cp.fs.Create(dst)
	if err != nil {
		return err
	}
	cp.created = append(cp.created, dst)
	buf := make([]byte, min(n, copyBufSize))
	var off int64
	for off < n {
		if err := ctx.Err(); err != nil {
			out.Close()
			return err
		}
		k := int(min(int64(len(buf)), n-off))
		got, rerr := in.ReadAt(buf[:k], off)
		if got > 0 {
			if _, werr := out.Write(buf[:got]); werr != nil {
				out.Close()
				return werr
			}
			off += int64(got)
		}
		if rerr == io.EOF && got < k {
			// The file is shorter than its size said: a WAL file cut by a
			// repair, or a catalog truncated. What was read is copied.
			break
		}
		if rerr != nil && rerr != io.EOF {
			out.Close()
			return rerr
		}
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	cp.files++
	cp.bytes += off
	return nil
}

// finish makes the copy durable, writes its manifest and removes the
// marker.
func (cp *checkpointer) finish(m *manifest.Manifest) error {
	fs := cp.fs
	if err := fs.SyncDir(filepath.Join(cp.dir, walDirName)); err != nil {
		return fmt.Errorf("sync wal dir: %w", err)
	}
	if err := fs.SyncDir(cp.dir); err != nil {
		return fmt.Errorf("sync %s: %w", cp.dir, err)
	}
	data := m.Marshal()
	if err := vfs.WriteFileAtomic(fs, filepath.Join(cp.dir, manifest.Name), data); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	cp.files++
	cp.bytes += int64(len(data))
	if err := fs.Remove(filepath.Join(cp.dir, checkpointMarker)); err != nil {
		return fmt.Errorf("remove marker: %w", err)
	}
	if err := fs.SyncDir(cp.dir); err != nil {
		return fmt.Errorf("sync %s: %w", cp.dir, err)
	}
	return nil
}
