package engine

// Reading rollups (rollup.go). A rolled-up bucket stands for its samples:
//
//   - Aggregates fold the bucket's statistics into the query bucket of the
//     bucket's start, when that start lies in the query range (the whole
//     bucket counts, even if its end passes the range's end). With a query
//     Every that is a multiple of the bucket's (or 0) the answer is the one
//     the raw samples gave; with another Every, the bucket counts whole in
//     the query bucket of its start.
//   - Raw reads return the bucket's last sample, at its own time, when that
//     time lies in the range.
//   - A retention cutoff or the expiry floor hides (and compaction drops)
//     the buckets whose start is below it, in raw reads and Last too, even
//     when their last sample is above it: a bucket goes whole.
//   - A delete hides (and compaction drops) the buckets whose start it
//     covers.

import (
	"math"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/segment"
)

// rollupsIn reports whether a segment source holds buckets that may lie
// in [mint, maxt].
func rollupsIn(srcs []source, mint, maxt int64) bool {
	for _, s := range srcs {
		if s.idx == nil {
			continue
		}
		for i := range s.idx.Rollups {
			if rm := &s.idx.Rollups[i]; rm.MinTime <= maxt && rm.MaxTime >= mint {
				return true
			}
		}
	}
	return false
}

// bucketsOf appends the buckets of segment source s whose start (with
// byLast, whose last sample) lies in [lo, hi] and that no tombstone above
// what s applied deletes. With byLast, floor is the series' oldest visible
// time (its retention cutoff or the expiry floor): a bucket starting below
// it is gone, whatever the time of its last sample, as compaction drops it.
func (r *seriesReader) bucketsOf(s source, tombs []tombstone, lo, hi, floor int64, byLast bool, dst []segment.Rollup) ([]segment.Rollup, error) {
	for b := range s.idx.Rollups {
		rm := &s.idx.Rollups[b]
		if rm.MaxTime < lo || rm.MinTime > hi {
			continue
		}
		if err := r.ctx.Err(); err != nil {
			return dst, err
		}
		start := len(dst)
		var err error
		if dst, err = s.seg.r.ReadRollups(s.idx, b, dst); err != nil {
			return dst[:start], err
		}
		kept := dst[:start]
		for _, ru := range dst[start:] {
			t := ru.Start
			if byLast {
				t = ru.LastT
			}
			if t < lo || t > hi || ru.Start < floor || bucketDeleted(&ru, tombs, s.tombApplied) {
				continue
			}
			kept = append(kept, ru)
		}
		dst = kept
	}
	return dst, nil
}

// bucketDeleted reports whether a tombstone above applied covers the
// bucket's start.
func bucketDeleted(ru *segment.Rollup, tombs []tombstone, applied uint64) bool {
	for i := range tombs {
		if tombs[i].seq > applied && tombs[i].sel.Covers(ru.Start) {
			return true
		}
	}
	return false
}

// mergeBucketLasts merges into buf, the raw samples of segment source s
// in [mint, maxt] (tombstones applied), the last sample of each of its
// buckets there that starts at or after floor (bucketsOf); on equal times
// the raw sample wins.
func (r *seriesReader) mergeBucketLasts(s source, tombs []tombstone, buf []point.Sample, mint, maxt, floor int64) ([]point.Sample, error) {
	rus, err := r.bucketsOf(s, tombs, mint, maxt, floor, true, r.rollBuf[:0])
	r.rollBuf = rus
	if err != nil || len(rus) == 0 {
		return buf, err
	}
	lasts := r.lastsBuf[:0]
	for i := range rus {
		lasts = append(lasts, point.Sample{Time: rus[i].LastT, Value: rus[i].Last})
	}
	r.lastsBuf = lasts
	r.rollMerge = mergeNewer(r.rollMerge[:0], lasts, buf)
	return append(buf[:0], r.rollMerge...), nil
}

// accumulateWithRollups is accumulate for a series some of whose sources
// hold buckets in [mint, maxt]: the raw samples fold as usual, the buckets
// fold by their start, block by block, into runs of states kept in time
// order, and the runs merge.
func (r *seriesReader) accumulateWithRollups(id uint64, meta *seriesMeta, srcs []source, tombs []tombstone, mint, maxt int64, q *Query, st *accs) error {
	r.noLasts = true
	defer func() { r.noLasts = false }()
	// Into states of its own, every bucket held (not finished as a later
	// one starts: the buckets come after the samples).
	all := accs{b: st.b, bits: st.bits}
	// The sample blocks as accumulate reads them (they ignore buckets).
	var err error
	switch {
	case len(tombs) == 0 && pushdownable(q.Agg) && len(srcs) == 1 && srcs[0].seg != nil:
		err = r.aggregateSegment(srcs[0], meta.kind, mint, maxt, q, &all)
	case len(tombs) == 0 && pushdownable(q.Agg):
		err = r.aggregateSources(id, srcs, meta.kind, mint, maxt, q, &all)
	default:
		err = r.foldMerged(id, srcs, tombs, meta.kind, mint, maxt, q, &all)
	}
	st.bits = all.bits
	if err != nil {
		return err
	}
	run := accs{b: st.b}
	last := int64(math.MinInt64)
	for _, s := range srcs {
		if s.idx == nil {
			continue
		}
		for b := range s.idx.Rollups {
			if rm := &s.idx.Rollups[b]; rm.MaxTime < mint || rm.MinTime > maxt {
				continue
			}
			if err := r.ctx.Err(); err != nil {
				return err
			}
			if rm := &s.idx.Rollups[b]; summaryUsable(rm, tombs, s.tombApplied, mint, maxt, st.b) {
				if rm.MinTime < last {
					all.out = mergeAccs(all.out, run.out)
					run = accs{b: st.b}
				}
				last = rm.MaxTime
				if err := run.at(rm.MinTime).addSummary(rm); err != nil {
					return err
				}
				r.db.st.blocksPushedDown.Add(1)
				continue
			}
			rus, err := s.seg.r.ReadRollups(s.idx, b, r.rollBuf[:0])
			r.rollBuf = rus
			if err != nil {
				return err
			}
			for i := range rus {
				ru := &rus[i]
				if ru.Start < mint || ru.Start > maxt || bucketDeleted(ru, tombs, s.tombApplied) {
					continue
				}
				if ru.Start < last {
					// Another source's buckets, earlier: a new run.
					all.out = mergeAccs(all.out, run.out)
					run = accs{b: st.b}
				}
				last = ru.Start
				run.at(ru.Start).addRollup(ru)
			}
		}
	}
	merged := mergeAccs(mergeAccs(st.out, all.out), run.out)
	if st.finish == nil || len(merged) == 0 {
		st.out = merged
		return nil
	}
	// One series on its own: hand over every bucket but the last as a
	// result, as accs.at would have.
	for i := range merged[:len(merged)-1] {
		if smp, ok := merged[i].result(st.finish.agg, st.b.every); ok {
			st.finish.done = append(st.finish.done, smp)
		}
	}
	st.out = append(st.out[:0], merged[len(merged)-1])
	return nil
}

// addRollup folds a whole bucket.
func (a *acc) addRollup(ru *segment.Rollup) {
	if a.count == 0 || ru.FirstT < a.firstT {
		a.first, a.firstT = ru.First, ru.FirstT
	}
	if a.count == 0 || ru.LastT > a.lastT {
		a.last, a.lastT = ru.Last, ru.LastT
	}
	a.count += ru.Count
	k := ru.Last.Kind()
	a.kinds |= kindBit(k)
	switch k {
	case KindFloat:
		a.sumF.Merge(&ru.SumF)
	default:
		a.sumI.add(int128{hi: ru.SumI.Hi, lo: ru.SumI.Lo})
	}
	a.minMax(ru.Min, ru.MinT, ru.Max, ru.MaxT)
}

// bucketVisible reports whether si holds a bucket whose start lies in
// [mint, v.maxt] and that ranges do not delete (metadata calls: a series
// whose samples are all rolled up is still there).
func (v *visibility) bucketVisible(h *segHandle, si *segment.SeriesIndex, ranges []timeRange, mint int64) (bool, error) {
	var rus []segment.Rollup
	for b := range si.Rollups {
		rm := &si.Rollups[b]
		if rm.MaxTime < mint || rm.MinTime > v.maxt {
			continue
		}
		if err := v.ctx.Err(); err != nil {
			return false, err
		}
		var err error
		if rus, err = h.r.ReadRollups(si, b, rus[:0]); err != nil {
			return false, err
		}
		for i := range rus {
			if t := rus[i].Start; t >= mint && t <= v.maxt && !covered(t, ranges) {
				return true, nil
			}
		}
	}
	return false, nil
}

// visitBuckets offers Last the last sample of the newest bucket of si
// whose last sample lies in [mint, maxt] and whose start no range deletes
// and is not below floor, the series' oldest visible time (bucketsOf).
func (w *lastWorker) visitBuckets(i int, si *segment.SeriesIndex, mint, floor int64, ranges []timeRange) error {
	v := w.v
	var rus []segment.Rollup
	for b := len(si.Rollups) - 1; b >= 0; b-- {
		rm := &si.Rollups[b]
		if rm.MinTime > v.maxt {
			continue
		}
		if rm.MaxTime < mint || !w.best.beats(i, min(rm.MaxTime, v.maxt), w.rank) {
			return nil
		}
		if err := v.ctx.Err(); err != nil {
			return err
		}
		var err error
		if rus, err = w.h.r.ReadRollups(si, b, rus[:0]); err != nil {
			return err
		}
		for j := len(rus) - 1; j >= 0; j-- {
			ru := &rus[j]
			if ru.LastT > v.maxt || covered(ru.Start, ranges) {
				continue
			}
			if ru.LastT < mint || ru.Start < floor {
				return nil // older buckets start earlier still
			}
			if w.best.beats(i, ru.LastT, w.rank) {
				w.best.set(i, Sample{Time: ru.LastT, Value: ru.Last}, w.rank)
			}
			return nil
		}
	}
	return nil
}

// floorOf returns the oldest visible time of series id, its retention
// cutoff or the expiry floor, without the read's own start (a raw read's
// range selects buckets by their last sample; the floor, by their start).
func (v *visibility) floorOf(id uint64) int64 {
	if v.cuts == nil {
		return math.MinInt64
	}
	return v.cuts.of(v.db, id)
}
