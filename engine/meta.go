package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/segment"
)

// Metadata reads the catalog and the inverted index for the series a
// selector names, then keeps those with a visible sample in range. That
// check reads index metadata only: segment block time ranges and memtable
// bounds. A block is decoded only when neither of its end samples decides
// (both outside the range or deleted by a tombstone), which an all-time
// question without deletes never meets.

// Measurements returns the measurements that have at least one visible
// sample, sorted.
func (db *DB) Measurements(ctx context.Context) ([]string, error) {
	var out []string
	err := db.withVisibility(ctx, &Selector{}, func(v *visibility) error {
		v.db.cat.mu.RLock()
		names := slices.Clone(v.db.cat.idx.sorted)
		v.db.cat.mu.RUnlock()
		for _, name := range names {
			v.db.cat.mu.RLock()
			ids := v.db.cat.idx.measurements[name].ids
			v.db.cat.mu.RUnlock()
			// Usually the first series answers; look at a few, then at all.
			for lo, n := 0, 1; lo < len(ids); lo, n = lo+n, n*16 {
				if err := ctx.Err(); err != nil {
					return err
				}
				vis, err := v.filter(ids[lo:min(lo+n, len(ids))])
				if err != nil {
					return err
				}
				if len(vis) > 0 {
					out = append(out, name)
					break
				}
			}
		}
		return nil
	})
	return out, err
}

// TagKeys returns the tag keys of the series s selects that have a visible
// sample in its range, sorted.
func (db *DB) TagKeys(ctx context.Context, s Selector) ([]string, error) {
	var out []string
	err := db.withVisibility(ctx, &s, func(v *visibility) error {
		ids, err := v.selected(nil)
		if err != nil {
			return err
		}
		seen := make(map[*tagSet]bool)
		keys := make(map[string]bool)
		v.db.cat.mu.RLock()
		for _, id := range ids {
			set := v.db.cat.series[id].set
			if seen[set] {
				continue
			}
			seen[set] = true
			for _, t := range set.tags {
				keys[t.Key] = true
			}
		}
		v.db.cat.mu.RUnlock()
		for k := range keys {
			out = append(out, k)
		}
		slices.Sort(out)
		return nil
	})
	return out, err
}

// TagValues returns the values of tag key among the series s selects that
// have a visible sample in its range, sorted; never "".
func (db *DB) TagValues(ctx context.Context, key string, s Selector) ([]string, error) {
	if key == "" {
		return nil, fmt.Errorf("%w: empty tag key", ErrInvalid)
	}
	var out []string
	err := db.withVisibility(ctx, &s, func(v *visibility) error {
		// Only series that hold the key.
		ids, err := v.selected(&matcher{key: key, op: MatchNotEqual})
		if err != nil {
			return err
		}
		visible := newIDSet(v.nseries)
		visible.addAll(ids)
		c := v.db.cat
		var lists [][]string
		c.mu.RLock()
		mis := c.measIndexes(s.Measurement)
		c.mu.RUnlock()
		for _, mi := range mis {
			c.mu.RLock()
			ki := mi.keys[key]
			c.mu.RUnlock()
			if ki == nil {
				continue
			}
			var vals []string
			sorted := ki.values()
			c.mu.RLock()
			for i, val := range sorted {
				if i%4096 == 0 && ctx.Err() != nil {
					c.mu.RUnlock()
					return ctx.Err()
				}
				if slices.ContainsFunc(ki.postings[val], visible.has) {
					vals = append(vals, val)
				}
			}
			c.mu.RUnlock()
			lists = append(lists, vals)
		}
		out = mergeSortedStrings(lists)
		return nil
	})
	return out, err
}

// mergeSortedStrings merges sorted lists into one sorted list without
// duplicates.
func mergeSortedStrings(lists [][]string) []string {
	switch len(lists) {
	case 0:
		return nil
	case 1:
		return lists[0]
	}
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// SeriesInfo describes the series s selects that have a visible sample in
// its range, sorted by canonical series key, without reading samples.
func (db *DB) SeriesInfo(ctx context.Context, s Selector) ([]SeriesInfo, error) {
	var out []SeriesInfo
	err := db.withVisibility(ctx, &s, func(v *visibility) error {
		ids, err := v.selected(nil)
		if err != nil {
			return err
		}
		metas := make([]seriesMeta, len(ids))
		v.db.cat.mu.RLock()
		for i, id := range ids {
			metas[i] = v.db.cat.series[id]
		}
		v.db.cat.mu.RUnlock()
		slices.SortFunc(metas, func(a, b seriesMeta) int { return strings.Compare(a.key, b.key) })
		out = make([]SeriesInfo, len(metas))
		for i, m := range metas {
			out[i] = SeriesInfo{Measurement: m.set.measurement, Tags: slices.Clone(m.set.tags), Field: m.field, Kind: m.kind}
		}
		return nil
	})
	return out, err
}

// validateMetaSelector checks a selector of the metadata calls and Last,
// where the measurement may be "" (every measurement).
func validateMetaSelector(s *Selector) error {
	if strings.ContainsAny(s.Measurement, "\n\r") {
		return fmt.Errorf("%w: newline in measurement %q", ErrInvalid, s.Measurement)
	}
	return validateSelectorFilters(s)
}

// withVisibility validates s, takes a snapshot and runs f with a
// visibility checker over s's range (retention applied).
func (db *DB) withVisibility(ctx context.Context, s *Selector, f func(v *visibility) error) error {
	if err := validateMetaSelector(s); err != nil {
		return err
	}
	ms, err := compileSelector(s)
	if err != nil {
		return err
	}
	if err := db.checkOpen(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	snap, err := db.acquireSnapshot()
	if err != nil {
		return err
	}
	defer db.releaseSnapshot(snap)
	mint, maxt := s.TimeRange()
	mint = max(mint, db.retentionCutoff())
	if mint > maxt {
		return nil
	}
	v := newVisibility(db, snap, mint, maxt)
	v.sel, v.ms = s, ms
	return f(v)
}

// visibility answers which series have a visible sample in [mint, maxt] in
// one snapshot.
type visibility struct {
	db         *DB
	snap       *snapshot
	mint, maxt int64
	tombs      []ctomb
	nseries    int
	sel        *Selector
	ms         []matcher
	buf        []point.Sample
	ranges     []timeRange
}

// ctomb is a tombstone with its matchers compiled once.
type ctomb struct {
	seq        uint64
	sel        *Selector
	ms         []matcher
	ok         bool
	mint, maxt int64
}

type timeRange struct{ mint, maxt int64 }

func newVisibility(db *DB, snap *snapshot, mint, maxt int64) *visibility {
	v := &visibility{db: db, snap: snap, mint: mint, maxt: maxt}
	for i := range snap.tombstones {
		t := &snap.tombstones[i]
		ms, ok := mustCompileSelector(&t.sel)
		lo, hi := t.sel.TimeRange()
		if hi < mint || lo > maxt {
			continue // cannot hide anything in range
		}
		v.tombs = append(v.tombs, ctomb{seq: t.seq, sel: &t.sel, ms: ms, ok: ok, mint: lo, maxt: hi})
	}
	v.nseries = db.cat.len()
	return v
}

// selected returns the ascending ids that v's selector (and extra, when
// not nil) selects and that have a visible sample.
func (v *visibility) selected(extra *matcher) ([]uint64, error) {
	ms := v.ms
	if extra != nil {
		ms = append(slices.Clip(ms), *extra)
	}
	v.db.cat.mu.RLock()
	ids := v.db.cat.matchCompiled(v.sel, ms)
	v.db.cat.mu.RUnlock()
	return v.filter(ids)
}

// tombRanges returns the ranges that tombstones newer than applied delete
// from series id. The caller holds cat.mu.RLock.
func (v *visibility) tombRanges(id uint64, applied uint64) []timeRange {
	v.ranges = v.ranges[:0]
	for i := range v.tombs {
		t := &v.tombs[i]
		if t.seq <= applied || !t.ok {
			continue
		}
		s := &v.db.cat.series[id]
		if s.set.measurement != t.sel.Measurement || (t.sel.Field != "" && s.field != t.sel.Field) || !matchTags(s.set.tags, t.ms) {
			continue
		}
		v.ranges = append(v.ranges, timeRange{t.mint, t.maxt})
	}
	return v.ranges
}

func covered(t int64, ranges []timeRange) bool {
	for _, r := range ranges {
		if t >= r.mint && t <= r.maxt {
			return true
		}
	}
	return false
}

func (v *visibility) hasTombsAbove(applied uint64) bool {
	for i := range v.tombs {
		if v.tombs[i].seq > applied {
			return true
		}
	}
	return false
}

// filter returns the ids of ascending ids that have a visible sample.
func (v *visibility) filter(ids []uint64) ([]uint64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	visible := make([]bool, len(ids))
	left := len(ids)
	// Memtables, newest first: their bounds are at hand.
	mems := append([]*memRef{v.snap.mem}, v.snap.imm...)
	for _, m := range mems {
		if left == 0 {
			break
		}
		if m.t.Len() == 0 || m.t.MaxTime() < v.mint || m.t.MinTime() > v.maxt {
			continue
		}
		applied := m.tombApplied
		if m == v.snap.mem {
			applied = ^uint64(0)
		}
		anyTomb := v.hasTombsAbove(applied)
		for i, id := range ids {
			if visible[i] {
				continue
			}
			var ranges []timeRange
			if anyTomb {
				v.db.cat.mu.RLock()
				ranges = v.tombRanges(id, applied)
				v.db.cat.mu.RUnlock()
			}
			if v.memVisible(m, id, ranges) {
				visible[i] = true
				left--
			}
		}
	}
	// Segments.
	for l := range v.snap.v.levels {
		for _, h := range v.snap.v.levels[l] {
			if left == 0 {
				break
			}
			if h.meta.MaxTime < v.mint || h.meta.MinTime > v.maxt {
				continue
			}
			n, err := v.segFilter(h, ids, visible)
			if err != nil {
				return nil, err
			}
			left -= n
		}
	}
	out := make([]uint64, 0, len(ids)-left)
	for i, id := range ids {
		if visible[i] {
			out = append(out, id)
		}
	}
	return out, nil
}

// segFilter marks the ids (not yet visible) that have a visible sample in
// segment h, and returns how many it marked.
func (v *visibility) segFilter(h *segHandle, ids []uint64, visible []bool) (int, error) {
	applied := h.tombApplied.Load()
	anyTomb := v.hasTombsAbove(applied)
	marked := 0
	check := func(i int, si *segment.SeriesIndex) error {
		var ranges []timeRange
		if anyTomb {
			v.db.cat.mu.RLock()
			ranges = v.tombRanges(ids[i], applied)
			v.db.cat.mu.RUnlock()
		}
		ok, err := v.segVisible(h, si, ranges)
		if err != nil {
			return err
		}
		if ok {
			visible[i] = true
			marked++
		}
		return nil
	}
	pairs, ok := v.db.segSeriesIDs(h)
	if !ok || len(ids)*16 < h.r.NumSeries() {
		// Few ids: look each one up by key.
		for i, id := range ids {
			if visible[i] {
				continue
			}
			v.db.cat.mu.RLock()
			key := v.db.cat.series[id].key
			v.db.cat.mu.RUnlock()
			if string(key) < string(h.meta.FirstKey) || string(key) > string(h.meta.LastKey) {
				continue
			}
			si, found := h.r.Find([]byte(key))
			if !found {
				continue
			}
			if err := check(i, si); err != nil {
				return marked, err
			}
		}
		return marked, nil
	}
	// Many ids: merge them with the segment's series sorted by id.
	j := 0
	for i, id := range ids {
		if visible[i] {
			continue
		}
		for j < len(pairs) && pairs[j].id < id {
			j++
		}
		if j == len(pairs) {
			break
		}
		if pairs[j].id != id {
			continue
		}
		if err := check(i, h.r.Series(int(pairs[j].pos))); err != nil {
			return marked, err
		}
	}
	return marked, nil
}

// segVisible reports whether si has a sample in [mint, maxt] that ranges
// do not delete, from block time ranges where they decide.
func (v *visibility) segVisible(h *segHandle, si *segment.SeriesIndex, ranges []timeRange) (bool, error) {
	if len(si.Blocks) == 0 || si.MaxTime() < v.mint || si.MinTime() > v.maxt {
		return false, nil
	}
	bs := si.Blocks
	start := sort.Search(len(bs), func(i int) bool { return bs[i].MaxTime >= v.mint })
	for b := start; b < len(bs) && bs[b].MinTime <= v.maxt; b++ {
		bm := &bs[b]
		if bm.MinTime >= v.mint && !covered(bm.MinTime, ranges) {
			return true, nil
		}
		if bm.MaxTime <= v.maxt && !covered(bm.MaxTime, ranges) {
			return true, nil
		}
		var err error
		v.buf, err = h.r.ReadBlock(si, b, v.buf[:0])
		if err != nil {
			return false, err
		}
		for _, s := range v.buf {
			if s.Time >= v.mint && s.Time <= v.maxt && !covered(s.Time, ranges) {
				return true, nil
			}
		}
	}
	return false, nil
}

// memVisible reports whether memtable m holds a sample of id in [mint,
// maxt] that ranges do not delete.
func (v *visibility) memVisible(m *memRef, id uint64, ranges []timeRange) bool {
	lo, hi, ok := m.t.Bounds(id)
	if !ok || hi < v.mint || lo > v.maxt {
		return false
	}
	if lo >= v.mint && !covered(lo, ranges) {
		return true
	}
	if hi <= v.maxt && !covered(hi, ranges) {
		return true
	}
	v.buf = m.t.Samples(id, v.mint, v.maxt, v.buf[:0])
	for _, s := range v.buf {
		if !covered(s.Time, ranges) {
			return true
		}
	}
	return false
}

// segIDs maps a segment's series to catalog ids, built on first use.
type segIDs struct {
	once  sync.Once
	pairs []idPos // sorted by id
	ok    bool
}

type idPos struct {
	id  uint64
	pos int32 // index of the series in the segment
}

// segSeriesIDs returns h's series sorted by catalog id. ok is false when
// some series is unknown to the catalog (then callers look keys up).
func (db *DB) segSeriesIDs(h *segHandle) ([]idPos, bool) {
	h.ids.once.Do(func() {
		n := h.r.NumSeries()
		pairs := make([]idPos, 0, n)
		db.cat.mu.RLock()
		for i := range n {
			id, ok := db.cat.byKey[string(h.r.Series(i).Key)]
			if !ok {
				db.cat.mu.RUnlock()
				return
			}
			pairs = append(pairs, idPos{id: id, pos: int32(i)})
		}
		db.cat.mu.RUnlock()
		slices.SortFunc(pairs, func(a, b idPos) int { return cmp.Compare(a.id, b.id) })
		h.ids.pairs, h.ids.ok = pairs, true
	})
	return h.ids.pairs, h.ids.ok
}
