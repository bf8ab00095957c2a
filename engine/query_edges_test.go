package engine

import (
	"math"
	"slices"
	"testing"
)

// TestEveryClampedBucketEnd checks the first bucket of a query whose
// epoch-aligned start lies below the int64 range (clamped to
// math.MinInt64): it ends where the next aligned bucket starts, for count,
// sum and mean (which fold runs of samples per bucket) as for the
// aggregates that fold sample by sample.
func TestEveryClampedBucketEnd(t *testing.T) {
	const every = 10
	// MinInt64 mod 10 is 2 (flooring), so the bucket holding MinInt64
	// starts 2 below the range and the next one at MinInt64+8.
	next := int64(math.MinInt64 + 8)
	if got := bucketStart(next, every); got != next {
		t.Fatalf("bucketStart(%d) = %d", next, got)
	}
	db := openDB(t, t.TempDir(), quietOptions())
	for _, ts := range []int64{math.MinInt64, math.MinInt64 + 1, next, next + 1, next + 2} {
		mustWrite(t, db, pt("m", nil, "v", Int(1), ts))
	}
	for _, flush := range []bool{false, true} {
		if flush {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		for _, agg := range []Aggregate{AggCount, AggSum, AggFirst} {
			q := Query{Selector: Selector{Measurement: "m", Start: math.MinInt64, End: math.MaxInt64}, Agg: agg, Every: every}
			got := samplesOf(t, mustQuery(t, db, q))
			want := []Sample{{Time: math.MinInt64, Value: Int(2)}, {Time: next, Value: Int(3)}}
			if agg == AggFirst {
				want[0].Value, want[1].Value = Int(1), Int(1)
			}
			if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
				t.Errorf("flushed %v, agg %v: got %v, want %v", flush, agg, got, want)
			}
		}
	}
}

// TestEveryLastBucketEnd checks the buckets at the top of the int64
// range: a bucket that ends exactly at math.MaxInt64 leaves a sample at
// math.MaxInt64 to the next bucket, which starts there.
func TestEveryLastBucketEnd(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	for _, ts := range []int64{math.MaxInt64 - 8, math.MaxInt64 - 1, math.MaxInt64} {
		mustWrite(t, db, pt("m", nil, "v", Int(1), ts))
	}
	for _, flush := range []bool{false, true} {
		if flush {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		// MaxInt64 is a multiple of 1 and of 7: the buckets before the
		// last end at math.MaxInt64 exactly.
		for _, every := range []int64{1, 7} {
			for _, agg := range []Aggregate{AggCount, AggSum, AggFirst} {
				q := Query{Selector: Selector{Measurement: "m"}, Agg: agg, Every: every}
				got := samplesOf(t, mustQuery(t, db, q))
				var want []Sample
				for _, ts := range []int64{math.MaxInt64 - 8, math.MaxInt64 - 1, math.MaxInt64} {
					b := bucketStart(ts, every)
					if n := len(want); n > 0 && want[n-1].Time == b {
						if agg != AggFirst {
							want[n-1].Value = Int(want[n-1].Value.Int() + 1)
						}
						continue
					}
					want = append(want, Sample{Time: b, Value: Int(1)})
				}
				if !slices.Equal(got, want) {
					t.Errorf("flushed %v, every %d, agg %v: got %v, want %v", flush, every, agg, got, want)
				}
			}
		}
	}
}
