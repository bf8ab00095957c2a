package engine

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/segment"
)

// RollupLevelStats describes the rollup buckets of one Every that a DB's
// segments hold (Stats.RollupLevels).
type RollupLevelStats struct {
	Every   time.Duration
	Buckets int64 // buckets of this Every, over every series
	// End is the end of the newest bucket of this Every, in Unix ns, over
	// every series: the data of a series after its own newest bucket is
	// finer (raw samples, or buckets of a finer rule). While compaction
	// keeps up, this is where the raw data (for the finest Every) or the
	// next finer level starts.
	End int64
}

// rollupExtents caches, per segment file, the rollup levels it holds:
// segments are immutable, so each is read once (its index, not its
// blocks) and Stats stays cheap.
type rollupExtents struct {
	mu    sync.Mutex
	bySeg map[uint64][]RollupLevelStats
}

// levels returns the rollup levels of the segments of v, by Every, and
// forgets segments no longer in v.
func (e *rollupExtents) levels(v *version) []RollupLevelStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.bySeg == nil {
		e.bySeg = make(map[uint64][]RollupLevelStats)
	}
	live := make(map[uint64]bool)
	var out []RollupLevelStats
	for _, level := range v.Levels {
		for _, h := range level {
			live[h.FileNum] = true
			ls, ok := e.bySeg[h.FileNum]
			if !ok {
				if ls, ok = segRollupLevels(h.Reader); ok {
					e.bySeg[h.FileNum] = ls
				}
			}
			for _, l := range ls {
				out = addRollupLevel(out, l)
			}
		}
	}
	for num := range e.bySeg {
		if !live[num] {
			delete(e.bySeg, num)
		}
	}
	return out
}

// segRollupLevels reads the rollup levels of one segment from its index,
// streamed when it is not loaded. ok is false when the index cannot be
// read: a read of the segment reports why.
func segRollupLevels(r *segment.Reader) (out []RollupLevelStats, ok bool) {
	it, err := r.Entries()
	if err != nil {
		return nil, false
	}
	defer it.Close()
	var si segment.SeriesIndex
	for {
		more, err := it.Next(&si)
		if err != nil {
			return nil, false
		}
		if !more {
			return out, true
		}
		for _, rm := range si.Rollups {
			// MaxTime is the latest sample of the block's buckets: its
			// bucket is the block's last.
			end := addSat(point.FloorTime(rm.MaxTime, rm.Every), rm.Every)
			out = addRollupLevel(out, RollupLevelStats{Every: time.Duration(rm.Every), Buckets: int64(rm.Count), End: end})
		}
	}
}

// addRollupLevel adds l to ls, sorted by Every.
func addRollupLevel(ls []RollupLevelStats, l RollupLevelStats) []RollupLevelStats {
	i, found := slices.BinarySearchFunc(ls, l.Every, func(a RollupLevelStats, e time.Duration) int { return cmp.Compare(a.Every, e) })
	if !found {
		return slices.Insert(ls, i, l)
	}
	ls[i].Buckets += l.Buckets
	ls[i].End = max(ls[i].End, l.End)
	return ls
}
