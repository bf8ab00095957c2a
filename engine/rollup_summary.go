package engine

import (
	"fmt"

	"github.com/stratadb/strata/segment"
)

// summaryUsable reports whether rollup block rm may be folded from its
// summary, as its buckets one by one would be: it has one, all of it lies
// in [mint, maxt] and in one query bucket, and no tombstone above applied
// meets its span. Other sources need no check: buckets fold beside raw
// samples, never merged with them.
func summaryUsable(rm *segment.RollupMeta, tombs []tombstone, applied uint64, mint, maxt int64, b bucketer) bool {
	return rm.Summary != nil && b.bucket(rm.MinTime) == b.bucket(rm.MaxTime) && wholeBlock(rm, tombs, applied, mint, maxt)
}

// usableHours returns the hour summaries of rollup block b of segment
// source s when they may fold the block as its buckets one by one would:
// it has them, all of it lies in [mint, maxt], no tombstone above what s
// applied meets its span, and each hour lies in one query bucket.
func (r *seriesReader) usableHours(s source, b int, tombs []tombstone, mint, maxt int64, bk bucketer) ([]segment.RollupMeta, bool, error) {
	rm := &s.idx.Rollups[b]
	if rm.HoursLength == 0 || !wholeBlock(rm, tombs, s.tombApplied, mint, maxt) {
		return nil, false, nil
	}
	hours, ok, err := s.seg.Reader.ReadRollupHours(s.idx, b, r.hoursBuf[:0])
	r.hoursBuf = hours
	if err != nil || !ok {
		return nil, false, err
	}
	for i := range hours {
		if bk.bucket(hours[i].MinTime) != bk.bucket(hours[i].MaxTime) {
			return nil, false, nil
		}
	}
	return hours, true, nil
}

// wholeBlock reports whether all of rollup block rm lies in [mint, maxt]
// and no tombstone above applied meets its span.
func wholeBlock(rm *segment.RollupMeta, tombs []tombstone, applied uint64, mint, maxt int64) bool {
	if rm.MinTime < mint || rm.MaxTime > maxt {
		return false
	}
	for i := range tombs {
		if tombs[i].seq <= applied {
			continue
		}
		if lo, hi := tombs[i].sel.TimeRange(); lo <= rm.MaxTime && hi >= rm.MinTime {
			return false
		}
	}
	return true
}

// addSummary folds a whole rollup block from its summary, as addRollup
// folds its buckets.
func (a *acc) addSummary(rm *segment.RollupMeta) error {
	s := rm.Summary
	if a.count == 0 || s.FirstT < a.firstT {
		a.first, a.firstT = s.First, s.FirstT
	}
	if a.count == 0 || rm.MaxTime > a.lastT {
		a.last, a.lastT = s.Last, rm.MaxTime
	}
	a.count += s.Count
	k := s.Last.Kind()
	a.kinds |= kindBit(k)
	switch k {
	case KindFloat:
		if _, err := a.sumF.MergeBinary(s.SumF); err != nil {
			return fmt.Errorf("engine: rollup summary sum: %w", err)
		}
	default:
		a.sumI.add(int128{hi: s.SumI.Hi, lo: s.SumI.Lo})
	}
	a.minMax(s.Min, s.MinT, s.Max, s.MaxT)
	return nil
}
