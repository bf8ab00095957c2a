package point

import "math"

// FloorTime returns the multiple of every (> 0) at or below t, epoch
// aligned, clamped to the lowest multiple int64 holds: the start of the
// Every-wide bucket holding t.
func FloorTime(t, every int64) int64 {
	m := t % every
	if m < 0 {
		m += every
	}
	if t < math.MinInt64+m {
		return math.MinInt64 / every * every
	}
	return t - m
}

// HasBucket reports whether the Every-wide bucket of t starts within int64:
// a time less than every after math.MinInt64 may lie below the lowest
// multiple of every, where FloorTime clamps the start above t.
func HasBucket(t, every int64) bool { return t >= math.MinInt64/every*every }
