package point

// Selector and Matcher helpers shared by the engine and the durable
// encoding of tombstones (wal.Delete). The MatchOp values are part of that
// durable format and must not be changed.

import (
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
