package wal

// Payloads of the logical records the engine logs. The WAL framing (wal.go)
// carries them opaquely; the record type says which codec reads the payload.
// A change of encoding gets a new record type, so old logs stay readable.
//
// Notation: uvarint is encoding/binary's unsigned varint; varint is its
// zigzag signed varint; str is a uvarint length followed by that many bytes.
//
// RecordBatch payload (Batch):
//
//	+-------------+-------------+----------------+-------------+-----------------+
//	| seq         | nSeries     | series def     | nEntries    | entry           |
//	| uvarint     | uvarint     | x nSeries      | uvarint     | x nEntries      |
//	+-------------+-------------+----------------+-------------+-----------------+
//
//	series def:  +------------+--------+-------------+
//	             | id uvarint | kind 1B| key str     |
//	             +------------+--------+-------------+
//
//	entry:       +------------+--------+--------------+-----------------+
//	             | id uvarint | kind 1B| dtime varint | value           |
//	             +------------+--------+--------------+-----------------+
//
//	kind    point.Kind: 1 float, 2 int, 3 uint, 4 bool, 5 string
//	dtime   the entry's time minus the previous entry's (0 before the first),
//	        in wrapping two's-complement arithmetic, so any pair of int64
//	        times round-trips
//	value   float:  8 bytes, IEEE-754 bits, little-endian
//	        int:    varint
//	        uint:   uvarint
//	        bool:   1 byte, 0 or 1
//	        string: str
//
// RecordDelete payload (Delete):
//
//	+---------+-------------+-------+---------+---------------------+--------+--------+-----------+-------------------+
//	| seq     | measurement | field | nTags   | tag x nTags         | start  | end    | nMatchers | matcher x nMatch. |
//	| uvarint | str         | str   | uvarint | key str, value str  | varint | varint | uvarint   |                   |
//	+---------+-------------+-------+---------+---------------------+--------+--------+-----------+-------------------+
//
//	matcher:     +---------+-------+-----------+
//	             | key str | op 1B | value str |
//	             +---------+-------+-----------+
//
//	start == end == 0 means all time. op is a point.MatchOp: 0 =, 1 !=,
//	2 =~, 3 !~. A record that ends after end (every record written before
//	matchers existed) has no matchers. The manifest stores its tombstones in
//	this encoding too.

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/decbuf"
	"github.com/stratadb/strata/internal/point"
)

// Record types. These constants are part of the durable format (drawn
// above) and must not be changed.
const (
	RecordBatch  byte = 1 // payload: Batch
	RecordDelete byte = 2 // payload: Delete
)

// SeriesDef defines a series first created by the batch that carries it:
// later entries refer to it by ID.
type SeriesDef struct {
	ID   uint64
	Kind point.Kind
	Key  []byte // canonical series key (point.AppendSeriesKey)
}

// Batch is the payload of a RecordBatch: the entries of one engine Write,
// with the definitions of the series it created.
type Batch struct {
	Seq     uint64
	Series  []SeriesDef
	Entries []point.Entry
}

// Marshal appends the encoding of b to dst and returns the result. It does
// not allocate when dst has room. Every kind in b must be valid (the engine
// validates points before logging them): an invalid kind panics rather than
// write a record that replay would reject.
func (b *Batch) Marshal(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, b.Seq)
	dst = binary.AppendUvarint(dst, uint64(len(b.Series)))
	for i := range b.Series {
		s := &b.Series[i]
		if !s.Kind.Valid() {
			panic(fmt.Sprintf("wal: series %d has invalid kind %d", s.ID, s.Kind))
		}
		dst = binary.AppendUvarint(dst, s.ID)
		dst = append(dst, byte(s.Kind))
		dst = binary.AppendUvarint(dst, uint64(len(s.Key)))
		dst = append(dst, s.Key...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(b.Entries)))
	var prev int64
	for i := range b.Entries {
		e := &b.Entries[i]
		k := e.Value.Kind()
		dst = binary.AppendUvarint(dst, e.ID)
		dst = append(dst, byte(k))
		dst = binary.AppendVarint(dst, e.Time-prev) // wraps; so does decoding
		prev = e.Time
		switch k {
		case point.KindFloat:
			dst = binary.LittleEndian.AppendUint64(dst, e.Value.Bits())
		case point.KindInt:
			dst = binary.AppendVarint(dst, int64(e.Value.Bits()))
		case point.KindUint:
			dst = binary.AppendUvarint(dst, e.Value.Bits())
		case point.KindBool:
			dst = append(dst, byte(e.Value.Bits()&1))
		case point.KindString:
			s := e.Value.Str()
			dst = binary.AppendUvarint(dst, uint64(len(s)))
			dst = append(dst, s...)
		default:
			panic(fmt.Sprintf("wal: entry %d has invalid kind %d", i, k))
		}
	}
	return dst
}

// Smallest encodings, used to reject counts the remaining input cannot hold
// before anything is allocated for them.
const (
	minSeriesDefBytes = 3 // id, kind, key length
	minEntryBytes     = 4 // id, kind, dtime, a 1-byte value
	minTagBytes       = 2 // key length, value length
	minMatcherBytes   = 3 // key length, op, value length
)

// corrupt wraps a decoding failure of a what payload in base.ErrCorrupt.
func corrupt(what string, err error) error {
	return fmt.Errorf("wal: decode %s: %w: %w", what, base.ErrCorrupt, err)
}

// Unmarshal decodes src, the whole payload of a RecordBatch, into b. It
// reuses b's slices (reset to length 0). Each SeriesDef.Key aliases src:
// copy it to keep it past src's lifetime (during ReplayDir, past the callback).
// String values are copied. Malformed input (truncated, an unknown kind, a
// bool other than 0 or 1, a count larger than the remaining bytes could
// hold, trailing bytes) is an error wrapping base.ErrCorrupt; it never
// panics, and allocation is bounded by a small multiple of len(src).
func (b *Batch) Unmarshal(src []byte) error {
	b.Seq, b.Series, b.Entries = 0, b.Series[:0], b.Entries[:0]
	d := decbuf.New(src)
	b.Seq = d.Uvarint("sequence number")
	ns := d.Count("series count", minSeriesDefBytes)
	b.Series = slices.Grow(b.Series, ns)
	for i := range ns {
		id := d.Uvarint("series id")
		kind := point.Kind(d.Byte("series kind"))
		key := d.UvarintBytes("series key")
		if d.Err() != nil {
			break
		}
		if !kind.Valid() {
			d.Failf("series %d: unknown kind %d", i, kind)
			break
		}
		b.Series = append(b.Series, SeriesDef{ID: id, Kind: kind, Key: key})
	}
	ne := d.Count("entry count", minEntryBytes)
	b.Entries = slices.Grow(b.Entries, ne)
	var prev int64
	for i := range ne {
		id := d.Uvarint("entry id")
		kind := point.Kind(d.Byte("entry kind"))
		t := prev + d.Varint("entry time") // wrapping, the inverse of Marshal's subtraction
		prev = t
		var v point.Value
		switch kind {
		case point.KindFloat:
			v = point.FromBits(kind, d.Uint64("float"))
		case point.KindInt:
			v = point.FromBits(kind, uint64(d.Varint("int")))
		case point.KindUint:
			v = point.FromBits(kind, d.Uvarint("uint"))
		case point.KindBool:
			x := d.Byte("bool")
			if x > 1 {
				d.Failf("entry %d: bad bool %d", i, x)
			}
			v = point.FromBits(kind, uint64(x))
		case point.KindString:
			v = point.String(d.UvarintStr("string"))
		default:
			d.Failf("entry %d: unknown kind %d", i, kind)
		}
		if d.Err() != nil {
			break
		}
		b.Entries = append(b.Entries, point.Entry{ID: id, Time: t, Value: v})
	}
	d.End("batch")
	if err := d.Err(); err != nil {
		return corrupt("batch", err)
	}
	return nil
}

// Delete is the payload of a RecordDelete: a tombstone for the samples that
// Selector picks, written before sequence number Seq. The manifest stores
// its live tombstones in the same encoding (Marshal and Decode).
type Delete struct {
	Seq      uint64
	Selector point.Selector
}

// Marshal appends the encoding of d to dst and returns the result.
func (d *Delete) Marshal(dst []byte) []byte {
	s := &d.Selector
	dst = binary.AppendUvarint(dst, d.Seq)
	dst = appendStr(dst, s.Measurement)
	dst = appendStr(dst, s.Field)
	dst = binary.AppendUvarint(dst, uint64(len(s.Tags)))
	for _, t := range s.Tags {
		dst = appendStr(dst, t.Key)
		dst = appendStr(dst, t.Value)
	}
	dst = binary.AppendVarint(dst, s.Start)
	dst = binary.AppendVarint(dst, s.End)
	dst = binary.AppendUvarint(dst, uint64(len(s.Matchers)))
	for _, m := range s.Matchers {
		dst = appendStr(dst, m.Key)
		dst = append(dst, byte(m.Op))
		dst = appendStr(dst, m.Value)
	}
	return dst
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// Decode reads one encoded Delete from buf into d, reusing d.Selector.Tags.
// Strings are copied. A failure sticks in buf (see package decbuf).
func (d *Delete) Decode(buf *decbuf.Decbuf) {
	d.DecodeLegacy(buf)
	d.decodeMatchers(buf)
}

// DecodeLegacy reads one Delete encoded before matchers existed: the
// encoding of Decode without its matcher part (version 1 manifests).
func (d *Delete) DecodeLegacy(buf *decbuf.Decbuf) {
	tags := d.Selector.Tags[:0]
	*d = Delete{}
	s := &d.Selector
	d.Seq = buf.Uvarint("sequence number")
	s.Measurement = buf.UvarintStr("measurement")
	s.Field = buf.UvarintStr("field")
	nt := buf.Count("tag count", minTagBytes)
	tags = slices.Grow(tags, nt)
	for range nt {
		t := point.Tag{Key: buf.UvarintStr("tag key"), Value: buf.UvarintStr("tag value")}
		if buf.Err() != nil {
			break
		}
		tags = append(tags, t)
	}
	s.Tags = tags
	s.Start = buf.Varint("start")
	s.End = buf.Varint("end")
}

func (d *Delete) decodeMatchers(buf *decbuf.Decbuf) {
	n := buf.Count("matcher count", minMatcherBytes)
	if n == 0 {
		return
	}
	ms := make([]point.Matcher, 0, n)
	for range n {
		m := point.Matcher{Key: buf.UvarintStr("matcher key")}
		op := point.MatchOp(buf.Byte("matcher op"))
		m.Value = buf.UvarintStr("matcher value")
		if buf.Err() != nil {
			return
		}
		if !op.Valid() {
			buf.Failf("unknown matcher op %d", op)
			return
		}
		m.Op = op
		ms = append(ms, m)
	}
	d.Selector.Matchers = ms
}

// Unmarshal decodes src, the whole payload of a RecordDelete, into d,
// reusing d.Selector.Tags. Strings are copied. A payload that ends before
// the matcher part (written before matchers existed) has none. Malformed
// input is an error wrapping base.ErrCorrupt.
func (d *Delete) Unmarshal(src []byte) error {
	buf := decbuf.New(src)
	d.DecodeLegacy(&buf)
	if buf.Err() == nil && buf.Len() > 0 {
		d.decodeMatchers(&buf)
	}
	buf.End("delete")
	if err := buf.Err(); err != nil {
		return corrupt("delete", err)
	}
	return nil
}
