package engine

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stratadb/strata/internal/catalog"
	"github.com/stratadb/strata/internal/manifest"
	"github.com/stratadb/strata/internal/vfs"
	"github.com/stratadb/strata/segment"
	"github.com/stratadb/strata/wal"
)

// damagedSuffix is appended to the name of a file that Repair sets aside:
// the engine never reads it again and never removes it, so an operator can
// inspect or delete it.
const damagedSuffix = ".damaged"

// RepairReport says what Repair found, kept and could not recover.
type RepairReport struct {
	// ManifestRebuilt is set when the manifest was missing or unreadable
	// and was rebuilt from the segments found.
	ManifestRebuilt bool
	// Segments is the number of segments the new manifest lists, each
	// checked block by block.
	Segments int
	// SetAside lists the files renamed with the suffix ".damaged" because
	// they failed a check (a segment with a bad block, WAL files after a
	// gap or damage), with the reason.
	SetAside []string
	// Missing lists the segments the old manifest named that are gone.
	Missing []string
	// WALBytesDropped counts the WAL bytes set aside: from the first damage
	// or gap in the log to its end.
	WALBytesDropped int64
	// Lost describes, in words, what the repaired database no longer holds
	// or may answer differently.
	Lost []string
}

// Repair rebuilds what can be rebuilt of the database in dir, for an
// operator after Open reported ErrCorrupt. It never deletes data: a file it
// cannot use is renamed with the suffix ".damaged" and reported. It
//
//   - checks every segment file block by block, and sets aside those that
//     fail;
//   - keeps the manifest when it is readable, dropping the segments it
//     names that are missing or damaged; rebuilds it from the intact
//     segments when it is missing or damaged (then every segment goes to
//     level 0, ordered by file number, and the tombstones it held are lost:
//     data deleted but not yet compacted away may reappear, and an
//     overwritten sample may read its older value);
//   - replays the WAL from the manifest's start and, at the first damage or
//     gap, sets aside the rest of the log (the damaged file's tail is moved
//     to a ".damaged" copy first);
//   - writes the new manifest, and opens the database once to check it.
//
// dir must hold a strata database (ErrNotDatabase otherwise) that no other
// process has open (ErrLocked). A damaged series catalog is not rebuilt:
// Repair returns its ErrCorrupt.
func Repair(dir string, opts *Options) (RepairReport, error) {
	var rep RepairReport
	opts = opts.Clone()
	opts.ReadOnly = false
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return rep, err
	}
	fsys := opts.fs
	if fsys == nil {
		fsys = vfs.Default
	}
	kind, err := inspectDir(fsys, dir)
	if err != nil {
		return rep, fmt.Errorf("repair %s: %w", dir, err)
	}
	if kind != dirDatabase && kind != dirNoManifest {
		return rep, fmt.Errorf("%w: repair %s", ErrNotDatabase, dir)
	}
	lock, err := fsys.Lock(filepath.Join(dir, lockName))
	if err != nil {
		if errors.Is(err, vfs.ErrLocked) {
			return rep, fmt.Errorf("%w: repair %s", ErrLocked, dir)
		}
		return rep, fmt.Errorf("repair %s: %w", dir, err)
	}
	r := &repairer{dir: dir, fs: fsys, rep: &rep, opts: opts}
	err = r.run()
	lock.Close()
	if err != nil {
		return rep, fmt.Errorf("repair %s: %w", dir, err)
	}
	// Check the result the way every later Open will.
	db, err := Open(dir, opts)
	if err != nil {
		return rep, fmt.Errorf("repair %s: the repaired database does not open: %w", dir, err)
	}
	if err := db.Close(); err != nil {
		return rep, fmt.Errorf("repair %s: close: %w", dir, err)
	}
	return rep, nil
}

type repairer struct {
	dir  string
	fs   vfs.FS
	opts *Options
	rep  *RepairReport
}

// setAside renames path to path+".damaged" (or path+".N.damaged" when an
// earlier repair set aside a file of that name) and reports it.
func (r *repairer) setAside(path, why string) error {
	to, err := r.damagedName(path)
	if err == nil {
		err = r.fs.Rename(path, to)
	}
	if err != nil {
		return fmt.Errorf("set aside %s: %w", path, err)
	}
	rel, _ := filepath.Rel(r.dir, path)
	r.rep.SetAside = append(r.rep.SetAside, fmt.Sprintf("%s: %s", rel, why))
	return nil
}

// damagedName returns the name to set path aside as: path+".damaged", or
// path+".N.damaged" for the first N from 2 that no file holds, so that a
// file set aside before is never replaced.
func (r *repairer) damagedName(path string) (string, error) {
	name := path + damagedSuffix
	for n := 2; ; n++ {
		_, err := r.fs.Stat(name)
		if errors.Is(err, iofs.ErrNotExist) {
			return name, nil
		}
		if err != nil {
			return "", err
		}
		name = fmt.Sprintf("%s.%d%s", path, n, damagedSuffix)
	}
}

// checkSegment opens the segment at path and reads every block.
func (r *repairer) checkSegment(path string) error {
	sr, err := segment.Open(r.fs, path)
	if err != nil {
		return err
	}
	defer sr.Close()
	var buf []Sample
	for i := range sr.NumSeries() {
		s := sr.Series(i)
		for b := range s.Blocks {
			if buf, err = sr.ReadBlock(s, b, buf[:0]); err != nil {
				return err
			}
		}
		for b := range s.Rollups {
			if err := sr.CheckRollupHours(s, b); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *repairer) run() error {
	mpath := filepath.Join(r.dir, manifest.Name)
	var m *manifest.Manifest
	data, err := vfs.ReadFile(r.fs, mpath)
	if err == nil {
		m, err = manifest.Unmarshal(mpath, data)
	}
	if err != nil {
		if !errors.Is(err, iofs.ErrNotExist) && !errors.Is(err, ErrCorrupt) {
			return fmt.Errorf("read manifest: %w", err)
		}
		if m, err = legacyManifest(r.fs, r.dir); err != nil {
			return err
		}
		if m == nil {
			r.rep.ManifestRebuilt = true
			r.rep.Lost = append(r.rep.Lost, "the manifest was missing or damaged: segment levels were rebuilt as level 0 by file number, "+
				"and its tombstones are lost (data deleted but not yet compacted away may reappear; an overwritten sample may read its older value)")
			m = &manifest.Manifest{}
		}
		if _, statErr := r.fs.Stat(mpath); statErr == nil {
			if err := r.setAside(mpath, "unreadable manifest"); err != nil {
				return err
			}
		}
	}

	// Segments: every file of our naming, checked block by block.
	names, err := r.fs.ReadDir(r.dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", r.dir, err)
	}
	intact := make(map[uint64]bool)
	maxNum := uint64(0)
	for _, name := range names {
		num, ok := parseSegName(name)
		if !ok || segName(num) != name {
			continue
		}
		maxNum = max(maxNum, num)
		path := filepath.Join(r.dir, name)
		if err := r.checkSegment(path); err != nil {
			if err := r.setAside(path, err.Error()); err != nil {
				return err
			}
			continue
		}
		intact[num] = true
	}

	// The catalog must read back: segments and WAL refer to its ids.
	cat, err := r.readCatalog()
	if err != nil {
		return err
	}

	nm := &manifest.Manifest{
		NextFile:    max(m.NextFile, maxNum+1),
		WALStart:    max(m.WALStart, 1),
		LastSeq:     m.LastSeq,
		SeriesCount: min(m.SeriesCount, uint64(cat.Len())),
		Tombstones:  m.Tombstones,
		Format:      manifest.FormatVersion,
	}
	if n := cat.Len(); uint64(n) < m.SeriesCount {
		r.rep.Lost = append(r.rep.Lost, fmt.Sprintf("the series catalog holds %d series, the manifest expected %d", n, m.SeriesCount))
	}
	if r.rep.ManifestRebuilt {
		for _, num := range slices.Sorted(maps.Keys(intact)) {
			nm.Segments = append(nm.Segments, manifest.Segment{FileNum: num, Level: 0})
		}
		// Replay the WAL from its first file: records a segment already
		// holds are applied again, which changes nothing.
		if nums, err := wal.Files(r.fs, filepath.Join(r.dir, walDirName)); err == nil && len(nums) > 0 {
			nm.WALStart = nums[0]
		}
	} else {
		for _, s := range m.Segments {
			if intact[s.FileNum] {
				nm.Segments = append(nm.Segments, s)
				continue
			}
			r.rep.Missing = append(r.rep.Missing, segName(s.FileNum))
		}
		if len(r.rep.Missing) > 0 {
			r.rep.Lost = append(r.rep.Lost, fmt.Sprintf("%d segments the manifest listed are missing or damaged: their samples are lost (%s)",
				len(r.rep.Missing), strings.Join(r.rep.Missing, ", ")))
		}
		// Unlisted intact segments that are no leftovers were never part of
		// this manifest's state: set them aside rather than guess.
		obsolete := make(map[uint64]bool)
		for _, n := range m.Obsolete {
			obsolete[n] = true
		}
		listed := make(map[uint64]bool)
		for _, s := range nm.Segments {
			listed[s.FileNum] = true
		}
		for _, num := range slices.Sorted(maps.Keys(intact)) {
			if !listed[num] && num < m.NextFile && !obsolete[num] && m.Format != manifest.FormatVersionV1 {
				if err := r.setAside(filepath.Join(r.dir, segName(num)), "segment the manifest does not list"); err != nil {
					return err
				}
			}
		}
	}
	r.rep.Segments = len(nm.Segments)

	if err := r.repairWAL(nm); err != nil {
		return err
	}
	if err := manifest.Write(r.fs, r.dir, nm); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}

// repairWAL replays the WAL as Open would; at the first damage or gap it
// sets the rest of the log aside, so that Open replays the intact prefix.
func (r *repairer) repairWAL(nm *manifest.Manifest) error {
	walDir := filepath.Join(r.dir, walDirName)
	db := newDB(r.dir, r.opts, r.fs)
	db.readOnly = true
	var err error
	if db.cat, err = r.readCatalog(); err != nil {
		return err
	}
	replayFrom := *nm
	if r.rep.ManifestRebuilt {
		// The last sequence number is unknown: accept the WAL's first.
		replayFrom.LastSeq = math.MaxUint64 - 1
	}
	for {
		db.mu.tombstones = tombstonesOf(nm)
		db.seq.Store(nm.LastSeq)
		_, err := db.replayWAL(&replayFrom, walDir)
		var ce *CorruptionError
		if err == nil {
			nm.LastSeq = max(nm.LastSeq, db.seq.Load())
			nm.SeriesCount = min(nm.SeriesCount, uint64(db.cat.Len()))
			return nil
		}
		if !errors.As(err, &ce) {
			return err
		}
		// Everything from the damage on is set aside: the rest of the file
		// (copied first) and every later file.
		nums, lerr := wal.Files(r.fs, walDir)
		if lerr != nil {
			return lerr
		}
		bad, isWAL := wal.ParseFileName(filepath.Base(ce.Path))
		if !isWAL {
			return err
		}
		dropped := 0
		for _, n := range nums {
			if n < bad {
				continue
			}
			path := filepath.Join(walDir, wal.FileName(n))
			fi, serr := r.fs.Stat(path)
			if serr != nil {
				return serr
			}
			if n == bad && ce.Offset > 0 && ce.Offset < fi.Size() {
				if err := r.splitWAL(path, ce.Offset, err.Error()); err != nil {
					return err
				}
				r.rep.WALBytesDropped += fi.Size() - ce.Offset
				continue
			}
			r.rep.WALBytesDropped += fi.Size()
			if err := r.setAside(path, "after wal damage: "+err.Error()); err != nil {
				return err
			}
			dropped++
		}
		r.rep.Lost = append(r.rep.Lost, fmt.Sprintf("the WAL is damaged (%v): the writes logged after that point are set aside, not replayed", err))
		// A fresh catalog for the next attempt: replay added series to it.
		if db.cat, err = r.readCatalog(); err != nil {
			return err
		}
		if dropped == 0 && ce.Offset == 0 {
			return err // nothing was set aside: no progress
		}
	}
}

// splitWAL copies the bytes of path from off on to path+".damaged" and
// truncates path at off.
func (r *repairer) splitWAL(path string, off int64, why string) error {
	data, err := vfs.ReadFile(r.fs, path)
	if err != nil {
		return err
	}
	to, err := r.damagedName(path)
	if err != nil {
		return fmt.Errorf("copy damaged wal tail: %w", err)
	}
	if err := vfs.WriteFileAtomic(r.fs, to, data[off:]); err != nil {
		return fmt.Errorf("copy damaged wal tail: %w", err)
	}
	if err := vfs.TruncateSync(r.fs, path, off); err != nil {
		return fmt.Errorf("truncate %s: %w", path, err)
	}
	rel, _ := filepath.Rel(r.dir, path)
	relTo, _ := filepath.Rel(r.dir, to)
	r.rep.SetAside = append(r.rep.SetAside, fmt.Sprintf("%s from offset %d (copied to %s): %s", rel, off, relTo, why))
	return nil
}

// readCatalog reads the series catalog; damage before its tail cannot be
// repaired, since segments and WAL records refer to its ids.
func (r *repairer) readCatalog() (*catalog.Catalog, error) {
	cat := catalog.New()
	path := filepath.Join(r.dir, catalogName)
	data, err := vfs.ReadFile(r.fs, path)
	if err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return nil, fmt.Errorf("read series catalog: %w", err)
	}
	if _, _, _, err := catalog.Parse(path, data, cat); err != nil {
		return nil, fmt.Errorf("the series catalog is damaged and cannot be rebuilt: %w", err)
	}
	return cat, nil
}
