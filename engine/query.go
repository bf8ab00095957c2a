package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/segment"
)

// checkContextEvery is how many series a query reads between ctx checks.
const checkContextEvery = 128

// Query returns the series q selects, sorted by canonical series key, each
// with its samples (or per-bucket aggregates) sorted by time. A series with
// no sample in range is left out.
//
// Integer sums are exact: an AggSum of int samples whose true sum lies
// outside the int64 range saturates at math.MaxInt64 or math.MinInt64, and
// one of uint samples at math.MaxUint64, never wrapping; AggMean of ints
// and uints is the exact sum divided by the count, correctly rounded to
// float64. Float sums and means add the samples in time order. Every
// aggregate gives the same answer, bit for bit, whether the samples are in
// memtables, segments (block stats included), compacted or reopened.
func (db *DB) Query(ctx context.Context, q Query) ([]Series, error) {
	if err := validateQuery(&q); err != nil {
		return nil, err
	}
	if err := db.checkOpen(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	snap, err := db.acquireSnapshot()
	if err != nil {
		return nil, err
	}
	defer db.releaseSnapshot(snap)
	if hook := db.testAfterQuerySnapshot; hook != nil {
		hook()
	}

	// Visible range, inclusive: [mint, maxt].
	mint, maxt := max(q.Start, db.retentionCutoff()), q.End-1
	if mint > maxt {
		return nil, nil
	}

	db.cat.mu.RLock()
	ids := db.cat.match(&q.Selector)
	metas := make([]seriesMeta, len(ids))
	for i, id := range ids {
		metas[i] = db.cat.series[id]
	}
	db.cat.mu.RUnlock()
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(metas[a].key, metas[b].key) })

	r := seriesReader{db: db, snap: snap}
	var out []Series
	for n, i := range order {
		if n%checkContextEvery == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		meta := &metas[i]
		if q.Agg != AggNone && q.Agg != AggCount && q.Agg != AggFirst && q.Agg != AggLast && !meta.kind.Numeric() {
			continue // sum, mean, min and max apply to numbers only
		}
		samples, err := r.read(ids[i], meta, mint, maxt, &q)
		if err != nil {
			return nil, err
		}
		if len(samples) == 0 {
			continue
		}
		out = append(out, Series{
			Measurement: meta.set.measurement,
			Tags:        slices.Clone(meta.set.tags),
			Field:       meta.field,
			Samples:     samples,
		})
	}
	return out, nil
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
	return nil
}

// seriesReader reads one series at a time from a snapshot.
type seriesReader struct {
	db       *DB
	snap     *snapshot
	bufs     [][]point.Sample // per source, reused across series
	blockBuf []point.Sample   // one decoded block, reused
}

// source is one place a series' samples may live, and how far tombstones
// are applied to it: for a segment, those at or below tombApplied are
// applied; a memtable holds no sample written before tombApplied.
type source struct {
	seg         *segHandle
	idx         *segment.SeriesIndex
	mem         *memRef
	tombApplied uint64
}

// sources lists where series key may have samples, oldest first: deeper
// levels, then L0 in flush order, then sealed memtables, then the active one.
func (r *seriesReader) sources(id uint64, key []byte, mint, maxt int64) []source {
	var srcs []source
	v := r.snap.v
	for l := maxLevels - 1; l >= 0; l-- {
		for _, h := range v.levels[l] {
			if h.meta.MaxTime < mint || h.meta.MinTime > maxt {
				continue
			}
			if l > 0 && (string(key) < string(h.meta.FirstKey) || string(key) > string(h.meta.LastKey)) {
				continue
			}
			idx, ok := h.r.Find(key)
			if !ok {
				continue
			}
			srcs = append(srcs, source{seg: h, idx: idx, tombApplied: h.tombApplied.Load()})
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
func (r *seriesReader) read(id uint64, meta *seriesMeta, mint, maxt int64, q *Query) ([]point.Sample, error) {
	key := []byte(meta.key)
	srcs := r.sources(id, key, mint, maxt)
	if len(srcs) == 0 {
		return nil, nil
	}
	applied := uint64(math.MaxUint64)
	for _, s := range srcs {
		applied = min(applied, s.tombApplied)
	}
	r.db.cat.mu.RLock()
	tombs := r.db.seriesTombstones(id, r.snap.tombstones, applied, nil)
	r.db.cat.mu.RUnlock()

	// Aggregate pushdown: one segment alone holds the series and no
	// tombstone touches it, so whole blocks inside a bucket use their stats.
	if len(srcs) == 1 && srcs[0].seg != nil && len(tombs) == 0 && pushdownable(q.Agg) {
		return r.aggregateSegment(srcs[0], meta.kind, mint, maxt, q)
	}

	for len(r.bufs) < len(srcs) {
		r.bufs = append(r.bufs, nil)
	}
	var merged []point.Sample
	for i, s := range srcs {
		buf := r.bufs[i][:0]
		if s.seg != nil {
			it := s.seg.r.Iter(s.idx, mint, maxt)
			for it.Next() {
				buf = append(buf, it.At())
			}
			if err := it.Close(); err != nil {
				return nil, err
			}
			buf = deleteTombstoned(buf, tombs, s.tombApplied)
		} else {
			view := r.snap.memView(s.mem, tombs)
			buf = s.mem.t.Read(id, mint, maxt, &view, buf)
		}
		r.bufs[i] = buf
		if i == 0 {
			merged = buf
		} else {
			merged = mergeNewer(merged, buf)
		}
	}
	if q.Agg == AggNone {
		return slices.Clone(merged), nil
	}
	var a aggregator
	a.init(q, meta.kind)
	for _, s := range merged {
		a.add(s)
	}
	return a.finish(), nil
}

// mergeNewer merges two time-sorted runs; on equal times newer wins.
func mergeNewer(older, newer []point.Sample) []point.Sample {
	if len(older) == 0 {
		return newer
	}
	if len(newer) == 0 {
		return older
	}
	out := make([]point.Sample, 0, len(older)+len(newer))
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

func pushdownable(a Aggregate) bool {
	return a == AggCount || a == AggSum || a == AggMean || a == AggMin || a == AggMax
}

// aggregateSegment aggregates one series of one segment, using block stats
// for blocks that lie wholly inside the range and inside one bucket.
func (r *seriesReader) aggregateSegment(s source, kind Kind, mint, maxt int64, q *Query) ([]point.Sample, error) {
	var a aggregator
	a.init(q, kind)
	buf := r.blockBuf
	defer func() { r.blockBuf = buf }()
	for b := range s.idx.Blocks {
		bm := &s.idx.Blocks[b]
		if bm.MaxTime < mint || bm.MinTime > maxt {
			continue
		}
		if bm.MinTime >= mint && bm.MaxTime <= maxt && a.bucket(bm.MinTime) == a.bucket(bm.MaxTime) && a.addBlock(bm) {
			r.db.st.blocksPushedDown.Add(1)
			continue
		}
		var err error
		buf, err = s.seg.r.ReadBlock(s.idx, b, buf[:0])
		if err != nil {
			return nil, err
		}
		for _, smp := range buf {
			if smp.Time >= mint && smp.Time <= maxt {
				a.add(smp)
			}
		}
	}
	return a.finish(), nil
}

// aggregator folds time-ordered samples (or whole blocks) into buckets.
type aggregator struct {
	agg    Aggregate
	kind   Kind
	every  int64
	start  int64
	out    []point.Sample
	has    bool
	cur    int64 // bucket start
	count  int64
	sumF   float64 // float sum, added in time order
	sumI   int128  // exact int and uint sum
	min    point.Value
	max    point.Value
	first  point.Value
	last   point.Value
	minSet bool
}

func (a *aggregator) init(q *Query, kind Kind) {
	*a = aggregator{agg: q.Agg, kind: kind, every: q.Every, start: q.Start}
}

// bucket returns the start of the bucket t falls in: epoch-aligned with
// flooring for negative t, or the query start when Every is 0.
func (a *aggregator) bucket(t int64) int64 {
	if a.every == 0 {
		return a.start
	}
	m := t % a.every
	if m < 0 {
		m += a.every
	}
	if t < math.MinInt64+m {
		return math.MinInt64 // the bucket starts below the int64 range: clamp
	}
	return t - m
}

func (a *aggregator) roll(b int64) {
	if a.has && b != a.cur {
		a.emit()
	}
	if !a.has || b != a.cur {
		a.has, a.cur = true, b
		a.count, a.sumF, a.sumI, a.minSet = 0, 0, int128{}, false
	}
}

func less(kind Kind, x, y point.Value) bool {
	switch kind {
	case KindFloat:
		return x.Float() < y.Float()
	case KindInt:
		return x.Int() < y.Int()
	case KindUint:
		return x.Uint() < y.Uint()
	}
	return false
}

func (a *aggregator) add(s point.Sample) {
	a.roll(a.bucket(s.Time))
	if a.count == 0 {
		a.first = s.Value
	}
	a.last = s.Value
	var sum int128
	switch a.kind {
	case KindInt:
		sum.addInt(s.Value.Int())
	case KindUint:
		sum.addUint(s.Value.Uint())
	}
	a.fold(1, s.Value, sum, s.Value, s.Value)
}

// addBlock folds a whole block's stats, the block lying in one bucket, and
// reports whether it could. It cannot for a float sum or mean (a block's
// stored float sum was added in another order than the samples one by one,
// and every path must give the same answer), nor for an integer sum that
// the block's stats do not determine (see blockSum): the caller then
// decodes the block.
func (a *aggregator) addBlock(b *segment.BlockMeta) bool {
	var sum int128
	if a.agg == AggSum || a.agg == AggMean {
		var ok bool
		if sum, ok = blockSum(a.kind, b); !ok {
			return false
		}
	}
	a.roll(a.bucket(b.MinTime))
	a.fold(int64(b.Count), b.Sum, sum, b.Min, b.Max)
	return true
}

// fold adds n samples whose sum (sumF for floats, sumI exact for ints and
// uints), min and max are given to the bucket.
func (a *aggregator) fold(n int64, sumF point.Value, sumI int128, mn, mx point.Value) {
	a.count += n
	if !a.kind.Numeric() {
		return
	}
	switch a.kind {
	case KindFloat:
		a.sumF += sumF.Float()
	case KindInt, KindUint:
		a.sumI.add(sumI)
	}
	if !a.minSet || less(a.kind, mn, a.min) {
		a.min = mn
	}
	if !a.minSet || less(a.kind, a.max, mx) {
		a.max = mx
	}
	a.minSet = true
}

func (a *aggregator) emit() {
	if a.count == 0 {
		return
	}
	var v point.Value
	switch a.agg {
	case AggCount:
		v = point.Int(a.count)
	case AggSum:
		switch a.kind {
		case KindFloat:
			v = point.Float(a.sumF)
		case KindInt:
			v = point.Int(a.sumI.saturateInt())
		case KindUint:
			v = point.Uint(a.sumI.saturateUint())
		}
	case AggMean:
		if a.kind == KindFloat {
			v = point.Float(a.sumF / float64(a.count))
		} else {
			v = point.Float(a.sumI.float64() / float64(a.count))
		}
	case AggMin:
		v = a.min
	case AggMax:
		v = a.max
	case AggFirst:
		v = a.first
	case AggLast:
		v = a.last
	}
	a.out = append(a.out, point.Sample{Time: a.cur, Value: v})
}

func (a *aggregator) finish() []point.Sample {
	if a.has {
		a.emit()
	}
	return a.out
}
