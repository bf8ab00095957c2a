package engine

import (
	"cmp"
	"math"
	"slices"

	"github.com/stratadb/strata/segment"
)

// pushed is a segment block answered from its stats.
type pushed struct {
	src, block int
}

// timeSpan is an inclusive time range.
type timeSpan struct{ lo, hi int64 }

// pushdownScratch holds aggregateSources' buffers, reused from series to
// series.
type pushdownScratch struct {
	spans  [][]timeSpan
	pushed []pushed
}

// aggregateSources aggregates one series that lives in several sources
// (segments and memtables) with no tombstone over it. A segment block that
// lies wholly inside the range and inside one bucket, whose stats the
// aggregate may use (blockStatsUsable), and whose time span no other
// source touches (so nothing overwrites its samples and it overwrites
// nothing) is folded from its stats; the rest of the range is merged and
// folded sample by sample, gap by gap between those blocks, in time order.
func (r *seriesReader) aggregateSources(id uint64, srcs []source, kind Kind, mint, maxt int64, q *Query, st *accs) error {
	// The time span of each source, per block for segments.
	sc := &r.pushdown
	for len(sc.spans) < len(srcs) {
		sc.spans = append(sc.spans, nil)
	}
	spans := sc.spans[:len(srcs)]
	for i, s := range srcs {
		spans[i] = spans[i][:0]
		if s.idx == nil {
			if lo, hi, ok := s.mem.t.Bounds(id); ok {
				spans[i] = append(spans[i], timeSpan{lo, hi})
			}
			continue
		}
		for b := range s.idx.Blocks {
			bm := &s.idx.Blocks[b]
			spans[i] = append(spans[i], timeSpan{bm.MinTime, bm.MaxTime})
		}
	}
	// overlapsOther reports whether a source other than i has a span
	// meeting [lo, hi]; spans of a source are sorted and disjoint.
	overlapsOther := func(i int, lo, hi int64) bool {
		for j, sp := range spans {
			if j == i {
				continue
			}
			k, _ := slices.BinarySearchFunc(sp, lo, func(s timeSpan, t int64) int { return cmp.Compare(s.hi, t) })
			if k < len(sp) && sp[k].lo <= hi {
				return true
			}
		}
		return false
	}
	ps := sc.pushed[:0]
	defer func() { sc.pushed = ps[:0] }()
	for i, s := range srcs {
		if s.idx == nil {
			continue
		}
		for b := range s.idx.Blocks {
			bm := &s.idx.Blocks[b]
			if bm.MinTime < mint || bm.MaxTime > maxt || st.b.bucket(bm.MinTime) != st.b.bucket(bm.MaxTime) {
				continue
			}
			if blockStatsUsable(bm, kind, q) && !overlapsOther(i, bm.MinTime, bm.MaxTime) {
				ps = append(ps, pushed{i, b})
			}
		}
	}
	if len(ps) == 0 {
		return r.foldMerged(id, srcs, nil, kind, mint, maxt, q, st)
	}
	at := func(p pushed) int64 { return srcs[p.src].idx.Blocks[p.block].MinTime }
	slices.SortFunc(ps, func(a, b pushed) int { return cmp.Compare(at(a), at(b)) })
	lo := mint
	for n, p := range ps {
		bm := &srcs[p.src].idx.Blocks[p.block]
		if lo < bm.MinTime && r.anyIn(id, srcs, lo, bm.MinTime-1) {
			if err := r.foldMerged(id, srcs, nil, kind, lo, bm.MinTime-1, q, st); err != nil {
				return err
			}
		}
		if n%checkContextEvery == 0 {
			if err := r.ctx.Err(); err != nil {
				return err
			}
		}
		st.at(bm.MinTime).addBlock(bm, kind, q.Agg == AggMin || q.Agg == AggMax)
		r.db.st.blocksPushedDown.Add(1)
		if bm.MaxTime == math.MaxInt64 {
			return nil
		}
		lo = bm.MaxTime + 1
	}
	if lo <= maxt && r.anyIn(id, srcs, lo, maxt) {
		return r.foldMerged(id, srcs, nil, kind, lo, maxt, q, st)
	}
	return nil
}

// blockStatsUsable reports whether aggregate q may fold block bm (wholly
// inside one of q's buckets) from its stats alone: counts always; sums and
// means when the stored sum is exact; min and max in buckets (Every > 0),
// where no sample time is reported.
func blockStatsUsable(bm *segment.BlockMeta, kind Kind, q *Query) bool {
	switch q.Agg {
	case AggCount:
		return true
	case AggSum, AggMean:
		return blockSumExact(bm, kind)
	case AggMin, AggMax:
		return q.Every > 0
	}
	return false
}

// anyIn reports whether a source of series id may hold a sample in
// [lo, hi]: a segment block or a memtable's span meets it.
func (r *seriesReader) anyIn(id uint64, srcs []source, lo, hi int64) bool {
	for _, s := range srcs {
		if s.idx == nil {
			if mlo, mhi, ok := s.mem.t.Bounds(id); ok && mlo <= hi && mhi >= lo {
				return true
			}
			continue
		}
		bs := s.idx.Blocks
		k, _ := slices.BinarySearchFunc(bs, lo, func(b segment.BlockMeta, t int64) int { return cmp.Compare(b.MaxTime, t) })
		if k < len(bs) && bs[k].MinTime <= hi {
			return true
		}
	}
	return false
}
