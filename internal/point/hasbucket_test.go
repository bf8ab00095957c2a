package point

import (
	"math"
	"testing"
)

// HasBucket is exactly where FloorTime's start does not exceed the time.
func TestHasBucket(t *testing.T) {
	for _, every := range []int64{1, 7, 10, 1e9, 3600e9, math.MaxInt64} {
		for _, tt := range []int64{math.MinInt64, math.MinInt64 + 1, math.MinInt64 + 7, math.MinInt64 + 8, math.MinInt64 + 9, math.MinInt64 + 1e9, -1, 0, 1, math.MaxInt64} {
			if got, want := HasBucket(tt, every), FloorTime(tt, every) <= tt; got != want {
				t.Errorf("HasBucket(%d, %d) = %v, want %v (FloorTime %d)", tt, every, got, want, FloorTime(tt, every))
			}
		}
	}
}
