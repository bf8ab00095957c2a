package engine

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"math"
	"runtime"
	"slices"
	"strings"

	"github.com/stratadb/strata/internal/catalog"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/memtable"
	"github.com/stratadb/strata/segment"
)

// checkContextEvery is how many series a query reads between ctx checks.
const checkContextEvery = 128

// Query returns the series q selects, sorted by canonical series key, each
// with its samples (or per-bucket aggregates) sorted by time. A series with
// no sample in range is left out. With q.GroupBy non-nil it returns one
// result per group instead (see QuerySeq). Query collects QuerySeq.
//
// Sums are exact. An AggSum of float samples is their exact sum, correctly
// rounded (to nearest, ties to even) to a float64: it depends on no order
// of addition, so block stats give it without decoding. An AggSum of int
// samples whose true sum lies outside the int64 range saturates at
// math.MaxInt64 or math.MinInt64, and one of uint samples at
// math.MaxUint64, never wrapping; where numeric kinds mix (GroupBy), the
// float64 sum is the exact sum of every value rounded once. AggMean divides
// the exact sum, rounded once, by the count. Every aggregate gives the same
// answer, bit for bit, whether the samples are in memtables, segments
// (block stats included), compacted or reopened.
//
// The raw samples of many short series share allocations of up to 320
// KiB (each Series' Samples has a capacity of its length, so appending to
// one never touches another): a caller that keeps a few Series of a large
// result and drops the rest should copy them. QuerySeq allocates each
// result on its own.
func (db *DB) Query(ctx context.Context, q Query) ([]Series, error) {
	var out []Series
	err := db.query(ctx, q, 0, func(s Series) bool {
		out = append(out, s)
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// QuerySeq is the streaming form of Query: it yields the results one at a
// time, in Query's order, holding a bounded number of them, so a result far
// larger than memory can be consumed (each yielded Series is the caller's).
// Raw reads of many series (at least 256, GOMAXPROCS above 1) are read
// ahead on up to four goroutines, in chunks of 64 series that stop once
// they hold PartSamples samples, at most two chunks a goroutine beyond the
// one being yielded; otherwise each series is read only when the previous
// result has been handed over. An error is yielded once, last. The query
// reads one consistent snapshot, held until the loop ends; breaking out of
// the loop releases it.
//
// A series with more than PartSamples raw samples in range is yielded in
// parts: consecutive Series with the same Measurement, Tags and Field, each
// holding the next run of samples in time order (about PartSamples each,
// cut at block boundaries), so that one series of any length never sits
// in memory whole. Appending the Samples of consecutive results with equal
// keys gives Query's result. Aggregates read a long series window by window
// too, holding one window of samples at a time.
//
// With GroupBy, the series of one field that share the values of the
// GroupBy tag keys are aggregated together, as InfluxQL's GROUP BY tag: one
// result per (field, group), its Tags the group's tags (a key a series
// lacks counts as "" and is left out), sorted like series.
func (db *DB) QuerySeq(ctx context.Context, q Query) iter.Seq2[Series, error] {
	return func(yield func(Series, error) bool) {
		stopped := false
		err := db.query(ctx, q, PartSamples, func(s Series) bool {
			if !yield(s, nil) {
				stopped = true
				return false
			}
			return true
		})
		if err != nil && !stopped {
			yield(Series{}, err)
		}
	}
}

// PartSamples is about the most raw samples of one series that QuerySeq
// yields in one Series, and the window in which aggregates read a long
// series.
const PartSamples = 1 << 16

// query runs q and passes each result to emit until emit returns false. A
// raw series of more than part samples is emitted in parts; part 0 emits
// every series whole.
func (db *DB) query(ctx context.Context, q Query, part int, emit func(Series) bool) error {
	if part > 0 {
		part = db.partSamples
	}
	groupBy, err := normalizeGroupBy(q.GroupBy)
	if err != nil {
		return err
	}
	sel, ok, err := db.selectRead(ctx, &q)
	if !ok {
		return err
	}
	defer db.releaseSnapshot(sel.snap)
	// Visible range, inclusive: [mint, maxt].
	metas, ids, mint, maxt := sel.metas, sel.ids, sel.mint, sel.maxt
	if q.Agg == AggSum || q.Agg == AggMean || q.Agg == AggMin || q.Agg == AggMax {
		// sum, mean, min and max apply to numbers only.
		n := 0
		for i := range metas {
			if metas[i].Kind.Numeric() {
				metas[n], ids[n] = metas[i], ids[i]
				n++
			}
		}
		metas, ids = metas[:n], ids[:n]
	}

	r := seriesReader{ctx: ctx, db: db, snap: sel.snap, cuts: sel.cuts}
	if groupBy != nil {
		return r.queryGroups(ctx, &q, groupBy, metas, ids, mint, maxt, emit)
	}
	if part == 0 && len(metas) >= aggParallelMin && runtime.GOMAXPROCS(0) > 1 {
		return r.queryParallel(ctx, &q, metas, ids, mint, maxt, emit)
	}
	if part > 0 && q.Agg == AggNone && len(metas) >= db.seqParallelMin && runtime.GOMAXPROCS(0) > 1 {
		return r.readPartsParallel(metas, ids, mint, maxt, part, emit)
	}
	for i := range metas {
		if i%checkContextEvery == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		meta := &metas[i]
		if q.Agg == AggNone && part > 0 {
			more, err := r.readParts(ids[i], meta, mint, maxt, part, false, emit)
			if err != nil || !more {
				return err
			}
			continue
		}
		r.slabRest = len(metas) - i
		samples, err := r.read(ids[i], meta, mint, maxt, &q)
		if err != nil {
			return err
		}
		if len(samples) == 0 {
			continue
		}
		if !emit(seriesResult(meta, samples)) {
			return nil
		}
	}
	return nil
}

// seriesResult returns a query result of the series m holding samples;
// its tags are the caller's.
func seriesResult(m *catalog.Series, samples []point.Sample) Series {
	return Series{Measurement: m.Set.Measurement(), Tags: m.Set.Tags(), Field: m.Field, Samples: samples}
}

// readParts emits the visible raw samples of one series in [mint, maxt] in
// parts of about part samples, window by window. It returns false when
// emit asked to stop. With whole set, a series that needs more than one
// part is not read: readParts returns errNeedsParts.
func (r *seriesReader) readParts(id uint64, meta *catalog.Series, mint, maxt int64, part int, whole bool, emit func(Series) bool) (bool, error) {
	if mint = r.seriesMin(id, mint); mint > maxt {
		return true, nil
	}
	srcs, tombs := r.sourcesAndTombs(id, meta, mint, maxt)
	if len(srcs) == 0 {
		return true, nil
	}
	lo := mint
	r.ends = r.windowEnds(id, srcs, mint, maxt, part)
	if whole && len(r.ends) > 1 {
		return true, errNeedsParts
	}
	fast := segmentOnly(srcs, tombs)
	for _, hi := range r.ends {
		var samples []point.Sample
		if fast {
			if err := r.segmentColumns(srcs[0], lo, hi); err != nil {
				return false, err
			}
			if r.cols.Len() > 0 {
				samples = r.cols.Samples(meta.Kind)
			}
		} else {
			merged, err := r.mergeSources(id, srcs, tombs, lo, hi)
			if err != nil {
				return false, err
			}
			if len(merged) > 0 {
				samples = slices.Clone(merged)
			}
		}
		lo = hi + 1
		if len(samples) == 0 {
			continue
		}
		if err := r.ctx.Err(); err != nil {
			return false, err
		}
		if !emit(seriesResult(meta, samples)) {
			return false, nil
		}
	}
	return true, nil
}

// windowEnds splits [mint, maxt] into consecutive windows, each holding
// about limit samples of series id's sources, and returns their inclusive
// ends (in r.ends); the last is maxt. Windows end where segment blocks and
// memtable chunks end, so a block is decoded at most twice, and a reader
// polling its context between windows polls it every limit samples or so,
// wherever they live.
func (r *seriesReader) windowEnds(id uint64, srcs []source, mint, maxt int64, limit int) []int64 {
	total := 0
	for _, s := range srcs {
		if s.idx == nil {
			total += s.mem.t.SeriesLen(id) // a bound: all of its times
			continue
		}
		for b := range s.idx.Blocks {
			if bm := &s.idx.Blocks[b]; bm.MaxTime >= mint && bm.MinTime <= maxt {
				total += bm.Count
			}
		}
	}
	dst := r.ends[:0]
	if total <= limit {
		return append(dst, maxt)
	}
	spans := r.spans[:0]
	for _, s := range srcs {
		if s.idx == nil {
			spans = s.mem.t.Spans(id, mint, maxt, r.snap.oldest, spans)
			continue
		}
		for b := range s.idx.Blocks {
			if bm := &s.idx.Blocks[b]; bm.MaxTime >= mint && bm.MinTime <= maxt {
				spans = append(spans, memtable.Span{MaxTime: bm.MaxTime, Count: bm.Count})
			}
		}
	}
	r.spans = spans
	slices.SortFunc(spans, func(a, b memtable.Span) int { return cmp.Compare(a.MaxTime, b.MaxTime) })
	n := 0
	for _, e := range spans {
		n += e.Count
		if n >= limit && e.MaxTime < maxt && (len(dst) == 0 || e.MaxTime > dst[len(dst)-1]) {
			dst = append(dst, e.MaxTime)
			n = 0
		}
	}
	return append(dst, maxt)
}

// selection is what a read of a selector works on: a snapshot, the
// visible part of the range [mint, maxt] with the retention cutoffs
// applied, and the selected series, sorted by key.
type selection struct {
	snap       *snapshot
	mint, maxt int64
	cuts       *cutoffs
	metas      []catalog.Series
	ids        []uint64
}

// selectRead validates q, compiles its selector, takes a snapshot
// (beginRead) and selects the series. ok is false when there is nothing to
// read, err saying why if anything failed; otherwise the caller releases
// the snapshot.
func (db *DB) selectRead(ctx context.Context, q *Query) (s selection, ok bool, err error) {
	if err := validateQuery(q); err != nil {
		return s, false, err
	}
	sel := &q.Selector
	ms, err := catalog.CompileSelector(sel)
	if err != nil {
		return s, false, err
	}
	if s.snap, s.mint, s.maxt, s.cuts, err = db.beginRead(ctx, sel); s.snap == nil {
		return s, false, err
	}
	s.metas, s.ids = db.selectSorted(sel, ms)
	return s, true, nil
}

// selectSorted returns the series sel selects (compiled matchers ms),
// sorted by canonical key, with their ids.
func (db *DB) selectSorted(sel *Selector, ms []catalog.Matcher) ([]catalog.Series, []uint64) {
	ids := db.cat.MatchCompiled(sel, ms)
	db.cat.SortByKey(ids)
	metas := make([]catalog.Series, len(ids))
	for i, m := range db.cat.Metas(ids) {
		metas[i] = *m
	}
	return metas, ids
}

// queryGroups aggregates the series (sorted by key) by group and emits
// one result per group in canonical key order.
// maxGroupsInKeyOrder is the most groups whose partial states a grouped
// query holds at once to read its series in key order.
const maxGroupsInKeyOrder = 4096

func (r *seriesReader) queryGroups(ctx context.Context, q *Query, keys []string, metas []catalog.Series, ids []uint64, mint, maxt int64, emit func(Series) bool) error {
	type group struct {
		key    string
		tags   []Tag
		field  string
		series []int // indexes into metas, in key order
	}
	var groups []*group
	byKey := make(map[string]*group)
	var kbuf []byte
	var tbuf, sbuf []Tag
	for i := range metas {
		m := &metas[i]
		tbuf, sbuf = tbuf[:0], m.Set.AppendTags(sbuf[:0])
		for _, k := range keys {
			if v := catalog.TagValue(sbuf, k); v != "" {
				tbuf = append(tbuf, Tag{Key: k, Value: v})
			}
		}
		kbuf = point.AppendSeriesKey(kbuf[:0], m.Set.Measurement(), tbuf, m.Field)
		g := byKey[string(kbuf)]
		if g == nil {
			g = &group{key: string(kbuf), tags: slices.Clone(tbuf), field: m.Field}
			byKey[g.key] = g
			groups = append(groups, g)
		}
		g.series = append(g.series, i)
	}
	slices.SortFunc(groups, func(a, b *group) int { return strings.Compare(a.key, b.key) })

	b := bucketer{every: q.Every, start: q.Start}
	var series accs
	n := 0
	// fold folds series i into states, a group's.
	fold := func(i int, states []acc) ([]acc, error) {
		if n%checkContextEvery == 0 && ctx.Err() != nil {
			return states, ctx.Err()
		}
		n++
		series = accs{b: b, out: series.out[:0], bits: series.bits}
		if err := r.accumulate(ids[i], &metas[i], mint, maxt, q, &series); err != nil {
			return states, err
		}
		return mergeAccs(states, series.out), nil
	}
	// emitGroup emits the result of group g from its states.
	emitGroup := func(g *group, states []acc) bool {
		samples := finishAccs(states, q.Agg, q.Every, nil)
		return len(samples) == 0 || emit(Series{Measurement: q.Measurement, Tags: g.tags, Field: g.field, Samples: samples})
	}
	if len(groups) > 1 && len(groups) <= maxGroupsInKeyOrder {
		// Few groups of many series: read the series in key order, the
		// order the segments' indexes are cheapest to walk in, folding each
		// into its group. A group still folds its series in key order, so
		// the answers are the same as group by group.
		gi := make([]int32, len(metas))
		for j, g := range groups {
			for _, i := range g.series {
				gi[i] = int32(j)
			}
		}
		states := make([][]acc, len(groups))
		for i := range metas {
			var err error
			if states[gi[i]], err = fold(i, states[gi[i]]); err != nil {
				return err
			}
		}
		for j, g := range groups {
			st := states[j]
			states[j] = nil
			if !emitGroup(g, st) {
				return nil
			}
		}
		return nil
	}
	for _, g := range groups {
		var states []acc
		for _, i := range g.series {
			var err error
			if states, err = fold(i, states); err != nil {
				return err
			}
		}
		if !emitGroup(g, states) {
			return nil
		}
	}
	return nil
}

func validateQuery(q *Query) error {
	if err := validateSelector(&q.Selector); err != nil {
		return err
	}
	if q.Agg < AggNone || q.Agg > AggLast {
		return fmt.Errorf("%w: unknown aggregate %d", ErrInvalid, int(q.Agg))
	}
	if q.Every < 0 {
		return fmt.Errorf("%w: negative Every %d", ErrInvalid, q.Every)
	}
	if q.GroupBy != nil && q.Agg == AggNone {
		return fmt.Errorf("%w: GroupBy needs an aggregate", ErrInvalid)
	}
	return nil
}

// seriesReader reads one series at a time from a snapshot. Its buffers
// are reused from series to series, so what sources and mergeSources
// return is valid until the next series is read.
type seriesReader struct {
	ctx      context.Context // polled before every block and window
	db       *DB
	snap     *snapshot
	bufs     [][]point.Sample       // per source
	blockBuf []point.Sample         // one decoded block
	idxs     []*segment.SeriesIndex // per segment source
	srcs     []source
	merge    [2][]point.Sample // mergeNewer's outputs, used in turn
	ends     []int64           // windowEnds' result
	cols     point.Columns     // a series' decoded columns
	slab     []point.Sample    // Query's raw results are carved from it (takeSamples)
	slabRest int               // series left to read, this one included, sizing the next slab
	key      []byte            // the series key sourcesAndTombs looks up
	spans    []memtable.Span   // windowEnds' scratch
	accOut   []acc             // read's per-bucket states
	accBits  []uint64          // accs.bits, kept from series to series
	pushdown pushdownScratch   // aggregateSources' buffers
	fin      finished          // read's completed buckets, a fresh slice per series
	// readAhead, when non-nil, holds a read-ahead block reader per
	// segment (blockSource): set by readers that sweep many series in key
	// order, which is file order.
	readAhead map[*segHandle]*segment.BlockReader
	cuts      *cutoffs // retention, per series (rules.go)

	// Rollups (rollup_read.go): scratch, and whether raw reads leave
	// the buckets' last samples out (aggregates fold buckets whole).
	rollBuf   []segment.Rollup
	hoursBuf  []segment.RollupMeta
	runBuf    []acc // bucket states of rollup runs (rollup_read.go)
	lastsBuf  []point.Sample
	rollMerge []point.Sample
	noLasts   bool
}

// seriesMin returns the oldest time of series id that r may show at or
// after mint: its retention cutoff, when later.
func (r *seriesReader) seriesMin(id uint64, mint int64) int64 {
	if r.cuts == nil {
		return mint
	}
	return max(mint, r.cuts.of(r.db, id))
}

// source is one place a series' samples may live, and how far tombstones
// are applied to it.
type source struct {
	seg         *segHandle
	idx         *segment.SeriesIndex
	mem         *memRef
	tombApplied uint64
}

// sources lists where series key may have samples, oldest first: deeper
// levels, then L0 in flush order, then sealed memtables, then the active one.
func (r *seriesReader) sources(id uint64, key []byte, mint, maxt int64) []source {
	srcs := r.srcs[:0]
	defer func() { r.srcs = srcs }()
	v := r.snap.v
	for l := maxLevels - 1; l >= 0; l-- {
		for _, h := range v.Levels[l] {
			if h.Meta.MaxTime < mint || h.Meta.MinTime > maxt {
				continue
			}
			if l > 0 && (string(key) < string(h.Meta.FirstKey) || string(key) > string(h.Meta.LastKey)) {
				continue
			}
			k := len(srcs)
			if k == len(r.idxs) {
				r.idxs = append(r.idxs, new(segment.SeriesIndex))
			}
			if !h.Reader.FindInto(key, r.idxs[k]) {
				continue
			}
			srcs = append(srcs, source{seg: h, idx: r.idxs[k], tombApplied: h.TombApplied.Load()})
		}
	}
	for _, m := range r.snap.imm {
		if _, ok := m.t.Kind(id); ok {
			srcs = append(srcs, source{mem: m, tombApplied: m.tombApplied})
		}
	}
	if _, ok := r.snap.mem.t.Kind(id); ok {
		srcs = append(srcs, source{mem: r.snap.mem, tombApplied: r.snap.mem.tombApplied})
	}
	return srcs
}

// read returns the visible samples of one series in [mint, maxt], raw or
// aggregated as q asks.
func (r *seriesReader) read(id uint64, meta *catalog.Series, mint, maxt int64, q *Query) ([]point.Sample, error) {
	if mint = r.seriesMin(id, mint); mint > maxt {
		return nil, nil
	}
	if q.Agg != AggNone {
		r.fin = finished{agg: q.Agg}
		st := accs{b: bucketer{every: q.Every, start: q.Start}, out: r.accOut[:0], bits: r.accBits, finish: &r.fin}
		if err := r.accumulate(id, meta, mint, maxt, q, &st); err != nil {
			return nil, err
		}
		r.accOut, r.accBits = st.out, st.bits
		return finishAccs(st.out, q.Agg, q.Every, r.fin.done), nil
	}
	// Window by window, polling ctx between them, so that cancelling a
	// query over a long series stops within one window of merging.
	srcs, tombs := r.sourcesAndTombs(id, meta, mint, maxt)
	if len(srcs) == 0 {
		return nil, nil
	}
	var out []point.Sample
	lo := mint
	r.ends = r.windowEnds(id, srcs, mint, maxt, r.db.partSamples)
	if len(r.ends) == 1 && segmentOnly(srcs, tombs) {
		if err := r.segmentColumns(srcs[0], mint, maxt); err != nil || r.cols.Len() == 0 {
			return nil, err
		}
		out := r.takeSamples(r.cols.Len())
		r.cols.SamplesInto(out, meta.Kind)
		return out, nil
	}
	for _, hi := range r.ends {
		merged, err := r.mergeSources(id, srcs, tombs, lo, hi)
		if err != nil {
			return nil, err
		}
		if err := r.ctx.Err(); err != nil {
			return nil, err
		}
		if len(r.ends) == 1 {
			out := r.takeSamples(len(merged))
			copy(out, merged)
			return out, nil
		}
		out = append(out, merged...)
		lo = hi + 1
	}
	return out, nil
}

// segmentOnly reports whether one segment holds every visible sample of
// a series, with no tombstone or rollup to apply: its blocks' columns are
// then the samples (segmentColumns), with no merge.
func segmentOnly(srcs []source, tombs []tombstone) bool {
	return len(srcs) == 1 && srcs[0].seg != nil && len(tombs) == 0 && len(srcs[0].idx.Rollups) == 0
}

// segmentColumns decodes into r.cols the samples in [mint, maxt] of
// segment source s.
func (r *seriesReader) segmentColumns(s source, mint, maxt int64) error {
	r.cols.Reset()
	src := r.blockSource(s.seg)
	return segment.AppendColumnsInRange(s.idx, mint, maxt, &r.cols, func(b int, dst *point.Columns) error {
		return r.db.decodeColumns(r.ctx, src, s.idx, b, dst)
	})
}

// slabSamples is the most samples takeSamples allocates at a time: one
// allocation per 8,192 samples (320 KiB) instead of one per series,
// which in a scan of many short series is most of the cost of building
// the result (allocator refills, zeroing in small pieces, GC work).
const slabSamples = 1 << 13

// takeSamples returns a slice of n zeroed samples, of capacity n, for a
// raw result of Query: carved from a slab shared with the next series'
// results, so that a query building many series allocates once per
// slabSamples. A new slab holds n samples for each of the r.slabRest
// series left, at most slabSamples: a query of a few series allocates
// no more than it needs. Only Query uses it, whose results are held
// together: QuerySeq's parts are allocated one by one so that a consumer
// that drops one frees it.
func (r *seriesReader) takeSamples(n int) []point.Sample {
	if n > len(r.slab) {
		size := min(slabSamples, n*max(r.slabRest, 1))
		if n >= slabSamples/4 || size <= n {
			return make([]point.Sample, n)
		}
		r.slab = make([]point.Sample, size)
	}
	out := r.slab[:n:n]
	r.slab = r.slab[n:]
	return out
}

// sourcesAndTombs returns where series id has samples in [mint, maxt] and
// the tombstones that may delete some of them.
func (r *seriesReader) sourcesAndTombs(id uint64, meta *catalog.Series, mint, maxt int64) ([]source, []tombstone) {
	r.key = append(r.key[:0], meta.Key...) // sources keeps no reference to it
	srcs := r.sources(id, r.key, mint, maxt)
	if len(srcs) == 0 {
		return nil, nil
	}
	applied := uint64(math.MaxUint64)
	for _, s := range srcs {
		applied = min(applied, s.tombApplied)
	}
	tombs := r.db.seriesTombstones(id, r.snap.tombstones, applied, nil)
	return srcs, tombs
}

// mergeSources returns the visible samples of one series in [mint, maxt],
// merged from srcs (newest wins) with tombs applied. The result aliases
// r's buffers: it is valid until the next call.
func (r *seriesReader) mergeSources(id uint64, srcs []source, tombs []tombstone, mint, maxt int64) ([]point.Sample, error) {
	for len(r.bufs) < len(srcs) {
		r.bufs = append(r.bufs, nil)
	}
	var merged []point.Sample
	for i, s := range srcs {
		buf := r.bufs[i][:0]
		if s.seg != nil {
			var err error
			if buf, err = r.db.appendRange(r.ctx, r.blockSource(s.seg), s.idx, mint, maxt, buf); err != nil {
				return nil, err
			}
			buf = deleteTombstoned(buf, tombs, s.tombApplied)
			if len(s.idx.Rollups) > 0 && !r.noLasts {
				if buf, err = r.mergeBucketLasts(s, tombs, buf, mint, maxt, r.seriesMin(id, math.MinInt64)); err != nil {
					return nil, err
				}
			}
		} else {
			view := r.snap.memView(s.mem, tombs)
			buf = s.mem.t.Read(id, mint, maxt, &view, buf)
		}
		r.bufs[i] = buf
		if i == 0 {
			merged = buf
			continue
		}
		// Into whichever merge buffer merged does not live in.
		k := 0
		if len(merged) > 0 && len(r.merge[0]) > 0 && &merged[0] == &r.merge[0][0] {
			k = 1
		}
		r.merge[k] = mergeNewer(r.merge[k][:0], merged, buf)
		merged = r.merge[k]
	}
	return merged, nil
}

// accumulate folds the visible samples of one series in [mint, maxt] into
// per-bucket states.
func (r *seriesReader) accumulate(id uint64, meta *catalog.Series, mint, maxt int64, q *Query, st *accs) error {
	if mint = r.seriesMin(id, mint); mint > maxt {
		return nil
	}
	srcs, tombs := r.sourcesAndTombs(id, meta, mint, maxt)
	if len(srcs) == 0 {
		return nil
	}
	if rollupsIn(srcs, mint, maxt) {
		return r.accumulateWithRollups(id, meta, srcs, tombs, mint, maxt, q, st)
	}
	// Aggregate pushdown: no tombstone touches the series, so whole blocks
	// inside a bucket that no other source overlaps use their stats.
	if len(tombs) == 0 && pushdownable(q.Agg) {
		if len(srcs) == 1 && srcs[0].seg != nil {
			return r.aggregateSegment(srcs[0], meta.Kind, mint, maxt, q, st)
		}
		return r.aggregateSources(id, srcs, meta.Kind, mint, maxt, q, st)
	}
	return r.foldMerged(id, srcs, tombs, meta.Kind, mint, maxt, q, st)
}

// foldMerged folds the visible samples of series id in [mint, maxt], merged
// from srcs, into st, window by window, so that a long series is never
// read whole.
func (r *seriesReader) foldMerged(id uint64, srcs []source, tombs []tombstone, kind Kind, mint, maxt int64, q *Query, st *accs) error {
	lo := mint
	r.ends = r.windowEnds(id, srcs, mint, maxt, r.db.partSamples)
	for _, hi := range r.ends {
		merged, err := r.mergeSources(id, srcs, tombs, lo, hi)
		if err != nil {
			return err
		}
		if err := r.ctx.Err(); err != nil {
			return err
		}
		st.addSamples(merged, kind, q.Agg)
		lo = hi + 1
	}
	return nil
}

// mergeNewer appends to out the merge of two time-sorted runs; on equal
// times newer wins. out must not overlap either run.
func mergeNewer(out, older, newer []point.Sample) []point.Sample {
	i, j := 0, 0
	for i < len(older) && j < len(newer) {
		switch a, b := older[i].Time, newer[j].Time; {
		case a < b:
			out = append(out, older[i])
			i++
		case a > b:
			out = append(out, newer[j])
			j++
		default:
			out = append(out, newer[j])
			i++
			j++
		}
	}
	out = append(out, older[i:]...)
	return append(out, newer[j:]...)
}

// inRange returns the time-sorted samples within [mint, maxt].
func inRange(samples []point.Sample, mint, maxt int64) []point.Sample {
	if n := len(samples); n > 0 && (samples[0].Time < mint || samples[n-1].Time > maxt) {
		i, _ := slices.BinarySearchFunc(samples, mint, func(x point.Sample, t int64) int { return cmp.Compare(x.Time, t) })
		j, found := slices.BinarySearchFunc(samples, maxt, func(x point.Sample, t int64) int { return cmp.Compare(x.Time, t) })
		if found {
			j++
		}
		return samples[i:max(i, j)]
	}
	return samples
}

func pushdownable(a Aggregate) bool {
	return a == AggCount || a == AggSum || a == AggMean || a == AggMin || a == AggMax
}

// aggregateSegment aggregates one series of one segment, using block stats
// for blocks that lie wholly inside the range and inside one bucket. With
// Every 0, min and max need the time of the value they pick: a block whose
// min (max) cannot beat the one found so far is skipped, one that can is
// decoded. An int or uint block sum that may have wrapped, or a float block
// without an exact partial sum, is not trusted.
func (r *seriesReader) aggregateSegment(s source, kind Kind, mint, maxt int64, q *Query, st *accs) error {
	buf := r.blockBuf
	defer func() { r.blockBuf = buf }()
	for b := range s.idx.Blocks {
		bm := &s.idx.Blocks[b]
		if bm.MaxTime < mint || bm.MinTime > maxt {
			continue
		}
		if b%checkContextEvery == 0 {
			// Blocks answered from their stats alone are cheap; decoded
			// ones are checked one by one in decodeBlock.
			if err := r.ctx.Err(); err != nil {
				return err
			}
		}
		if bm.MinTime >= mint && bm.MaxTime <= maxt && st.b.bucket(bm.MinTime) == st.b.bucket(bm.MaxTime) {
			a := st.at(bm.MinTime)
			use := true
			switch q.Agg {
			case AggSum, AggMean:
				// A float block's exact partial merges to the same bits
				// as its samples; a block of an older format without one
				// is decoded.
				use = blockSumExact(bm, kind)
			case AggMin, AggMax:
				if q.Every == 0 {
					use = false
					if a.hasNum && ((q.Agg == AggMin && cmpNum(bm.Min, a.min) >= 0) || (q.Agg == AggMax && cmpNum(bm.Max, a.max) <= 0)) {
						// Cannot beat the value held, which is earlier.
						a.count += int64(bm.Count)
						r.db.st.blocksPushedDown.Add(1)
						continue
					}
				}
			}
			if use {
				a.addBlock(bm, kind, q.Agg == AggMin || q.Agg == AggMax)
				r.db.st.blocksPushedDown.Add(1)
				continue
			}
		}
		var err error
		buf, err = r.db.decodeBlock(r.ctx, r.blockSource(s.seg), s.idx, b, buf[:0])
		if err != nil {
			return err
		}
		st.addSamples(inRange(buf, mint, maxt), kind, q.Agg)
	}
	return nil
}
