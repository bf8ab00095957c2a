package engine

import (
	"context"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/stratadb/strata/internal/catalog"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/memtable"
	"github.com/stratadb/strata/segment"
)

// The read view: what a reader sees.
//
// Every Write and Delete takes the next sequence number under the commit
// lock, is logged in the WAL and applied (a write's samples to the active
// memtable, tagged with its sequence number; a delete's tombstone to the
// tombstone list), and only then, once its WAL record is durable as the
// sync mode asks, is it resolved: published, or, when the WAL refused it,
// undone (its samples dropped, its tombstone removed) before anyone can see
// it. published is the highest sequence number at or below which every
// operation is resolved; Write and Delete return only once published has
// reached theirs, so a caller reads its own writes.
//
// A reader (query, flush, compaction) works as of one sequence number asOf
// taken with its snapshot: memtable samples above asOf are invisible, and
// so are tombstones above it, so each Write and Delete is seen whole or not
// at all by the reader. A tombstone with sequence number d hides the
// samples of its series and range written before d: in a memtable, those
// with a lower sequence number (a mask: see memtable.View); in a segment,
// all of them unless the segment has applied d already (tombApplied >= d),
// because everything in a segment was written before any tombstone it has
// not applied.
//
// Retention hides samples older than now minus Retention. Compaction drops
// them physically, and a dropped sample may have shadowed an older value of
// the same (series, time) in a segment the compaction did not touch; so
// every compaction that applies a cutoff raises the expiry floor to it,
// persisted in the manifest, and samples older than the floor stay
// invisible for good: moving the clock back or raising Retention never
// brings an overwritten value back.
//
// This file holds the read view: the sequence numbers (seqVisibility), the
// snapshot a reader takes, and the per-query checker (visibility) that the
// metadata calls and Last use to tell which series have a visible sample.
// The tombstone rules are in tombstone.go.

// seqVisibility publishes sequence numbers and tracks the readers' ones.
type seqVisibility struct {
	published atomic.Uint64
	// floor: samples with a time below it are gone for good (see above);
	// math.MinInt64 until a compaction applies a retention cutoff.
	floor atomic.Int64

	mu      sync.Mutex
	cond    *sync.Cond
	done    []uint64       // resolved sequence numbers above published, ascending
	waiting int            // goroutines in wait
	readers map[uint64]int // live readers by asOf
}

// start sets the state of a freshly opened DB: every sequence number up to
// last is resolved.
func (v *seqVisibility) start(last uint64, floor int64) {
	v.published.Store(last)
	v.floor.Store(floor)
}

// resolve marks seq resolved: its operation is visible, or undone. The
// caller has undone a failed operation before resolving it.
func (v *seqVisibility) resolve(seq uint64) {
	v.mu.Lock()
	p := v.published.Load()
	if seq == p+1 {
		p = seq
		for len(v.done) > 0 && v.done[0] == p+1 {
			p = v.done[0]
			v.done = v.done[1:]
		}
		v.published.Store(p)
		if v.waiting > 0 {
			v.cond.Broadcast()
		}
	} else if seq > p {
		i, _ := slices.BinarySearch(v.done, seq)
		v.done = slices.Insert(v.done, i, seq)
	}
	v.mu.Unlock()
}

// wait returns once every sequence number up to seq is resolved.
func (v *seqVisibility) wait(seq uint64) {
	if v.published.Load() >= seq {
		return
	}
	v.mu.Lock()
	if v.cond == nil {
		v.cond = sync.NewCond(&v.mu)
	}
	v.waiting++
	for v.published.Load() < seq {
		v.cond.Wait()
	}
	v.waiting--
	v.mu.Unlock()
}

// acquire registers a reader as of the current published sequence number
// and returns it, with the oldest sequence number any live reader reads as
// of (see memtable.View.Oldest).
func (v *seqVisibility) acquire() (asOf, oldest uint64) {
	v.mu.Lock()
	asOf = v.published.Load()
	if v.readers == nil {
		v.readers = make(map[uint64]int)
	}
	v.readers[asOf]++
	oldest = v.oldestLocked()
	v.mu.Unlock()
	return asOf, oldest
}

func (v *seqVisibility) release(asOf uint64) {
	v.mu.Lock()
	if v.readers[asOf]--; v.readers[asOf] <= 0 {
		delete(v.readers, asOf)
	}
	v.mu.Unlock()
}

// oldest returns the oldest sequence number a reader reads as of, or the
// published one when no reader is live. A reader that starts later reads
// as of a newer one.
func (v *seqVisibility) oldest() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.oldestLocked()
}

func (v *seqVisibility) oldestLocked() uint64 {
	o := v.published.Load()
	for s := range v.readers {
		o = min(o, s)
	}
	return o
}

// raiseFloor raises the expiry floor to cutoff and returns the new floor.
func (v *seqVisibility) raiseFloor(cutoff int64) int64 {
	for {
		f := v.floor.Load()
		if cutoff <= f || v.floor.CompareAndSwap(f, cutoff) {
			return max(f, cutoff)
		}
	}
}

// snapshot is what one reader reads: a version, the memtables of the same
// instant, and the tombstones, all as of one sequence number.
type snapshot struct {
	v          *version
	imm        []*memRef
	mem        *memRef
	tombstones []tombstone // those at or below asOf
	asOf       uint64
	oldest     uint64 // no live reader reads as of an older sequence number
}

func (db *DB) acquireSnapshot() (*snapshot, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.mu.v == nil {
		return nil, ErrClosed
	}
	db.mu.v.Ref()
	// Under mu, so that every tombstone at or below asOf is in the list
	// (tombstones are added under mu before they are published) and none
	// the version's segments need is pruned yet.
	asOf, oldest := db.vis.acquire()
	return &snapshot{v: db.mu.v, imm: slices.Clone(db.mu.imm), mem: db.mu.mem,
		tombstones: tombstonesAsOf(db.mu.tombstones, asOf), asOf: asOf, oldest: oldest}, nil
}

func (db *DB) releaseSnapshot(s *snapshot) {
	db.vis.release(s.asOf)
	db.unrefVersion(s.v)
}

// memView returns the view of memtable m for one series whose tombstones
// are tombs: as of s.asOf, with a mask for every tombstone that m may hold
// samples under.
func (s *snapshot) memView(m *memRef, tombs []tombstone) memtable.View {
	return memtable.View{AsOf: s.asOf, Oldest: s.oldest, Masks: masks(tombs, m.tombApplied, nil)}
}

// memSamples appends to buf the samples of series id in [mint, maxt] that
// snapshot s sees in memtable m: as of s.asOf, without what its tombstones
// delete. Every read of a memtable goes through a view like this one.
func (db *DB) memSamples(s *snapshot, m *memRef, id uint64, mint, maxt int64, buf []point.Sample) []point.Sample {
	tombs := db.seriesTombstones(id, s.tombstones, m.tombApplied, nil)
	view := s.memView(m, tombs)
	return m.t.Read(id, mint, maxt, &view, buf)
}

// beginRead starts a read of s (a query or a metadata call): it checks
// that db is open and ctx is live, takes a snapshot, and returns it with
// the part of s's range the read sees, inclusive, retention applied, and
// the cutoffs it applied. snap is nil, and err nil too, when nothing of the
// range is visible; otherwise the caller releases snap.
func (db *DB) beginRead(ctx context.Context, s *Selector) (snap *snapshot, mint, maxt int64, cuts *cutoffs, err error) {
	if err := db.checkOpen(); err != nil {
		return nil, 0, 0, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, 0, nil, err
	}
	if snap, err = db.acquireSnapshot(); err != nil {
		return nil, 0, 0, nil, err
	}
	if hook := db.testAfterReadSnapshot; hook != nil {
		hook()
	}
	mint, maxt = s.TimeRange()
	cuts = db.cutoffs()
	if mint = max(mint, cuts.base); mint > maxt {
		db.releaseSnapshot(snap)
		return nil, 0, 0, nil, nil
	}
	if err := loadIndexes(snap.v, mint, maxt); err != nil {
		db.releaseSnapshot(snap)
		return nil, 0, 0, nil, err
	}
	return snap, mint, maxt, cuts, nil
}

// loadIndexes loads the index of every segment of v with samples in
// [mint, maxt], the segments a read of that range may look up series in.
// Flushes and compactions open their outputs without it
// (segment.OpenLazy), so that a segment nothing reads costs no memory for
// its index; the first read that needs one loads it here, where a damaged
// index fails the read with a corruption error.
//
// Several indexes load on every core: after an insert of 1M series that
// flushed seven times, the first read loads seven indexes of 440,000
// series, a quarter of a second each.
func loadIndexes(v *version, mint, maxt int64) error {
	var todo []*segment.Reader
	for _, level := range v.Levels {
		for _, h := range level {
			if h.Meta.MaxTime >= mint && h.Meta.MinTime <= maxt && !h.Reader.Loaded() {
				todo = append(todo, h.Reader)
			}
		}
	}
	if len(todo) <= 1 {
		for _, r := range todo {
			return r.Load()
		}
		return nil
	}
	errs := make([]error, len(todo))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(todo)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(todo); i = int(next.Add(1) - 1) {
				errs[i] = todo[i].Load()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// withVisibility validates s, takes a snapshot and runs f with a
// visibility checker over s's range (retention applied).
func (db *DB) withVisibility(ctx context.Context, s *Selector, f func(v *visibility) error) error {
	if err := validateMetaSelector(s); err != nil {
		return err
	}
	ms, err := catalog.CompileSelector(s)
	if err != nil {
		return err
	}
	snap, mint, maxt, cuts, err := db.beginRead(ctx, s)
	if snap == nil {
		return err
	}
	defer db.releaseSnapshot(snap)
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
	ms         []catalog.Matcher
	buf        []point.Sample
	spans      []memtable.Span
	ranges     []timeRange
	idx        []int32  // indexOf's map
	idxFor     []uint64 // the ids idx was built for
	cuts       *cutoffs // retention per series (rules.go); nil: mint only
}

// lo returns the oldest visible time of series id: mint, or its retention
// cutoff when later.
func (v *visibility) lo(id uint64) int64 {
	return max(v.mint, v.cut(id))
}

// cut returns the retention cutoff of series id: a rolled-up bucket that
// starts before it is hidden whole.
func (v *visibility) cut(id uint64) int64 {
	if v.cuts == nil {
		return math.MinInt64
	}
	return v.cuts.of(v.db, id)
}

// allFrom reports whether every series' samples at or after t are inside
// its retention: no series has a cutoff above t.
func (v *visibility) allFrom(t int64) bool {
	return t >= v.mint && (v.cuts == nil || t >= v.cuts.top())
}

func newVisibility(db *DB, snap *snapshot, mint, maxt int64) *visibility {
	v := &visibility{ctx: context.Background(), db: db, snap: snap, mint: mint, maxt: maxt}
	for i := range snap.tombstones {
		t := &snap.tombstones[i]
		ms, ok := catalog.CompileStoredSelector(&t.sel)
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
func (v *visibility) selected(extra *catalog.Matcher) ([]uint64, error) {
	ms := v.ms
	if extra != nil {
		ms = append(slices.Clip(ms), *extra)
	}
	ids := v.db.cat.MatchCompiled(v.sel, ms)
	return v.filter(ids)
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
	for l := range v.snap.v.Levels {
		for _, h := range v.snap.v.Levels[l] {
			if left == 0 {
				break
			}
			if h.Meta.MaxTime < v.mint || h.Meta.MinTime > v.maxt {
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
	applied := h.TombApplied.Load()
	anyTomb := v.hasTombsAbove(applied)
	marked := 0
	if !anyTomb && h.Meta.Samples > 0 && v.allFrom(h.Meta.MinTime) && h.Meta.MaxTime <= v.maxt {
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
			ranges = v.tombRanges(ids[i], applied)
		}
		ok, err := v.segVisible(h, si, ranges, v.lo(ids[i]), v.cut(ids[i]))
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
// do not delete, from block time ranges where they decide; cut is the
// series' retention cutoff (for its buckets).
func (v *visibility) segVisible(h *segHandle, si *segment.SeriesIndex, ranges []timeRange, mint, cut int64) (bool, error) {
	if len(si.Blocks)+len(si.Rollups) == 0 || si.MaxTime() < mint || si.MinTime() > v.maxt {
		return false, nil
	}
	if vis, err := v.bucketVisible(h, si, ranges, mint, cut); vis || err != nil {
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
		v.buf, err = v.db.decodeBlock(v.ctx, h.Reader, si, b, v.buf[:0])
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
	if m.t.SeriesLen(id) <= v.db.partSamples {
		v.buf = v.db.memSamples(v.snap, m, id, mint, v.maxt, v.buf[:0])
		return len(v.buf) > 0, nil
	}
	v.spans = m.t.Spans(id, mint, v.maxt, v.snap.oldest, v.spans[:0])
	from, n := mint, 0
	for i, sp := range v.spans {
		if n += sp.Count; n < v.db.partSamples && i < len(v.spans)-1 {
			continue
		}
		if err := v.ctx.Err(); err != nil {
			return false, err
		}
		v.buf = v.db.memSamples(v.snap, m, id, from, sp.MaxTime, v.buf[:0])
		if len(v.buf) > 0 {
			return true, nil
		}
		if sp.MaxTime == math.MaxInt64 {
			// The window reached the end of time; the spans left hold
			// versions of that last sample only (and MaxTime+1 would
			// wrap to the start of time, below mint).
			break
		}
		from, n = sp.MaxTime+1, 0
	}
	return false, nil
}

// segSeriesIDs returns the catalog ids of h's series in segment (key)
// order. ok is false when some series is unknown to the catalog (then
// callers look keys up).
func (db *DB) segSeriesIDs(h *segHandle) ([]uint64, bool) {
	if h.Reader.Load() != nil {
		return nil, false // a read of h reports the error (loadIndexes)
	}
	return h.IDs.Get(func() ([]uint64, bool) {
		return db.cat.LookupKeys(h.Reader.NumSeries(), h.Reader.Key)
	})
}

// eachSeriesID calls f(i) for every ids[i] that segment h holds, like
// eachSeries but without decoding index entries when the segment's ids by
// position are known.
func (v *visibility) eachSeriesID(h *segHandle, ids []uint64, skip func(i int) bool, f func(i int)) error {
	if len(ids)*16 >= h.Reader.NumSeries() {
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
	ok := len(ids)*16 >= h.Reader.NumSeries()
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
			m, _ := v.db.cat.Meta(id)
			key := m.Key
			if key < string(h.Meta.FirstKey) || key > string(h.Meta.LastKey) {
				continue
			}
			if si, found := h.Reader.Find([]byte(key)); found {
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
		if err := f(int(i), h.Reader.SeriesInto(pos, &si)); err != nil {
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

// memNewest leaves in v.buf the visible samples of id in memtable m of the
// newest window of [mint, maxt] that has one (none when no window has):
// a long series is read window by window from its end (about PartSamples
// samples each, polling ctx between them).
func (v *visibility) memNewest(m *memRef, id uint64, mint int64) error {
	if m.t.SeriesLen(id) <= v.db.partSamples {
		v.buf = v.db.memSamples(v.snap, m, id, mint, v.maxt, v.buf[:0])
		return nil
	}
	v.spans = m.t.Spans(id, mint, v.maxt, v.snap.oldest, v.spans[:0])
	to, n := v.maxt, 0
	for i := len(v.spans) - 1; i >= 0; i-- {
		// A span before this one that ends at math.MaxInt64 holds versions
		// of the same last sample: read them in one window (MaxTime+1
		// would wrap to the start of time, below mint).
		if n += v.spans[i].Count; i > 0 && (n < v.db.partSamples || v.spans[i-1].MaxTime == math.MaxInt64) {
			continue
		}
		if err := v.ctx.Err(); err != nil {
			return err
		}
		from := mint
		if i > 0 {
			from = v.spans[i-1].MaxTime + 1
		}
		v.buf = v.db.memSamples(v.snap, m, id, from, to, v.buf[:0])
		if len(v.buf) > 0 {
			return nil
		}
		to, n = from-1, 0
	}
	v.buf = v.buf[:0]
	return nil
}
