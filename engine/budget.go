package engine

// The disk budget (Options.MaxDiskBytes). When the database's files (its
// segments, WAL and series catalog) pass the budget, compaction picks a time
// floor below which it drops every sample of every series, so that what is
// left fits in 90% of the budget: the gateway keeps its newest data and
// never fills its disk. The floor is the expiry floor of readview.go: it
// is raised in the manifest edit of the compaction that applies it, so it is
// durable, hides the dropped range from every read path at once, and never
// lets an older overwritten value show again. The floor is estimated from
// the segments' sizes and time ranges, taking each segment's bytes as spread
// evenly over its time span; when the estimate falls short, the next
// compaction finds the files still over the budget and raises it again.

import (
	"math"
)

// budgetTarget is the share of MaxDiskBytes that a budget drop aims for.
const budgetTarget = 0.9

// budgetPeak is the share of MaxDiskBytes that a compaction's outputs,
// written beside its inputs, may take the files to.
const budgetPeak = 1.05

// budgetFloor returns the time floor that brings v's files under 90% of
// MaxDiskBytes, or math.MinInt64 when they are within the budget (or no
// budget is set). reserve is the bytes of the inputs of the compaction
// about to run, whose outputs sit beside them until it ends: when they
// would take the files past budgetPeak, the floor also leaves room for
// them (the inputs shrink with the data the floor drops). The floor never
// passes the newest segment sample: the newest data stays.
func (db *DB) budgetFloor(v *version, reserve int64) int64 {
	limit := db.opts.MaxDiskBytes
	if limit <= 0 {
		return math.MinInt64
	}
	type span struct {
		min, max int64
		size     int64
	}
	var spans []span
	var segBytes int64
	oldest, newest := int64(math.MaxInt64), int64(math.MinInt64)
	for _, level := range v.Levels {
		for _, h := range level {
			segBytes += h.Meta.Size
			if h.Meta.MinTime > h.Meta.MaxTime {
				continue // no samples
			}
			spans = append(spans, span{h.Meta.MinTime, h.Meta.MaxTime, h.Meta.Size})
			oldest, newest = min(oldest, h.Meta.MinTime), max(newest, h.Meta.MaxTime)
		}
	}
	other := db.wal.Size()
	other += db.catalogFileSize()
	over := segBytes+other > limit
	peak := float64(segBytes+other+reserve) > float64(limit)*budgetPeak
	if !over && !peak || len(spans) == 0 || segBytes == 0 {
		return math.MinInt64
	}
	budget := float64(limit)*budgetTarget - float64(other)
	if peak {
		r := float64(reserve) / float64(segBytes)
		budget = min(budget, (float64(limit)*budgetPeak-float64(other))/(1+r))
	}
	// kept estimates the segment bytes of the samples at or after t.
	kept := func(t int64) float64 {
		var n float64
		for _, s := range spans {
			switch {
			case t <= s.min:
				n += float64(s.size)
			case t <= s.max:
				n += float64(s.size) * (float64(s.max) - float64(t) + 1) / (float64(s.max) - float64(s.min) + 1)
			}
		}
		return n
	}
	// The smallest t in [oldest, newest] whose kept bytes fit; kept only
	// falls as t grows.
	lo, hi := oldest, newest
	for lo < hi {
		mid := int64(uint64(lo) + (uint64(hi)-uint64(lo))/2)
		if kept(mid) <= budget {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}
