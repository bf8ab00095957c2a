package engine

// The manifest (MANIFEST) names the live state of a database: its segments
// with their levels, the WAL position they cover, the live tombstones and
// the counters that must never go backwards. It is replaced atomically
// (write MANIFEST.tmp, fsync, rename, fsync dir) after every flush and
// compaction, so a crash leaves the old state or the new one. A new
// database writes its first manifest before any other file, so every
// database has one: a directory holding a MANIFEST that starts with the
// magic is a strata database (see open.go).
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
// tombstones. expiry: the expiry floor (see readview.go), biased so that
// 0 is math.MinInt64 (none): samples older are gone for good. A manifest
// that ends before it has none.
//
// These constants are part of the durable format and must not be changed.

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/stratadb/strata/internal/decbuf"
	"github.com/stratadb/strata/wal"
)

const (
	manifestMagic     = "SMAN"
	manifestVersion   = 2
	manifestVersionV1 = 1 // no obsolete list; read, never written
	manifestName      = "MANIFEST"
)

type manifestSegment struct {
	fileNum     uint64
	level       int
	tombApplied uint64
}

type manifest struct {
	nextFile    uint64
	walStart    uint64
	lastSeq     uint64
	seriesCount uint64
	segments    []manifestSegment
	tombstones  []tombstone
	obsolete    []uint64 // segment files dropped from the live set, maybe not yet removed
	version     byte     // as read; marshal always writes manifestVersion
	// expiry is the expiry floor biased by 2^63 (floor - math.MinInt64), so
	// that the zero manifest has none; see expiredBefore.
	expiry uint64
}

// expiredBefore returns the expiry floor: samples older are gone for good.
func (m *manifest) expiredBefore() int64 { return int64(m.expiry + 1<<63) }

// setExpiredBefore sets the expiry floor.
func (m *manifest) setExpiredBefore(t int64) { m.expiry = uint64(t) - 1<<63 }

func (m *manifest) marshal() []byte {
	b := append([]byte(manifestMagic), manifestVersion)
	b = binary.AppendUvarint(b, m.nextFile)
	b = binary.AppendUvarint(b, m.walStart)
	b = binary.AppendUvarint(b, m.lastSeq)
	b = binary.AppendUvarint(b, m.seriesCount)
	b = binary.AppendUvarint(b, uint64(len(m.segments)))
	for _, s := range m.segments {
		b = binary.AppendUvarint(b, s.fileNum)
		b = binary.AppendUvarint(b, uint64(s.level))
		b = binary.AppendUvarint(b, s.tombApplied)
	}
	b = binary.AppendUvarint(b, uint64(len(m.tombstones)))
	for _, t := range m.tombstones {
		d := wal.Delete{Seq: t.seq, Selector: t.sel}
		b = d.Marshal(b)
	}
	b = binary.AppendUvarint(b, uint64(len(m.obsolete)))
	for _, n := range m.obsolete {
		b = binary.AppendUvarint(b, n)
	}
	b = binary.AppendUvarint(b, m.expiry)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// Smallest encodings, to bound counts before allocating.
const (
	minManifestSegment   = 3 // fileNum, level, tombApplied
	minManifestTombstone = 6 // seq, measurement, field, ntags, start, end
)

// hasManifestMagic reports whether b starts like a manifest: the test of
// whether a directory holds a strata database.
func hasManifestMagic(b []byte) bool {
	return len(b) >= len(manifestMagic) && string(b[:len(manifestMagic)]) == manifestMagic
}

func unmarshalManifest(path string, b []byte) (*manifest, error) {
	if len(b) < len(manifestMagic)+1+4 || !hasManifestMagic(b) {
		return nil, corruptf(path, 0, "bad magic")
	}
	if v := b[4]; v != manifestVersion && v != manifestVersionV1 {
		return nil, corruptf(path, 4, "unsupported version %d", v)
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, corruptf(path, int64(len(b)-4), "checksum mismatch")
	}
	const start = 5
	d := decbuf.New(body[start:])
	m := &manifest{version: b[4]}
	m.nextFile = d.Uvarint("next file")
	m.walStart = d.Uvarint("wal start")
	m.lastSeq = d.Uvarint("last seq")
	m.seriesCount = d.Uvarint("series count")
	nseg := d.Count("segment count", minManifestSegment)
	m.segments = make([]manifestSegment, 0, nseg)
	for range nseg {
		s := manifestSegment{fileNum: d.Uvarint("file number")}
		lvl := d.Uvarint("level")
		if lvl >= maxLevels {
			d.Failf("level %d", lvl)
		}
		s.level = int(lvl)
		s.tombApplied = d.Uvarint("tomb applied")
		if s.fileNum >= m.nextFile {
			d.Failf("segment %d not below the next file number %d", s.fileNum, m.nextFile)
		}
		m.segments = append(m.segments, s)
	}
	ntomb := d.Count("tombstone count", minManifestTombstone)
	for range ntomb {
		var del wal.Delete
		if m.version >= 2 {
			del.Decode(&d)
		} else {
			del.DecodeLegacy(&d)
		}
		if d.Err() != nil {
			break
		}
		m.tombstones = append(m.tombstones, tombstone{seq: del.Seq, sel: del.Selector})
	}
	if m.version >= 2 {
		nobs := d.Count("obsolete count", 1)
		m.obsolete = make([]uint64, 0, nobs)
		for range nobs {
			m.obsolete = append(m.obsolete, d.Uvarint("obsolete file number"))
		}
	}
	if m.version >= 2 && d.Err() == nil && d.Len() > 0 {
		m.expiry = d.Uvarint("expiry floor")
	}
	d.End("manifest")
	if err := d.Err(); err != nil {
		return nil, corruptf(path, int64(start+d.Offset()), "%v", err)
	}
	return m, nil
}
