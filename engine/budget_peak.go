package engine

import (
	"math"

	"github.com/stratadb/strata/compaction"
)

// budgetMergePeak is the share of MaxDiskBytes that the files and a
// merge's outputs may take: the rest of the way to 1.1x is left to what
// flushes and the WAL add while the merge runs.
const budgetMergePeak = 1.0

// budgetHardPeak is the share of MaxDiskBytes that the files may reach
// while a compaction's outputs sit beside its inputs, when staying within
// budgetMergePeak would take dropping every sample but the newest.
const budgetHardPeak = 1.05

// budgetMergeFloor returns a time floor, at or above floor, under which a
// merge of inputs must drop its samples so that its outputs, written
// beside every file of v until the merge's edit removes its inputs, keep
// the files within budgetMergePeak of MaxDiskBytes (budgetHardPeak when
// that is out of reach). The outputs are estimated from the inputs' sizes,
// each input's bytes taken as spread evenly over its time span. The floor
// never passes the newest segment sample.
func (db *DB) budgetMergeFloor(v *version, inputs []compaction.SegmentInfo, floor int64) int64 {
	limit := db.opts.MaxDiskBytes
	if limit <= 0 || len(inputs) == 0 {
		return floor
	}
	var files int64
	newest := int64(math.MinInt64)
	for _, level := range v.Levels {
		for _, h := range level {
			files += h.Meta.Size
			if h.Meta.Samples > 0 {
				newest = max(newest, h.Meta.MaxTime)
			}
		}
	}
	files += db.wal.Size()
	files += db.catalogFileSize()
	out := func(t int64) float64 {
		var n float64
		for _, s := range inputs {
			switch {
			case s.MinTime > s.MaxTime || t <= s.MinTime:
				n += float64(s.Size)
			case t <= s.MaxTime:
				n += float64(s.Size) * (float64(s.MaxTime) - float64(t) + 1) / (float64(s.MaxTime) - float64(s.MinTime) + 1)
			}
		}
		return n
	}
	room := float64(limit)*budgetMergePeak - float64(files)
	if out(floor) <= room || newest <= floor {
		return floor
	}
	if out(newest) > room {
		room = float64(limit)*budgetHardPeak - float64(files)
		if out(newest) > room {
			return floor // nothing but dropping the newest data helps
		}
	}
	// The smallest t in [floor, newest] whose outputs fit: out only falls
	// as t grows.
	lo, hi := floor, newest
	for lo < hi {
		mid := int64(uint64(lo) + (uint64(hi)-uint64(lo))/2)
		if out(mid) <= room {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}
