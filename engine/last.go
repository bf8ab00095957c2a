package engine

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sort"
	"sync"

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
		ids := v.db.cat.MatchCompiled(v.sel, v.ms)
		if len(ids) == 0 {
			return nil
		}
		best := &lastSet{samples: make([]Sample, len(ids)), rank: make([]int32, len(ids))}
		if err := v.newest(ctx, ids, best); err != nil {
			return err
		}
		found := make([]uint64, 0, len(ids))
		for i, id := range ids {
			if best.rank[i] != 0 {
				found = append(found, id)
			}
		}
		v.db.cat.SortByKey(found)
		// The results' samples are best's; one allocation for the tags.
		out = make([]Series, len(found))
		metas := v.db.cat.Metas(found)
		ntags := 0
		for _, m := range metas {
			ntags += m.Set.NumTags()
		}
		tags := make([]Tag, 0, ntags)
		for n, id := range found {
			m := metas[n]
			t := len(tags)
			tags = m.Set.AppendTags(tags)
			i, _ := slices.BinarySearch(ids, id) // ids is ascending
			out[n] = Series{Measurement: m.Set.Measurement(), Tags: tags[t:len(tags):len(tags)], Field: m.Field, Samples: best.samples[i : i+1 : i+1]}
		}
		return nil
	})
	return out, err
}

// lastSet holds the newest sample found so far for each series, and the
// rank of its source (higher is newer; a newer source wins equal times; 0
// is none found). Workers write disjoint indexes.
type lastSet struct {
	samples []Sample
	rank    []int32
}

// beats reports whether a sample at time t from a source of rank could
// replace entry i.
func (b *lastSet) beats(i int, t int64, rank int) bool {
	r := b.rank[i]
	return r == 0 || t > b.samples[i].Time || (t == b.samples[i].Time && int32(rank) > r)
}

func (b *lastSet) set(i int, s Sample, rank int) { b.samples[i], b.rank[i] = s, int32(rank) }

// newest fills best with the newest visible sample of each id.
func (v *visibility) newest(ctx context.Context, ids []uint64, best *lastSet) error {
	// Ranks follow the read order of queries: deeper levels oldest, then
	// L0 by file number, sealed memtables, the active memtable newest.
	rank := 0
	for l := maxLevels - 1; l >= 0; l-- {
		for _, h := range v.snap.v.Levels[l] {
			rank++
			if h.Meta.MaxTime < v.mint || h.Meta.MinTime > v.maxt {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := v.segNewest(ctx, h, rank, ids, best); err != nil {
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
		for i, id := range ids {
			if i%checkContextEvery == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			mint := v.lo(id)
			lo, hi, ok := m.t.Bounds(id)
			if !ok || hi < mint || lo > v.maxt || !best.beats(i, min(hi, v.maxt), rank) {
				continue
			}
			// Memtable reads see what the snapshot sees (its sequence
			// number, its tombstones as masks): try the newest sample first.
			v.buf = v.buf[:0]
			if hi <= v.maxt {
				v.buf = v.db.memSamples(v.snap, m, id, hi, hi, v.buf)
			}
			if len(v.buf) == 0 {
				if err := v.memNewest(m, id, mint); err != nil {
					return err
				}
			}
			if j := len(v.buf) - 1; j >= 0 {
				if s := v.buf[j]; best.beats(i, s.Time, rank) {
					best.set(i, s, rank)
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
func (v *visibility) segNewest(ctx context.Context, h *segHandle, rank int, ids []uint64, best *lastSet) error {
	applied := h.TombApplied.Load()
	anyTomb := v.hasTombsAbove(applied)
	var byPos []uint64
	sweep := len(ids)*16 >= h.Reader.NumSeries()
	if sweep {
		byPos, sweep = v.db.segSeriesIDs(h)
	}
	if !sweep {
		w := lastWorker{v: v, h: h, rank: rank, ids: ids, best: best, applied: applied, anyTomb: anyTomb}
		return v.eachSeries(h, ids, func(int) bool { return false }, w.visit)
	}
	// Sweep the segment in file order, split among workers: each decodes
	// the newest blocks of its share of the series through its own
	// read-ahead window. Each id appears once in a segment, so workers
	// write disjoint entries of best.
	idx := v.indexOf(ids)
	workers := max(1, min(runtime.GOMAXPROCS(0), 8, len(byPos)/v.db.lastParallelMin))
	per := (len(byPos) + workers - 1) / workers
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for n := range workers {
		lo, hi := n*per, min(len(byPos), (n+1)*per)
		wg.Go(func() {
			w := lastWorker{v: v, h: h, rank: rank, ids: ids, best: best, applied: applied, anyTomb: anyTomb,
				br: h.Reader.NewBlockReader(lastReadWindow)}
			var si segment.SeriesIndex // reused: visit keeps nothing of it
			for pos := lo; pos < hi; pos++ {
				if pos%(16*checkContextEvery) == 0 && ctx.Err() != nil {
					errs[n] = ctx.Err()
					return
				}
				id := byPos[pos]
				if id >= uint64(len(idx)) || idx[id] < 0 {
					continue
				}
				if err := w.visit(int(idx[id]), h.Reader.SeriesInto(pos, &si)); err != nil {
					errs[n] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// defaultLastParallelMin is the fewest series per worker of a segment
// sweep (DB.lastParallelMin).
const defaultLastParallelMin = 16 << 10

// lastWorker finds the newest samples of series in one segment.
type lastWorker struct {
	v       *visibility
	h       *segHandle
	rank    int
	ids     []uint64
	best    *lastSet
	applied uint64
	anyTomb bool
	br      *segment.BlockReader // nil: plain reads
	buf     []point.Sample
	ranges  []timeRange
}

func (w *lastWorker) visit(i int, si *segment.SeriesIndex) error {
	v, best, rank := w.v, w.best, w.rank
	if len(si.Blocks)+len(si.Rollups) == 0 || si.MinTime() > v.maxt || si.MaxTime() < v.mint || !best.beats(i, min(si.MaxTime(), v.maxt), rank) {
		return nil
	}
	mint := v.lo(w.ids[i])
	var ranges []timeRange
	if w.anyTomb {
		w.ranges = v.appendTombRanges(w.ranges[:0], w.ids[i], w.applied)
		ranges = w.ranges
	}
	if len(si.Rollups) > 0 {
		if err := w.visitBuckets(i, si, mint, v.cut(w.ids[i]), ranges); err != nil {
			return err
		}
	}
	bs := si.Blocks
	// The last block starting at or before maxt, then older ones.
	b := sort.Search(len(bs), func(i int) bool { return bs[i].MinTime > v.maxt }) - 1
	for ; b >= 0 && bs[b].MaxTime >= mint; b-- {
		if !best.beats(i, min(bs[b].MaxTime, v.maxt), rank) {
			return nil
		}
		var err error
		if w.br != nil {
			w.buf, err = v.db.decodeBlock(v.ctx, w.br, si, b, w.buf[:0])
		} else {
			w.buf, err = v.db.decodeBlock(v.ctx, w.h.Reader, si, b, w.buf[:0])
		}
		if err != nil {
			return err
		}
		for j := len(w.buf) - 1; j >= 0; j-- {
			s := w.buf[j]
			if s.Time > v.maxt || covered(s.Time, ranges) {
				continue
			}
			if s.Time < mint {
				return nil
			}
			if best.beats(i, s.Time, rank) {
				best.set(i, s, rank)
			}
			return nil
		}
	}
	return nil
}
