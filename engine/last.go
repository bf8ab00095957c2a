package engine

import (
	"context"
	"slices"
	"sort"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/segment"
)

// Last returns, for each series s selects, its newest visible sample in the
// range (all time when Start == End == 0), as one Series of one Sample,
// sorted by canonical series key. Measurement "" means every measurement.
//
// Each source (memtable or segment) holding a series is asked for its
// newest sample only when its stored time range could beat what a newer
// source already gave; in a segment the blocks are read newest first and
// reading stops at the first visible sample, so usually one block per
// series is decoded.
func (db *DB) Last(ctx context.Context, s Selector) ([]Series, error) {
	var out []Series
	err := db.withVisibility(ctx, &s, func(v *visibility) error {
		v.db.cat.mu.RLock()
		ids := v.db.cat.matchCompiled(v.sel, v.ms)
		v.db.cat.mu.RUnlock()
		if len(ids) == 0 {
			return nil
		}
		best := make([]lastSample, len(ids))
		if err := v.newest(ctx, ids, best); err != nil {
			return err
		}
		found := make([]uint64, 0, len(ids))
		for i, id := range ids {
			if best[i].found {
				found = append(found, id)
			}
		}
		v.db.cat.sortByKey(found)
		// One allocation for every result's sample and one for the tags.
		out = make([]Series, len(found))
		samples := make([]Sample, len(found))
		v.db.cat.mu.RLock()
		ntags := 0
		for _, id := range found {
			ntags += len(v.db.cat.series[id].set.tags)
		}
		tags := make([]Tag, 0, ntags)
		for n, id := range found {
			m := &v.db.cat.series[id]
			t := len(tags)
			tags = append(tags, m.set.tags...)
			i, _ := slices.BinarySearch(ids, id) // ids is ascending
			samples[n] = best[i].s
			out[n] = Series{Measurement: m.set.measurement, Tags: tags[t:len(tags):len(tags)], Field: m.field, Samples: samples[n : n+1 : n+1]}
		}
		v.db.cat.mu.RUnlock()
		return nil
	})
	return out, err
}

// lastSample is the newest sample found so far for one series, and the
// rank of its source (higher is newer; a newer source wins equal times).
type lastSample struct {
	s     point.Sample
	rank  int
	found bool
}

// beats reports whether a sample at time t from a source of rank could
// replace b.
func (b *lastSample) beats(t int64, rank int) bool {
	return !b.found || t > b.s.Time || (t == b.s.Time && rank > b.rank)
}

// newest fills best with the newest visible sample of each id.
func (v *visibility) newest(ctx context.Context, ids []uint64, best []lastSample) error {
	// Ranks follow the read order of queries: deeper levels oldest, then
	// L0 by file number, sealed memtables, the active memtable newest.
	rank := 0
	for l := maxLevels - 1; l >= 0; l-- {
		for _, h := range v.snap.v.levels[l] {
			rank++
			if h.meta.MaxTime < v.mint || h.meta.MinTime > v.maxt {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := v.segNewest(h, rank, ids, best); err != nil {
				return err
			}
		}
	}
	mems := append(slices.Clone(v.snap.imm), v.snap.mem)
	for _, m := range mems {
		rank++
		if m.t.Len() == 0 || m.t.MaxTime() < v.mint || m.t.MinTime() > v.maxt {
			continue
		}
		applied := m.tombApplied
		if m == v.snap.mem {
			applied = ^uint64(0)
		}
		anyTomb := v.hasTombsAbove(applied)
		for i, id := range ids {
			if i%checkContextEvery == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			lo, hi, ok := m.t.Bounds(id)
			if !ok || hi < v.mint || lo > v.maxt || !best[i].beats(min(hi, v.maxt), rank) {
				continue
			}
			var ranges []timeRange
			if anyTomb {
				v.db.cat.mu.RLock()
				ranges = v.tombRanges(id, applied)
				v.db.cat.mu.RUnlock()
			}
			if hi <= v.maxt && !covered(hi, ranges) {
				v.buf = m.t.Samples(id, hi, hi, v.buf[:0])
			} else {
				v.buf = m.t.Samples(id, v.mint, v.maxt, v.buf[:0])
			}
			for j := len(v.buf) - 1; j >= 0; j-- {
				s := v.buf[j]
				if !covered(s.Time, ranges) {
					if best[i].beats(s.Time, rank) {
						best[i] = lastSample{s: s, rank: rank, found: true}
					}
					break
				}
			}
		}
	}
	return nil
}

// lastReadWindow is the read-ahead of Last's block reads: the newest
// blocks of series adjacent in a segment are close together.
const lastReadWindow = 256 << 10

// segNewest updates best from segment h.
func (v *visibility) segNewest(h *segHandle, rank int, ids []uint64, best []lastSample) error {
	applied := h.tombApplied.Load()
	anyTomb := v.hasTombsAbove(applied)
	br := h.r.NewBlockReader(lastReadWindow)
	visit := func(i int, si *segment.SeriesIndex) error {
		if len(si.Blocks) == 0 || si.MinTime() > v.maxt || si.MaxTime() < v.mint || !best[i].beats(min(si.MaxTime(), v.maxt), rank) {
			return nil
		}
		var ranges []timeRange
		if anyTomb {
			v.db.cat.mu.RLock()
			ranges = v.tombRanges(ids[i], applied)
			v.db.cat.mu.RUnlock()
		}
		bs := si.Blocks
		// The last block starting at or before maxt, then older ones.
		b := sort.Search(len(bs), func(i int) bool { return bs[i].MinTime > v.maxt }) - 1
		for ; b >= 0 && bs[b].MaxTime >= v.mint; b-- {
			if !best[i].beats(min(bs[b].MaxTime, v.maxt), rank) {
				return nil
			}
			var err error
			if v.sweeping {
				v.buf, err = br.ReadBlock(si, b, v.buf[:0])
			} else {
				v.buf, err = h.r.ReadBlock(si, b, v.buf[:0])
			}
			if err != nil {
				return err
			}
			for j := len(v.buf) - 1; j >= 0; j-- {
				s := v.buf[j]
				if s.Time > v.maxt || covered(s.Time, ranges) {
					continue
				}
				if s.Time < v.mint {
					return nil
				}
				if best[i].beats(s.Time, rank) {
					best[i] = lastSample{s: s, rank: rank, found: true}
				}
				return nil
			}
		}
		return nil
	}
	return v.eachSeries(h, ids, func(int) bool { return false }, visit)
}
