package engine

// Visibility: what a reader sees.
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

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/stratadb/strata/compaction"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/memtable"
)

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
	db.mu.v.ref()
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

// applyDeleteToMem removes from t the samples sel selects that t holds now:
// recovery replays a delete this way, in WAL order, with no reader yet.
func (db *DB) applyDeleteToMem(t *memtable.Table, sel *Selector) {
	db.cat.mu.RLock()
	ids := db.cat.match(sel)
	db.cat.mu.RUnlock()
	mint, maxt := sel.TimeRange()
	for _, id := range ids {
		t.Delete(id, mint, maxt)
	}
}

// reclaimDeleted frees the memtable samples the delete with sequence number
// seq hides, once no reader reads as of an older sequence number (readers
// that start later mask them anyway). With an older reader live, they stay
// masked until the flush drops them.
// A cancelled ctx stops it: what it leaves stays masked.
func (db *DB) reclaimDeleted(ctx context.Context, sel *Selector, seq uint64) {
	if db.vis.oldest() < seq {
		return
	}
	db.mu.Lock()
	mems := append(slices.Clone(db.mu.imm), db.mu.mem)
	db.mu.Unlock()
	db.cat.mu.RLock()
	ids := db.cat.match(sel)
	db.cat.mu.RUnlock()
	mint, maxt := sel.TimeRange()
	for _, m := range mems {
		for i, id := range ids {
			if i%checkContextEvery == 0 && ctx.Err() != nil {
				return
			}
			m.t.DeleteBefore(id, mint, maxt, seq)
		}
	}
}

// memSamples appends to buf the samples of series id in [mint, maxt] that
// snapshot s sees in memtable m: as of s.asOf, without what its tombstones
// delete. Every read of a memtable goes through a view like this one.
func (db *DB) memSamples(s *snapshot, m *memRef, id uint64, mint, maxt int64, buf []point.Sample) []point.Sample {
	db.cat.mu.RLock()
	tombs := db.seriesTombstones(id, s.tombstones, m.tombApplied, nil)
	db.cat.mu.RUnlock()
	view := s.memView(m, tombs)
	return m.t.Read(id, mint, maxt, &view, buf)
}

// tombstonesAsOf returns the tombstones with seq <= asOf; tombs is never
// modified in place (Delete appends to a clipped copy), so it may be shared.
func tombstonesAsOf(tombs []tombstone, asOf uint64) []tombstone {
	for i, t := range tombs {
		if t.seq > asOf {
			out := slices.Clone(tombs[:i])
			for _, u := range tombs[i+1:] {
				if u.seq <= asOf {
					out = append(out, u)
				}
			}
			return out
		}
	}
	return tombs
}

// seriesTombstones appends to dst the tombstones of tombs, above applied,
// that select series id. The caller holds db.cat.mu for reading.
func (db *DB) seriesTombstones(id uint64, tombs []tombstone, applied uint64, dst []tombstone) []tombstone {
	for _, t := range tombs {
		if t.seq > applied && db.cat.matches(id, &t.sel) {
			dst = append(dst, t)
		}
	}
	return dst
}

// masks converts the tombstones of one series above applied into memtable
// masks, appended to dst.
func masks(tombs []tombstone, applied uint64, dst []memtable.Mask) []memtable.Mask {
	for _, t := range tombs {
		if t.seq > applied {
			mint, maxt := t.sel.TimeRange()
			dst = append(dst, memtable.Mask{Seq: t.seq, Min: mint, Max: maxt})
		}
	}
	return dst
}

// deleteTombstoned removes from samples, read from a segment that has
// applied the tombstones up to applied, what the tombstones of its series
// above that delete: every sample in their ranges, since all of the
// segment's data was written before them.
func deleteTombstoned(samples []point.Sample, tombs []tombstone, applied uint64) []point.Sample {
	for i := range tombs {
		t := &tombs[i]
		if t.seq <= applied || len(samples) == 0 {
			continue
		}
		samples = slices.DeleteFunc(samples, func(s point.Sample) bool { return t.sel.Covers(s.Time) })
	}
	return samples
}

// pendingTombstone returns the lowest seq among tombs, above what h has
// applied, of a tombstone that may delete data in h; math.MaxUint64 when
// none can.
func (db *DB) pendingTombstone(h *segHandle, tombs []tombstone) uint64 {
	applied := h.tombApplied.Load()
	lowest := uint64(math.MaxUint64)
	for i := range tombs {
		t := &tombs[i]
		if t.seq > applied && t.seq < lowest && db.tombstoneAffects(h, t) {
			lowest = t.seq
		}
	}
	return lowest
}

// maxAffectCheck bounds how many selected series tombstoneAffects looks up
// in a segment; past it a tombstone is taken to affect every segment whose
// time range it overlaps.
const maxAffectCheck = 4096

// tombstoneAffects reports whether t may delete samples of h: it overlaps
// h's time range and selects a series that h holds in that range. Series
// created after the delete match too, which only makes the answer
// conservative.
func (db *DB) tombstoneAffects(h *segHandle, t *tombstone) bool {
	tmin, tmax := t.sel.TimeRange()
	if tmax < h.meta.MinTime || tmin > h.meta.MaxTime {
		return false
	}
	db.cat.mu.RLock()
	ids := db.cat.match(&t.sel)
	if len(ids) > maxAffectCheck {
		db.cat.mu.RUnlock()
		return true
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = db.cat.series[id].key
	}
	db.cat.mu.RUnlock()
	for _, key := range keys {
		if key < string(h.meta.FirstKey) || key > string(h.meta.LastKey) {
			continue
		}
		if idx, ok := h.r.Find([]byte(key)); ok && idx.MinTime() <= tmax && idx.MaxTime() >= tmin {
			return true
		}
	}
	return false
}

// dropFunc returns the ranges the tombstones newer than applied delete from
// a series, for compaction.
func (db *DB) dropFunc(applied uint64, tombs []tombstone) func(key []byte) []compaction.TimeRange {
	var live []tombstone
	for _, t := range tombs {
		if t.seq > applied {
			live = append(live, t)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return func(key []byte) []compaction.TimeRange {
		db.cat.mu.RLock()
		defer db.cat.mu.RUnlock()
		id, ok := db.cat.lookup(string(key))
		if !ok {
			return nil
		}
		var out []compaction.TimeRange
		for _, t := range live {
			if db.cat.matches(id, &t.sel) {
				tmin, tmax := t.sel.TimeRange()
				out = append(out, compaction.TimeRange{Min: tmin, Max: tmax})
			}
		}
		return out
	}
}

// raiseTombApplied raises the tombApplied mark of every segment of levels
// that no tombstone of tombs above its mark affects, so those tombstones can
// be dropped without rewriting data. It returns the least mark: tombstones
// at or below it are applied to every segment.
func (db *DB) raiseTombApplied(levels *[maxLevels][]*segHandle, tombs []tombstone) uint64 {
	var maxSeq uint64
	for _, t := range tombs {
		maxSeq = max(maxSeq, t.seq)
	}
	segOldest := uint64(math.MaxUint64)
	for _, level := range levels {
		for _, h := range level {
			if h.tombApplied.Load() < maxSeq {
				target := maxSeq
				if p := db.pendingTombstone(h, tombs); p != math.MaxUint64 {
					target = p - 1
				}
				if target > h.tombApplied.Load() {
					h.tombApplied.Store(target)
				}
			}
			segOldest = min(segOldest, h.tombApplied.Load())
		}
	}
	return segOldest
}

// pruneTombstones returns tombs without those every source has applied:
// each segment (segOldest, see raiseTombApplied) and every memtable, which
// may hold samples written before a tombstone above its tombApplied.
// mems lists the memtables; the caller holds db.mu.
func pruneTombstones(tombs []tombstone, segOldest uint64, mems []*memRef) []tombstone {
	oldest := segOldest
	for _, m := range mems {
		if m.t.Len() == 0 {
			continue // any sample it will hold is newer than every tombstone
		}
		base, _ := m.t.Base()
		oldest = min(oldest, max(m.tombApplied, base))
	}
	return slices.DeleteFunc(slices.Clone(tombs), func(t tombstone) bool { return t.seq <= oldest })
}
