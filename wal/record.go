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
//	+---------+-------------+-------+---------+---------------------+--------+--------+------------+
//	| seq     | measurement | field | nTags   | tag x nTags         | start  | end    | [matchers] |
//	| uvarint | str         | str   | uvarint | key str, value str  | varint | varint | optional   |
//	+---------+-------------+-------+---------+---------------------+--------+--------+------------+
//
//	start == end == 0 means all time. matchers (point.AppendMatchers) is
//	present only when the selector has matchers; a record without it (as
//	every record written before matchers existed) has none.

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/stratadb/strata/internal/base"
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
)

func corruptf(what, format string, args ...any) error {
	return fmt.Errorf("wal: decode %s: %s: %w", what, fmt.Sprintf(format, args...), base.ErrCorrupt)
}

// Unmarshal decodes src, the whole payload of a RecordBatch, into b. It
// reuses b's slices (reset to length 0). Each SeriesDef.Key aliases src:
// copy it to keep it past src's lifetime (during Replay, past the callback).
// String values are copied. Malformed input (truncated, an unknown kind, a
// bool other than 0 or 1, a count larger than the remaining bytes could
// hold, trailing bytes) is an error wrapping base.ErrCorrupt; it never
// panics, and allocation is bounded by a small multiple of len(src).
func (b *Batch) Unmarshal(src []byte) error {
	b.Seq, b.Series, b.Entries = 0, b.Series[:0], b.Entries[:0]
	seq, n := binary.Uvarint(src)
	if n <= 0 {
		return corruptf("batch", "bad sequence number")
	}
	src = src[n:]
	b.Seq = seq

	ns, n := binary.Uvarint(src)
	if n <= 0 {
		return corruptf("batch", "bad series count")
	}
	src = src[n:]
	if ns > uint64(len(src)/minSeriesDefBytes) {
		return corruptf("batch", "%d series cannot fit in %d bytes", ns, len(src))
	}
	b.Series = slices.Grow(b.Series, int(ns))
	for i := range int(ns) {
		id, n := binary.Uvarint(src)
		if n <= 0 || n >= len(src) {
			return corruptf("batch", "series %d: truncated", i)
		}
		kind := point.Kind(src[n])
		if !kind.Valid() {
			return corruptf("batch", "series %d: unknown kind %d", i, kind)
		}
		src = src[n+1:]
		klen, n := binary.Uvarint(src)
		if n <= 0 || klen > uint64(len(src)-n) {
			return corruptf("batch", "series %d: truncated key", i)
		}
		src = src[n:]
		b.Series = append(b.Series, SeriesDef{ID: id, Kind: kind, Key: src[:klen:klen]})
		src = src[klen:]
	}

	ne, n := binary.Uvarint(src)
	if n <= 0 {
		return corruptf("batch", "bad entry count")
	}
	src = src[n:]
	if ne > uint64(len(src)/minEntryBytes) {
		return corruptf("batch", "%d entries cannot fit in %d bytes", ne, len(src))
	}
	b.Entries = slices.Grow(b.Entries, int(ne))
	var prev int64
	for i := range int(ne) {
		id, n := binary.Uvarint(src)
		if n <= 0 || n >= len(src) {
			return corruptf("batch", "entry %d: truncated", i)
		}
		kind := point.Kind(src[n])
		src = src[n+1:]
		dt, n := binary.Varint(src)
		if n <= 0 {
			return corruptf("batch", "entry %d: bad time", i)
		}
		src = src[n:]
		t := prev + dt // wrapping, the inverse of Marshal's subtraction
		prev = t
		var v point.Value
		switch kind {
		case point.KindFloat:
			if len(src) < 8 {
				return corruptf("batch", "entry %d: truncated float", i)
			}
			v = point.FromBits(kind, binary.LittleEndian.Uint64(src))
			src = src[8:]
		case point.KindInt:
			x, n := binary.Varint(src)
			if n <= 0 {
				return corruptf("batch", "entry %d: bad int", i)
			}
			v = point.FromBits(kind, uint64(x))
			src = src[n:]
		case point.KindUint:
			x, n := binary.Uvarint(src)
			if n <= 0 {
				return corruptf("batch", "entry %d: bad uint", i)
			}
			v = point.FromBits(kind, x)
			src = src[n:]
		case point.KindBool:
			if len(src) < 1 || src[0] > 1 {
				return corruptf("batch", "entry %d: bad bool", i)
			}
			v = point.FromBits(kind, uint64(src[0]))
			src = src[1:]
		case point.KindString:
			slen, n := binary.Uvarint(src)
			if n <= 0 || slen > uint64(len(src)-n) {
				return corruptf("batch", "entry %d: truncated string", i)
			}
			src = src[n:]
			v = point.String(string(src[:slen]))
			src = src[slen:]
		default:
			return corruptf("batch", "entry %d: unknown kind %d", i, kind)
		}
		b.Entries = append(b.Entries, point.Entry{ID: id, Time: t, Value: v})
	}
	if len(src) != 0 {
		return corruptf("batch", "%d trailing bytes", len(src))
	}
	return nil
}

// Delete is the payload of a RecordDelete: a tombstone for the samples that
// Selector picks, written before sequence number Seq.
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
	if len(s.Matchers) > 0 {
		dst = point.AppendMatchers(dst, s.Matchers)
	}
	return dst
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// readStr decodes a str from src and returns it (copied) and the rest.
func readStr(src []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(src)
	if k <= 0 || n > uint64(len(src)-k) {
		return "", nil, false
	}
	src = src[k:]
	return string(src[:n]), src[n:], true
}

// Unmarshal decodes src, the whole payload of a RecordDelete, into d,
// reusing d.Selector.Tags (Matchers are freshly allocated). Strings are
// copied. Malformed input is an error
// wrapping base.ErrCorrupt.
func (d *Delete) Unmarshal(src []byte) error {
	s := &d.Selector
	tags := s.Tags[:0]
	*d = Delete{}
	seq, n := binary.Uvarint(src)
	if n <= 0 {
		return corruptf("delete", "bad sequence number")
	}
	d.Seq = seq
	src = src[n:]
	var ok bool
	if s.Measurement, src, ok = readStr(src); !ok {
		return corruptf("delete", "truncated measurement")
	}
	if s.Field, src, ok = readStr(src); !ok {
		return corruptf("delete", "truncated field")
	}
	nt, n := binary.Uvarint(src)
	if n <= 0 {
		return corruptf("delete", "bad tag count")
	}
	src = src[n:]
	if nt > uint64(len(src)/minTagBytes) {
		return corruptf("delete", "%d tags cannot fit in %d bytes", nt, len(src))
	}
	tags = slices.Grow(tags, int(nt))
	for i := range int(nt) {
		var t point.Tag
		if t.Key, src, ok = readStr(src); !ok {
			return corruptf("delete", "tag %d: truncated key", i)
		}
		if t.Value, src, ok = readStr(src); !ok {
			return corruptf("delete", "tag %d: truncated value", i)
		}
		tags = append(tags, t)
	}
	s.Tags = tags
	if s.Start, n = binary.Varint(src); n <= 0 {
		return corruptf("delete", "bad start")
	}
	src = src[n:]
	if s.End, n = binary.Varint(src); n <= 0 {
		return corruptf("delete", "bad end")
	}
	src = src[n:]
	if len(src) > 0 {
		ms, rest, err := point.ReadMatchers(src)
		if err != nil || len(ms) == 0 {
			return corruptf("delete", "bad matchers")
		}
		if len(rest) != 0 {
			return corruptf("delete", "%d trailing bytes", len(rest))
		}
		s.Matchers = ms
	}
	return nil
}
