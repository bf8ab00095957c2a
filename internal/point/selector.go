package point

// Selector and Matcher helpers shared by the engine and the durable
// encodings of tombstones (WAL delete records and the manifest).
//
// Matcher encoding, the optional trailing part of a tombstone's selector:
//
//	matchers := count uvarint | matcher{count}
//	matcher  := key str | op (1) | value str
//	str      := len uvarint | bytes
//
// A selector written before matchers existed simply has no trailing part,
// and decodes with no matchers. op is a MatchOp; the values are part of the
// durable format and must not be changed.

import (
	"encoding/binary"
	"errors"
	"math"
)

// AllTime reports whether s selects all time: Start == End == 0.
func (s *Selector) AllTime() bool { return s.Start == 0 && s.End == 0 }

// TimeRange returns the inclusive bounds [mint, maxt] of s's time range:
// [Start, End-1], or every int64 (math.MaxInt64 included) for all time. An
// empty range has mint > maxt.
func (s *Selector) TimeRange() (mint, maxt int64) {
	if s.AllTime() {
		return math.MinInt64, math.MaxInt64
	}
	if s.End == math.MinInt64 {
		return 0, -1 // empty; End-1 would wrap
	}
	return s.Start, s.End - 1
}

// Covers reports whether time t lies in s's time range.
func (s *Selector) Covers(t int64) bool {
	mint, maxt := s.TimeRange()
	return t >= mint && t <= maxt
}

// Valid reports whether op is one of the four match operators.
func (op MatchOp) Valid() bool { return op <= MatchNotRegexp }

// minMatcherBytes is the smallest encoded matcher: two empty strs and op.
const minMatcherBytes = 3

// AppendMatchers appends the encoding of ms to dst and returns the result.
func AppendMatchers(dst []byte, ms []Matcher) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ms)))
	for _, m := range ms {
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

var errBadMatchers = errors.New("bad matchers")

// ReadMatchers decodes matchers encoded by AppendMatchers from the start of
// src and returns them (strings copied; nil when there are none) and the
// rest of src. Malformed input (truncated, an unknown op, a count larger
// than src could hold) is an error; allocation is bounded by len(src).
func ReadMatchers(src []byte) ([]Matcher, []byte, error) {
	n, k := binary.Uvarint(src)
	if k <= 0 {
		return nil, nil, errBadMatchers
	}
	src = src[k:]
	if n > uint64(len(src)/minMatcherBytes) {
		return nil, nil, errBadMatchers
	}
	if n == 0 {
		return nil, src, nil
	}
	ms := make([]Matcher, 0, n)
	for range n {
		var m Matcher
		var ok bool
		if m.Key, src, ok = readStr(src); !ok || len(src) == 0 {
			return nil, nil, errBadMatchers
		}
		m.Op = MatchOp(src[0])
		if !m.Op.Valid() {
			return nil, nil, errBadMatchers
		}
		if m.Value, src, ok = readStr(src[1:]); !ok {
			return nil, nil, errBadMatchers
		}
		ms = append(ms, m)
	}
	return ms, src, nil
}

func readStr(src []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(src)
	if k <= 0 || n > uint64(len(src)-k) {
		return "", nil, false
	}
	src = src[k:]
	return string(src[:n]), src[n:], true
}
