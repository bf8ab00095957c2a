package compaction

// Rollups in a merge. MergeOptions.Rollup gives, for a series, the levels
// its old samples are reduced to: every sample older than a level's Before
// (and not older than the next coarser level's) becomes part of an
// Every-wide, epoch-aligned bucket that keeps count, exact sum, min, max,
// first and last with their times (segment.Rollup). The buckets of the
// inputs are carried over, and those older than a coarser level's Before
// merge into its buckets (cascading). Two buckets of one start, from
// different inputs, merge: they hold different samples (a sample is rolled
// up once, by the merge that held it), so their statistics add up. A drop
// range or MinTime removes a bucket whose start it covers.
//
// A series' buckets are written before its samples (the format wants
// them first), once the merge has passed the finest level's Before: every
// sample older than that is then folded in.

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/xsum"
	"github.com/stratadb/strata/segment"
)

// RollupLevel is one level of a series' downsampling: samples and finer
// buckets older than Before become Every-wide buckets. Before must be a
// multiple of Every.
type RollupLevel struct {
	Every, Before int64
}

// rollupState is the rollup work of the series being merged.
type rollupState struct {
	on      bool
	levels  []RollupLevel // by Every ascending, Before descending
	limit   int64         // samples older than it are rolled up
	emitted bool
	parts   []segment.Rollup // buckets gathered, in no particular order
	cur     segment.Rollup   // the bucket raw samples are folded into
	hasCur  bool
	buf     []segment.Rollup
}

// startRollups prepares the rollup work of series key: it loads the
// inputs' buckets (minus dropped ones) and the series' levels.
func (m *merger) startRollups(key []byte, kind point.Kind) error {
	rs := &m.roll
	rs.on, rs.emitted, rs.hasCur = false, false, false
	rs.parts = rs.parts[:0]
	rs.levels = nil
	rs.limit = math.MinInt64
	if m.opts.Rollup != nil && (kind == point.KindFloat || kind == point.KindInt || kind == point.KindUint) {
		rs.levels = m.opts.Rollup(key, kind)
		if !m.rollable(rs.levels) {
			rs.levels = nil // its buckets are carried over as they are
		}
		if len(rs.levels) > 0 {
			rs.limit = rs.levels[0].Before
		}
	}
	have := false
	for _, s := range m.active {
		for b := range s.cur.Rollups {
			if err := m.ctx.Err(); err != nil {
				return err
			}
			buf, err := s.r.ReadRollups(s.cur, b, rs.buf[:0])
			if err != nil {
				return fmt.Errorf("compaction: read %s series %q rollup block %d: %w", s.path, key, b, err)
			}
			rs.buf = buf
			m.stats.BytesRead += int64(s.cur.Rollups[b].Length)
			for i := range buf {
				if inRanges(s.ranges, buf[i].Start) {
					m.stats.RollupsDropped++
					continue
				}
				r := buf[i]
				if rs.relevel(&r) {
					m.stats.RollupsCascaded++
				}
				rs.parts = append(rs.parts, r)
				have = true
			}
		}
	}
	rs.on = have || len(rs.levels) > 0
	return nil
}

// rollable reports whether every sample and bucket the inputs hold of the
// series being merged has a bucket at each of levels. One within a level's
// Every of math.MinInt64 may have none: its bucket would start below what
// int64 holds (point.FloorTime clamps it above the sample). Such a series is
// not rolled up while it holds that data.
func (m *merger) rollable(levels []RollupLevel) bool {
	if len(levels) == 0 {
		return true
	}
	oldest := int64(math.MaxInt64)
	for _, s := range m.active {
		if len(s.cur.Blocks) > 0 || len(s.cur.Rollups) > 0 {
			oldest = min(oldest, s.cur.MinTime())
		}
	}
	for _, l := range levels {
		if !point.HasBucket(oldest, l.Every) {
			return false
		}
	}
	return true
}

// inRanges reports whether t falls in one of the normalized ranges rs.
func inRanges(rs []TimeRange, t int64) bool {
	i, _ := slices.BinarySearchFunc(rs, t, func(r TimeRange, t int64) int { return cmp.Compare(r.Max, t) })
	return i < len(rs) && rs[i].Min <= t
}

// levelOf returns the coarsest level whose Before is after t.
func (rs *rollupState) levelOf(t int64) (RollupLevel, bool) {
	for i := len(rs.levels) - 1; i >= 0; i-- {
		if t < rs.levels[i].Before {
			return rs.levels[i], true
		}
	}
	return RollupLevel{}, false
}

// relevel moves bucket r into the bucket of its level when that is
// coarser than r's own, and reports whether it did.
func (rs *rollupState) relevel(r *segment.Rollup) bool {
	if l, ok := rs.levelOf(r.Start); ok && l.Every > r.Every {
		r.Start, r.Every = point.FloorTime(r.Start, l.Every), l.Every
		return true
	}
	return false
}

// addSample folds a sample older than the limit into its bucket.
func (rs *rollupState) addSample(s point.Sample) {
	l, _ := rs.levelOf(s.Time)
	start := point.FloorTime(s.Time, l.Every)
	if rs.hasCur && rs.cur.Start != start {
		rs.parts = append(rs.parts, rs.cur)
		rs.hasCur = false
	}
	if !rs.hasCur {
		rs.cur = segment.Rollup{Start: start, Every: l.Every}
		rs.hasCur = true
	}
	FoldSample(&rs.cur, s)
}

// FoldSample folds sample s, later than every sample folded into r so
// far, into bucket r: the reference the merge's buckets follow.
func FoldSample(r *segment.Rollup, s point.Sample) {
	v := s.Value
	if r.Count == 0 {
		r.First, r.FirstT = v, s.Time
		r.Min, r.MinT, r.Max, r.MaxT = v, s.Time, v, s.Time
		r.SumF = xsum.Acc{}
	} else {
		if point.Compare(v, r.Min) < 0 {
			r.Min, r.MinT = v, s.Time
		}
		if point.Compare(v, r.Max) > 0 {
			r.Max, r.MaxT = v, s.Time
		}
	}
	r.Last, r.LastT = v, s.Time
	r.Count++
	switch v.Kind() {
	case point.KindFloat:
		r.SumF.Add(v.Float())
	case point.KindInt:
		addInt128(&r.SumI, segment.Int128{Hi: v.Int() >> 63, Lo: uint64(v.Int())})
	case point.KindUint:
		addInt128(&r.SumI, segment.Int128{Lo: v.Uint()})
	}
}

// MergeRollup folds bucket b into a, both of the same series and start (a
// takes the larger Every).
func MergeRollup(a, b *segment.Rollup) {
	if b.Count == 0 {
		return
	}
	if a.Count == 0 {
		every := max(a.Every, b.Every)
		*a = *b
		a.SumF = xsum.Acc{} // not sharing b's
		a.SumF.Merge(&b.SumF)
		a.Every = every
		return
	}
	a.Every = max(a.Every, b.Every)
	if b.FirstT < a.FirstT {
		a.First, a.FirstT = b.First, b.FirstT
	}
	if b.LastT > a.LastT {
		a.Last, a.LastT = b.Last, b.LastT
	}
	if c := point.Compare(b.Min, a.Min); c < 0 || (c == 0 && b.MinT < a.MinT) {
		a.Min, a.MinT = b.Min, b.MinT
	}
	if c := point.Compare(b.Max, a.Max); c > 0 || (c == 0 && b.MaxT < a.MaxT) {
		a.Max, a.MaxT = b.Max, b.MaxT
	}
	a.Count += b.Count
	a.SumF.Merge(&b.SumF)
	addInt128(&a.SumI, b.SumI)
}

func addInt128(a *segment.Int128, b segment.Int128) {
	var c uint64
	a.Lo, c = bits.Add64(a.Lo, b.Lo, 0)
	a.Hi += b.Hi + int64(c)
}

// emitRollups writes the series' buckets, sorted and merged, before its
// samples.
func (m *merger) emitRollups(key []byte, kind point.Kind) (bool, error) {
	rs := &m.roll
	if rs.emitted {
		return false, nil
	}
	rs.emitted = true
	if rs.hasCur {
		rs.parts = append(rs.parts, rs.cur)
		rs.hasCur = false
	}
	if len(rs.parts) == 0 {
		return false, nil
	}
	slices.SortStableFunc(rs.parts, func(a, b segment.Rollup) int { return cmp.Compare(a.Start, b.Start) })
	out := rs.parts[:1]
	for i := 1; i < len(rs.parts); i++ {
		last := &out[len(out)-1]
		if r := &rs.parts[i]; r.Start == last.Start || r.FirstT <= last.LastT {
			// One bucket, or buckets of levels that no longer cascade
			// overlapping: the later joins the earlier.
			MergeRollup(last, r)
			continue
		}
		out = append(out, rs.parts[i])
	}
	if m.w == nil {
		if err := m.newOutput(); err != nil {
			return false, err
		}
	}
	if err := m.w.AddRollups(key, kind, out); err != nil {
		return false, fmt.Errorf("compaction: write rollups of %q: %w", key, err)
	}
	m.stats.RollupsOut += int64(len(out))
	rs.parts = rs.parts[:0]
	return true, nil
}
