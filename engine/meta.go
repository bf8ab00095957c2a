package engine

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/memtable"
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
		for i, id := range ids {
			if i%(16*checkContextEvery) == 0 && v.ctx.Err() != nil {
				v.db.cat.mu.RUnlock()
				return v.ctx.Err()
			}
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
		c := v.db.cat
		var lists [][]string
		c.mu.RLock()
		mis := c.measIndexes(s.Measurement)
		c.mu.RUnlock()
		hasKey := matcher{key: key, op: MatchNotEqual}
		for _, mi := range mis {
			c.mu.RLock()
			ki := mi.keys[key]
			var ids []uint64
			if ki != nil {
				ms := v.ms
				if ki.n*4 < len(mi.ids) {
					// Few series hold the key: start from them.
					ms = append(slices.Clip(ms), hasKey)
				}
				ids = c.fieldFilter(mi.selectIDs(ms, len(c.series)), s.Field)
			}
			c.mu.RUnlock()
			if len(ids) == 0 {
				continue
			}
			ids, err := v.filter(ids)
			if err != nil {
				return err
			}
			if len(ids) == 0 {
				continue
			}
			visible := newIDSet(int(ids[len(ids)-1]) + 1) // ids ascending
			visible.addAll(ids)
			sorted := ki.values()
			vals := make([]string, 0, min(len(sorted), len(ids)))
			c.mu.RLock()
			for i, p := range sorted {
				if i%4096 == 0 && ctx.Err() != nil {
					c.mu.RUnlock()
					return ctx.Err()
				}
				if slices.ContainsFunc(p.ids, visible.has) {
					vals = append(vals, p.value)
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
		v.db.cat.sortByKey(ids)
		out = make([]SeriesInfo, len(ids))
		v.db.cat.mu.RLock()
		for i, id := range ids {
			if i%(16*checkContextEvery) == 0 && v.ctx.Err() != nil {
				v.db.cat.mu.RUnlock()
				return v.ctx.Err()
			}
			m := &v.db.cat.series[id]
			out[i] = SeriesInfo{Measurement: m.set.measurement, Tags: slices.Clone(m.set.tags), Field: m.field, Kind: m.kind}
		}
		v.db.cat.mu.RUnlock()
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
	cuts := db.cutoffs()
	mint = max(mint, cuts.base)
	if mint > maxt {
		return nil
	}
	v := newVisibility(db, snap, mint, maxt)
	v.ctx, v.sel, v.ms, v.cuts = ctx, s, ms, cuts
	return f(v)
}

// visibility answers which series have a visible sample in [mint, maxt] in
// one snapshot.
type visibility struct {
	ctx        context.Context // polled before every block, every few series
	db         *DB
	snap       *snapshot
	mint, maxt int64
	tombs      []ctomb
	sel        *Selector
	ms         []matcher
	buf        []point.Sample
	spans      []memtable.Span
	ranges     []timeRange
	idx        []int32  // indexOf's map
	idxFor     []uint64 // the ids idx was built for
	cuts       *cutoffs // retention per series (rules.go); nil: mint only
}

// lo returns the oldest visible time of series id: mint, or its retention
// cutoff when later. The caller must not hold db.cat.mu.
func (v *visibility) lo(id uint64) int64 {
	if v.cuts == nil {
		return v.mint
	}
	return max(v.mint, v.cuts.of(v.db, id))
}

// allFrom reports whether every series' samples at or after t are inside
// its retention: no series has a cutoff above t.
func (v *visibility) allFrom(t int64) bool {
	return t >= v.mint && (v.cuts == nil || t >= v.cuts.top())
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
	v := &visibility{ctx: context.Background(), db: db, snap: snap, mint: mint, maxt: maxt}
	for i := range snap.tombstones {
		t := &snap.tombstones[i]
		ms, ok := compileStoredSelector(&t.sel)
		lo, hi := t.sel.TimeRange()
		if hi < mint || lo > maxt {
			continue // cannot hide anything in range
		}
		v.tombs = append(v.tombs, ctomb{seq: t.seq, sel: &t.sel, ms: ms, ok: ok, mint: lo, maxt: hi})
	}
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
	v.ranges = v.appendTombRanges(v.ranges[:0], id, applied)
	return v.ranges
}

// appendTombRanges appends to dst the ranges that tombstones newer than
// applied delete from series id. The caller holds cat.mu.RLock. It only
// reads v, so concurrent workers may call it.
func (v *visibility) appendTombRanges(dst []timeRange, id uint64, applied uint64) []timeRange {
	for i := range v.tombs {
		t := &v.tombs[i]
		if t.seq <= applied || !t.ok {
			continue
		}
		s := &v.db.cat.series[id]
		if s.set.measurement != t.sel.Measurement || (t.sel.Field != "" && s.field != t.sel.Field) || !matchTags(s.set.tags, t.ms) {
			continue
		}
		dst = append(dst, timeRange{t.mint, t.maxt})
	}
	return dst
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
		for i, id := range ids {
			if i%checkContextEvery == 0 && v.ctx.Err() != nil {
				return nil, v.ctx.Err()
			}
			if visible[i] {
				continue
			}
			vis, err := v.memVisible(m, id)
			if err != nil {
				return nil, err
			}
			if vis {
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
	if !anyTomb && h.meta.Samples > 0 && v.allFrom(h.meta.MinTime) && h.meta.MaxTime <= v.maxt {
		// Every series a segment holds has a sample (writers skip empty
		// ones), and all of this segment's samples lie in the range with no
		// tombstone above its watermark: each one it holds is visible,
		// without decoding its index entry.
		err := v.eachSeriesID(h, ids, func(i int) bool { return visible[i] }, func(i int) {
			visible[i] = true
			marked++
		})
		return marked, err
	}
	err := v.eachSeries(h, ids, func(i int) bool { return visible[i] }, func(i int, si *segment.SeriesIndex) error {
		var ranges []timeRange
		if anyTomb {
			v.db.cat.mu.RLock()
			ranges = v.tombRanges(ids[i], applied)
			v.db.cat.mu.RUnlock()
		}
		ok, err := v.segVisible(h, si, ranges, v.lo(ids[i]))
		if err != nil {
			return err
		}
		if ok {
			visible[i] = true
			marked++
		}
		return nil
	})
	return marked, err
}

// segVisible reports whether si has a sample in [mint, maxt] that ranges
// do not delete, from block time ranges where they decide.
func (v *visibility) segVisible(h *segHandle, si *segment.SeriesIndex, ranges []timeRange, mint int64) (bool, error) {
	if len(si.Blocks)+len(si.Rollups) == 0 || si.MaxTime() < mint || si.MinTime() > v.maxt {
		return false, nil
	}
	if vis, err := v.bucketVisible(h, si, ranges, mint); vis || err != nil {
		return vis, err
	}
	bs := si.Blocks
	start := sort.Search(len(bs), func(i int) bool { return bs[i].MaxTime >= mint })
	for b := start; b < len(bs) && bs[b].MinTime <= v.maxt; b++ {
		bm := &bs[b]
		if bm.MinTime >= mint && !covered(bm.MinTime, ranges) {
			return true, nil
		}
		if bm.MaxTime <= v.maxt && !covered(bm.MaxTime, ranges) {
			return true, nil
		}
		var err error
		v.buf, err = v.db.decodeBlock(v.ctx, h.r, si, b, v.buf[:0])
		if err != nil {
			return false, err
		}
		for _, s := range v.buf {
			if s.Time >= mint && s.Time <= v.maxt && !covered(s.Time, ranges) {
				return true, nil
			}
		}
	}
	return false, nil
}

// memVisible reports whether memtable m holds a sample of id in [mint,
// maxt] that the snapshot sees (see DB.memSamples). A long series is read
// window by window (about PartSamples samples each, polling ctx between
// them) until one holds a visible sample.
func (v *visibility) memVisible(m *memRef, id uint64) (bool, error) {
	mint := v.lo(id)
	lo, hi, ok := m.t.Bounds(id)
	if !ok || hi < mint || lo > v.maxt {
		return false, nil
	}
	if m.t.SeriesLen(id) <= partSamples {
		v.buf = v.db.memSamples(v.snap, m, id, mint, v.maxt, v.buf[:0])
		return len(v.buf) > 0, nil
	}
	v.spans = m.t.Spans(id, mint, v.maxt, v.snap.oldest, v.spans[:0])
	from, n := mint, 0
	for i, sp := range v.spans {
		if n += sp.Count; n < partSamples && i < len(v.spans)-1 {
			continue
		}
		if err := v.ctx.Err(); err != nil {
			return false, err
		}
		v.buf = v.db.memSamples(v.snap, m, id, from, sp.MaxTime, v.buf[:0])
		if len(v.buf) > 0 {
			return true, nil
		}
		from, n = sp.MaxTime+1, 0
	}
	return false, nil
}

// segIDs maps a segment's series to catalog ids, built on first use.
type segIDs struct {
	once  sync.Once
	byPos []uint64 // catalog id of the segment's i-th series
	ok    bool
}

// segSeriesIDs returns the catalog ids of h's series in segment (key)
// order. ok is false when some series is unknown to the catalog (then
// callers look keys up).
func (db *DB) segSeriesIDs(h *segHandle) ([]uint64, bool) {
	h.ids.once.Do(func() {
		n := h.r.NumSeries()
		ids := make([]uint64, 0, n)
		db.cat.mu.RLock()
		defer db.cat.mu.RUnlock()
		for i := range n {
			id, ok := db.cat.lookup(string(h.r.Key(i)))
			if !ok {
				return
			}
			ids = append(ids, id)
		}
		h.ids.byPos, h.ids.ok = ids, true
	})
	return h.ids.byPos, h.ids.ok
}

// eachSeriesID calls f(i) for every ids[i] that segment h holds, like
// eachSeries but without decoding index entries when the segment's ids by
// position are known.
func (v *visibility) eachSeriesID(h *segHandle, ids []uint64, skip func(i int) bool, f func(i int)) error {
	if len(ids)*16 >= h.r.NumSeries() {
		if byPos, ok := v.db.segSeriesIDs(h); ok {
			idx := v.indexOf(ids)
			for pos, id := range byPos {
				if pos%(16*checkContextEvery) == 0 && v.ctx.Err() != nil {
					return v.ctx.Err()
				}
				if id >= uint64(len(idx)) {
					continue
				}
				if i := idx[id]; i >= 0 && !skip(int(i)) {
					f(int(i))
				}
			}
			return nil
		}
	}
	return v.eachSeries(h, ids, skip, func(i int, _ *segment.SeriesIndex) error {
		f(i)
		return nil
	})
}

// eachSeries calls f(i, si) for every ids[i] that segment h holds, with
// its index entry: by key lookups when ids are few, otherwise by one sweep
// of the segment's series in file order. skip(i) true leaves ids[i] out.
// f must not keep si: a sweep decodes every entry into one SeriesIndex.
func (v *visibility) eachSeries(h *segHandle, ids []uint64, skip func(i int) bool, f func(i int, si *segment.SeriesIndex) error) error {
	var byPos []uint64
	ok := len(ids)*16 >= h.r.NumSeries()
	if ok {
		byPos, ok = v.db.segSeriesIDs(h)
	}
	if !ok {
		for i, id := range ids {
			if i%checkContextEvery == 0 && v.ctx.Err() != nil {
				return v.ctx.Err()
			}
			if skip(i) {
				continue
			}
			v.db.cat.mu.RLock()
			key := v.db.cat.series[id].key
			v.db.cat.mu.RUnlock()
			if key < string(h.meta.FirstKey) || key > string(h.meta.LastKey) {
				continue
			}
			if si, found := h.r.Find([]byte(key)); found {
				if err := f(i, si); err != nil {
					return err
				}
			}
		}
		return nil
	}
	idx := v.indexOf(ids)
	var si segment.SeriesIndex
	for pos, id := range byPos {
		if pos%checkContextEvery == 0 && v.ctx.Err() != nil {
			return v.ctx.Err()
		}
		if id >= uint64(len(idx)) {
			continue
		}
		i := idx[id]
		if i < 0 || skip(int(i)) {
			continue
		}
		if err := f(int(i), h.r.SeriesInto(pos, &si)); err != nil {
			return err
		}
	}
	return nil
}

// indexOf returns a dense map from series id to its index in ids (-1 for
// none), built once per ids slice.
func (v *visibility) indexOf(ids []uint64) []int32 {
	if v.idxFor != nil && len(v.idxFor) == len(ids) && &v.idxFor[0] == &ids[0] {
		return v.idx
	}
	n := 0
	if len(ids) > 0 {
		n = int(ids[len(ids)-1]) + 1
	}
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = -1
	}
	for i, id := range ids {
		idx[id] = int32(i)
	}
	v.idx, v.idxFor = idx, ids
	return idx
}
