package engine

// The manifest (MANIFEST) names the live state of a database: its segments
// with their levels, the WAL position they cover, the live tombstones and
// the counters that must never go backwards. It is replaced atomically
// (write MANIFEST.tmp, fsync, rename, fsync dir) after every flush and
// compaction, so a crash leaves the old state or the new one.
//
//	file      := magic "SMAN" (4) | version (1) | payload | crc32c(magic..payload) uint32 LE (4)
//	payload   := nextFile uvarint | walStart uvarint | lastSeq uvarint | seriesCount uvarint
//	             | nseg uvarint | segment{nseg} | ntomb uvarint | tombstone{ntomb}
//	             | [nmatched uvarint | (tombstone index uvarint | matchers){nmatched}]
//	segment   := fileNum uvarint | level uvarint | tombApplied uvarint
//	tombstone := seq uvarint | measurement str | field str | ntags uvarint | (key str | value str){ntags}
//	             | start varint | end varint
//	str       := len uvarint | bytes
//
// The bracketed part is optional: it holds the matchers (point.AppendMatchers)
// of the tombstones that have any, by their index in the tombstone list, and
// is absent when none has, as in every manifest written before matchers
// existed. start == end == 0 means all time.
//
// walStart: WAL files numbered below it are covered by segments. seriesCount:
// the series catalog holds at least this many series (ids 0..seriesCount-1).
// tombApplied: tombstones with a seq at or below it are already applied to
// the segment's data.
//
// These constants are part of the durable format and must not be changed.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/stratadb/strata/internal/point"
)

const (
	manifestMagic   = "SMAN"
	manifestVersion = 1
	manifestName    = "MANIFEST"
)

type manifestSegment struct {
	fileNum     uint64
	level       int
	tombApplied uint64
}

type tombstone struct {
	seq uint64
	sel Selector // Start, End half-open
}

type manifest struct {
	nextFile    uint64
	walStart    uint64
	lastSeq     uint64
	seriesCount uint64
	segments    []manifestSegment
	tombstones  []tombstone
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

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
		b = binary.AppendUvarint(b, t.seq)
		b = appendStr(b, t.sel.Measurement)
		b = appendStr(b, t.sel.Field)
		b = binary.AppendUvarint(b, uint64(len(t.sel.Tags)))
		for _, tag := range t.sel.Tags {
			b = appendStr(b, tag.Key)
			b = appendStr(b, tag.Value)
		}
		b = binary.AppendVarint(b, t.sel.Start)
		b = binary.AppendVarint(b, t.sel.End)
	}
	b = appendTombMatchers(b, m.tombstones)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decoder reads varints and strings from untrusted bytes; the first failure
// sticks and later reads return zero values.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("bad %s at offset %d", what, d.off)
	}
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.off += n
	return v
}

// count reads a element count, bounded by the bytes left (each element takes
// at least min bytes), so a damaged count never drives an allocation.
func (d *decoder) count(what string, min int) int {
	n := d.uvarint(what)
	if d.err == nil && n > uint64((len(d.b)-d.off)/min) {
		d.fail(what)
		return 0
	}
	return int(n)
}

func (d *decoder) str(what string) string {
	n := d.uvarint(what)
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail(what)
		return ""
	}
	s := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return s
}

func unmarshalManifest(path string, b []byte) (*manifest, error) {
	if len(b) < len(manifestMagic)+1+4 || string(b[:4]) != manifestMagic {
		return nil, corruptf(path, 0, "bad magic")
	}
	if b[4] != manifestVersion {
		return nil, corruptf(path, 4, "unsupported version %d", b[4])
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, corruptf(path, int64(len(b)-4), "checksum mismatch")
	}
	d := &decoder{b: body, off: 5}
	m := &manifest{}
	m.nextFile = d.uvarint("next file")
	m.walStart = d.uvarint("wal start")
	m.lastSeq = d.uvarint("last seq")
	m.seriesCount = d.uvarint("series count")
	nseg := d.count("segment count", 3)
	m.segments = make([]manifestSegment, 0, nseg)
	for range nseg {
		s := manifestSegment{fileNum: d.uvarint("file number")}
		lvl := d.uvarint("level")
		if lvl >= maxLevels {
			d.fail("level")
		}
		s.level = int(lvl)
		s.tombApplied = d.uvarint("tomb applied")
		m.segments = append(m.segments, s)
	}
	ntomb := d.count("tombstone count", 6)
	for range ntomb {
		t := tombstone{seq: d.uvarint("tombstone seq")}
		t.sel.Measurement = d.str("measurement")
		t.sel.Field = d.str("field")
		ntags := d.count("tag count", 2)
		for range ntags {
			t.sel.Tags = append(t.sel.Tags, point.Tag{Key: d.str("tag key"), Value: d.str("tag value")})
		}
		t.sel.Start = d.varint("start")
		t.sel.End = d.varint("end")
		m.tombstones = append(m.tombstones, t)
	}
	if d.err == nil && d.off < len(body) {
		d.readTombMatchers(m.tombstones)
	}
	if d.err == nil && d.off != len(body) {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, corruptf(path, int64(d.off), "%v", d.err)
	}
	return m, nil
}

var errNoManifest = errors.New("no manifest")

// appendTombMatchers appends the optional part naming the matchers of the
// tombstones that have any.
func appendTombMatchers(b []byte, tombs []tombstone) []byte {
	n := 0
	for _, t := range tombs {
		if len(t.sel.Matchers) > 0 {
			n++
		}
	}
	if n == 0 {
		return b
	}
	b = binary.AppendUvarint(b, uint64(n))
	for i, t := range tombs {
		if len(t.sel.Matchers) > 0 {
			b = binary.AppendUvarint(b, uint64(i))
			b = point.AppendMatchers(b, t.sel.Matchers)
		}
	}
	return b
}

func (d *decoder) readTombMatchers(tombs []tombstone) {
	n := d.count("matched tombstone count", 2)
	for range n {
		i := d.uvarint("tombstone index")
		if d.err != nil {
			return
		}
		if i >= uint64(len(tombs)) || tombs[i].sel.Matchers != nil {
			d.fail("tombstone index")
			return
		}
		ms, rest, err := point.ReadMatchers(d.b[d.off:])
		if err != nil || len(ms) == 0 {
			d.fail("tombstone matchers")
			return
		}
		d.off = len(d.b) - len(rest)
		tombs[i].sel.Matchers = ms
	}
}
