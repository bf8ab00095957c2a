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
//     time lies in the range; so do Last, and the metadata calls count it
//     there.
//   - A delete hides (and compaction drops) the buckets whose start it
//     covers; so do retention and the expiry floor (the series' cutoff),
//     for every read: a bucket starting below it goes whole, even when
//     its last sample is above it.

import (
	"math"

	"github.com/stratadb/strata/internal/catalog"
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
// byLast, whose last sample) lies in [lo, hi], whose start is at or after
// the series' retention cutoff cut, and that no tombstone above what s
// applied deletes.
func (r *seriesReader) bucketsOf(s source, tombs []tombstone, lo, hi, cut int64, byLast bool, dst []segment.Rollup) ([]segment.Rollup, error) {
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
		if dst, err = s.seg.Reader.ReadRollups(s.idx, b, dst); err != nil {
			return dst[:start], err
		}
		kept := dst[:start]
		for _, ru := range dst[start:] {
			t := ru.Start
			if byLast {
				t = ru.LastT
			}
			if t < lo || t > hi || ru.Start < cut || bucketDeleted(&ru, tombs, s.tombApplied) {
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
// buckets there that starts at or after cut; on equal times the raw
// sample wins.
func (r *seriesReader) mergeBucketLasts(s source, tombs []tombstone, buf []point.Sample, mint, maxt, cut int64) ([]point.Sample, error) {
	rus, err := r.bucketsOf(s, tombs, mint, maxt, cut, true, r.rollBuf[:0])
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
func (r *seriesReader) accumulateWithRollups(id uint64, meta *catalog.Series, srcs []source, tombs []tombstone, mint, maxt int64, q *Query, st *accs) error {
	r.noLasts = true
	defer func() { r.noLasts = false }()
	// Into states of its own, every bucket held (not finished as a later
	// one starts: the buckets come after the samples).
	all := accs{b: st.b, bits: st.bits}
	// The sample blocks as accumulate reads them (they ignore buckets).
	var err error
	switch {
	case len(tombs) == 0 && pushdownable(q.Agg) && len(srcs) == 1 && srcs[0].seg != nil:
		err = r.aggregateSegment(srcs[0], meta.Kind, mint, maxt, q, &all)
	case len(tombs) == 0 && pushdownable(q.Agg):
		err = r.aggregateSources(id, srcs, meta.Kind, mint, maxt, q, &all)
	default:
		err = r.foldMerged(id, srcs, tombs, meta.Kind, mint, maxt, q, &all)
	}
	st.bits = all.bits
	if err != nil {
		return err
	}
	run := accs{b: st.b, out: r.runStates(st, mint, maxt)}
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
			hours, ok, err := r.usableHours(s, b, tombs, mint, maxt, st.b)
			if err != nil {
				return err
			}
			if ok {
				for i := range hours {
					h := &hours[i]
					if h.MinTime < last {
						all.out = mergeAccs(all.out, run.out)
						run = accs{b: st.b}
					}
					last = h.MaxTime
					if err := run.at(h.MinTime).addSummary(h); err != nil {
						return err
					}
				}
				r.db.st.blocksPushedDown.Add(1)
				continue
			}
			rus, err := s.seg.Reader.ReadRollups(s.idx, b, r.rollBuf[:0])
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
	merged := run.out
	if len(st.out) > 0 || len(all.out) > 0 {
		merged = mergeAccs(mergeAccs(st.out, all.out), run.out)
	}
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
	if len(run.out) > 0 && &merged[0] == &run.out[0] {
		r.runBuf = run.out[:0]
	}
	return nil
}

// runStates returns the storage for the bucket states of a run of
// rollups in [mint, maxt]: the reader's own, reused series after series,
// when the series is folded on its own (its states are finished into
// results before the next series), else a new slice; room for a bucket
// per Every of the range, up to 4,096.
func (r *seriesReader) runStates(st *accs, mint, maxt int64) []acc {
	if st.finish != nil && r.runBuf != nil {
		return r.runBuf[:0]
	}
	n := 1
	if st.b.every > 0 && maxt >= mint {
		n = int(min(uint64(maxt-mint)/uint64(st.b.every)+1, 4096))
	}
	return make([]acc, 0, n)
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

// bucketVisible reports whether si holds a bucket whose last sample lies
// in [mint, v.maxt], whose start is at or after cut and that ranges do
// not delete (metadata calls: a series whose samples are all rolled up is
// still there, where raw reads and Last see it).
func (v *visibility) bucketVisible(h *segHandle, si *segment.SeriesIndex, ranges []timeRange, mint, cut int64) (bool, error) {
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
		if rus, err = h.Reader.ReadRollups(si, b, rus[:0]); err != nil {
			return false, err
		}
		for i := range rus {
			if ru := &rus[i]; ru.LastT >= mint && ru.LastT <= v.maxt && ru.Start >= cut && !covered(ru.Start, ranges) {
				return true, nil
			}
		}
	}
	return false, nil
}

// visitBuckets offers Last the last sample of the newest bucket of si
// whose last sample lies in [mint, maxt] and whose start is at or after
// cut and no range deletes.
func (w *lastWorker) visitBuckets(i int, si *segment.SeriesIndex, mint, cut int64, ranges []timeRange) error {
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
		if rus, err = w.h.Reader.ReadRollups(si, b, rus[:0]); err != nil {
			return err
		}
		for j := len(rus) - 1; j >= 0; j-- {
			ru := &rus[j]
			if ru.LastT > v.maxt || covered(ru.Start, ranges) {
				continue
			}
			if ru.LastT < mint || ru.Start < cut {
				return nil // and so are the older ones
			}
			if w.best.beats(i, ru.LastT, w.rank) {
				w.best.set(i, Sample{Time: ru.LastT, Value: ru.Last}, w.rank)
			}
			return nil
		}
	}
	return nil
}
