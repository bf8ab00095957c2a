package manifest

// The manifest (MANIFEST) names the live state of a database: its segments
// with their levels, the WAL position they cover, the live tombstones and
// the counters that must never go backwards. It is replaced atomically
// (write MANIFEST.tmp, fsync, rename, fsync dir) after every flush and
// compaction, so a crash leaves the old state or the new one. A new
// database writes its first manifest before any other file, so every
// database has one: a directory holding a MANIFEST that starts with the
// magic is a strata database (see engine/open.go).
//
//	file      := magic "SMAN" (4) | version (1) | payload | crc32c(magic..payload) uint32 LE (4)
//	payload   := nextFile uvarint | walStart uvarint | lastSeq uvarint | seriesCount uvarint
//	             | nseg uvarint | segment{nseg} | ntomb uvarint | tombstone{ntomb}
//	             | nobs uvarint | obsolete uvarint{nobs}                    (version 2 only)
//	             [ | expiry uvarint ]                                        (version 2, optional)
//	segment   := fileNum uvarint | level uvarint | tombApplied uvarint
//	tombstone := a wal.Delete: seq uvarint | measurement str | field str
//	             | ntags uvarint | (key str | value str){ntags} | start varint | end varint
//	             | nmatchers uvarint | (key str | op byte | value str){nmatchers} (version 2 only)
//	str       := len uvarint | bytes
//
// nextFile: every segment file number in use is below it; a segment file
// numbered at or above it was written by a flush or compaction whose
// manifest edit never landed. walStart: WAL files numbered below it are
// covered by segments. lastSeq: the last sequence number assigned when the
// manifest was written. seriesCount: the series catalog holds at least this
// many series (ids 0..seriesCount-1). tombApplied: tombstones with a seq at
// or below it are already applied to the segment's data. obsolete: segment
// files that left the live set (compaction inputs, abandoned outputs) and
// may still be on disk because their removal had not happened when the
// manifest was written; Open removes them. Version 1 (written by earlier
// releases, still read) has no obsolete list and no matchers in its
// tombstones. expiry: the expiry floor (see engine/readview.go), biased so that
// 0 is math.MinInt64 (none): samples older are gone for good. A manifest
// that ends before it has none.
//
// These constants are part of the durable format and must not be changed.

import (
	"encoding/binary"
	"hash/crc32"
	"path/filepath"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/decbuf"
	"github.com/stratadb/strata/internal/vfs"
	"github.com/stratadb/strata/wal"
)

// The file's name, magic and format versions.
const (
	Magic           = "SMAN"
	FormatVersion   = 2
	FormatVersionV1 = 1 // no obsolete list; read, never written
	Name            = "MANIFEST"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Segment is what a manifest records of a live segment.
type Segment struct {
	FileNum     uint64
	Level       int
	TombApplied uint64
}

// Manifest is the decoded content of a manifest file.
type Manifest struct {
	NextFile    uint64
	WALStart    uint64
	LastSeq     uint64
	SeriesCount uint64
	Segments    []Segment
	Tombstones  []wal.Delete
	Obsolete    []uint64 // segment files dropped from the live set, maybe not yet removed
	Format      byte     // as read; Marshal always writes FormatVersion
	// expiry is the expiry floor biased by 2^63 (floor - math.MinInt64), so
	// that the zero manifest has none; see ExpiredBefore.
	expiry uint64
}

// New returns the first manifest of a new database.
func New() *Manifest { return &Manifest{NextFile: 1, WALStart: 1, Format: FormatVersion} }

// ExpiredBefore returns the expiry floor: samples older are gone for good.
func (m *Manifest) ExpiredBefore() int64 { return int64(m.expiry + 1<<63) }

// SetExpiredBefore sets the expiry floor.
func (m *Manifest) SetExpiredBefore(t int64) { m.expiry = uint64(t) - 1<<63 }

// Marshal encodes m in the current format.
func (m *Manifest) Marshal() []byte {
	b := append([]byte(Magic), FormatVersion)
	b = binary.AppendUvarint(b, m.NextFile)
	b = binary.AppendUvarint(b, m.WALStart)
	b = binary.AppendUvarint(b, m.LastSeq)
	b = binary.AppendUvarint(b, m.SeriesCount)
	b = binary.AppendUvarint(b, uint64(len(m.Segments)))
	for _, s := range m.Segments {
		b = binary.AppendUvarint(b, s.FileNum)
		b = binary.AppendUvarint(b, uint64(s.Level))
		b = binary.AppendUvarint(b, s.TombApplied)
	}
	b = binary.AppendUvarint(b, uint64(len(m.Tombstones)))
	for _, d := range m.Tombstones {
		b = d.Marshal(b)
	}
	b = binary.AppendUvarint(b, uint64(len(m.Obsolete)))
	for _, n := range m.Obsolete {
		b = binary.AppendUvarint(b, n)
	}
	b = binary.AppendUvarint(b, m.expiry)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// Write replaces the manifest of the database in dir with m, atomically:
// a crash leaves the old one or m.
func Write(fs vfs.FS, dir string, m *Manifest) error {
	return vfs.WriteFileAtomic(fs, filepath.Join(dir, Name), m.Marshal())
}

// Smallest encodings, to bound counts before allocating.
const (
	minManifestSegment   = 3 // fileNum, level, tombApplied
	minManifestTombstone = 6 // seq, measurement, field, ntags, start, end
)

// HasMagic reports whether b starts like a manifest: the test of whether a
// directory holds a strata database.
func HasMagic(b []byte) bool {
	return len(b) >= len(Magic) && string(b[:len(Magic)]) == Magic
}

// Unmarshal decodes the manifest b read from path. Damaged bytes are a
// *base.CorruptionError (it matches base.ErrCorrupt).
func Unmarshal(path string, b []byte) (*Manifest, error) {
	if len(b) < len(Magic)+1+4 || !HasMagic(b) {
		return nil, base.Corruptf(path, 0, "bad magic")
	}
	if v := b[4]; v != FormatVersion && v != FormatVersionV1 {
		return nil, base.Corruptf(path, 4, "unsupported version %d", v)
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, base.Corruptf(path, int64(len(b)-4), "checksum mismatch")
	}
	const start = 5
	d := decbuf.New(body[start:])
	m := &Manifest{Format: b[4]}
	m.NextFile = d.Uvarint("next file")
	m.WALStart = d.Uvarint("wal start")
	m.LastSeq = d.Uvarint("last seq")
	m.SeriesCount = d.Uvarint("series count")
	nseg := d.Count("segment count", minManifestSegment)
	m.Segments = make([]Segment, 0, nseg)
	for range nseg {
		s := Segment{FileNum: d.Uvarint("file number")}
		lvl := d.Uvarint("level")
		if lvl >= MaxLevels {
			d.Failf("level %d", lvl)
		}
		s.Level = int(lvl)
		s.TombApplied = d.Uvarint("tomb applied")
		if s.FileNum >= m.NextFile {
			d.Failf("segment %d not below the next file number %d", s.FileNum, m.NextFile)
		}
		m.Segments = append(m.Segments, s)
	}
	ntomb := d.Count("tombstone count", minManifestTombstone)
	for range ntomb {
		var del wal.Delete
		if m.Format >= 2 {
			del.Decode(&d)
		} else {
			del.DecodeLegacy(&d)
		}
		if d.Err() != nil {
			break
		}
		m.Tombstones = append(m.Tombstones, del)
	}
	if m.Format >= 2 {
		nobs := d.Count("obsolete count", 1)
		m.Obsolete = make([]uint64, 0, nobs)
		for range nobs {
			m.Obsolete = append(m.Obsolete, d.Uvarint("obsolete file number"))
		}
	}
	if m.Format >= 2 && d.Err() == nil && d.Len() > 0 {
		m.expiry = d.Uvarint("expiry floor")
	}
	d.End("manifest")
	if err := d.Err(); err != nil {
		return nil, base.Corruptf(path, int64(start+d.Offset()), "%v", err)
	}
	return m, nil
}
