package engine

import (
	"context"
	"math"
	"slices"

	"github.com/stratadb/strata/compaction"
	"github.com/stratadb/strata/internal/catalog"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/memtable"
)

// Tombstones: what a Delete hides, and when it can be forgotten.
//
// A Delete adds a tombstone (its sequence number and selector) to the live
// list, persisted in the manifest. It hides the samples it selects written
// before it (see readview.go): memtable samples through masks, segment
// samples unless the segment's tombApplied mark has reached it. Compaction
// drops the samples a tombstone deletes from the segments it rewrites
// (dropFunc), raises the mark of segments it cannot affect
// (raiseTombApplied), and a tombstone every source has applied is dropped
// from the list (pruneTombstones).

// tombstone is one Delete: its sequence number and what it selects, as
// the manifest and the WAL record it.
type tombstone struct {
	seq uint64
	sel Selector // Start, End half-open
}

// ctomb is a tombstone with its matchers compiled once.
type ctomb struct {
	seq        uint64
	sel        *Selector
	ms         []catalog.Matcher
	ok         bool
	mint, maxt int64
}

type timeRange struct{ mint, maxt int64 }

// tombRanges returns the ranges that tombstones newer than applied delete
// from series id.
func (v *visibility) tombRanges(id uint64, applied uint64) []timeRange {
	v.ranges = v.appendTombRanges(v.ranges[:0], id, applied)
	return v.ranges
}

// appendTombRanges appends to dst the ranges that tombstones newer than
// applied delete from series id. It only reads v, so concurrent workers
// may call it.
func (v *visibility) appendTombRanges(dst []timeRange, id uint64, applied uint64) []timeRange {
	var s *catalog.Series
	var tbuf [8]Tag
	for i := range v.tombs {
		t := &v.tombs[i]
		if t.seq <= applied || !t.ok {
			continue
		}
		if s == nil {
			s, _ = v.db.cat.Meta(id)
		}
		if !s.Set.MeasurementIs(t.sel.Measurement) || (t.sel.Field != "" && s.Field != t.sel.Field) || !catalog.MatchTags(s.Set.AppendTags(tbuf[:0]), t.ms) {
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

// applyDeleteToMem removes from t the samples sel selects that t holds now:
// recovery replays a delete this way, in WAL order, with no reader yet.
func (db *DB) applyDeleteToMem(t *memtable.Table, sel *Selector) {
	ids := db.cat.Match(sel)
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
	ids := db.cat.Match(sel)
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
// that select series id.
func (db *DB) seriesTombstones(id uint64, tombs []tombstone, applied uint64, dst []tombstone) []tombstone {
	var s *catalog.Series
	for _, t := range tombs {
		if t.seq <= applied {
			continue
		}
		if s == nil {
			s, _ = db.cat.Meta(id)
		}
		if s.SelectedBy(&t.sel) {
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
	applied := h.TombApplied.Load()
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
	if tmax < h.Meta.MinTime || tmin > h.Meta.MaxTime {
		return false
	}
	ids := db.cat.Match(&t.sel)
	if len(ids) > maxAffectCheck || h.Reader.Load() != nil {
		return true // the compaction this asks for reports a damaged index
	}
	for _, key := range db.cat.Keys(ids) {
		if key < string(h.Meta.FirstKey) || key > string(h.Meta.LastKey) {
			continue
		}
		if idx, ok := h.Reader.Find([]byte(key)); ok && idx.MinTime() <= tmax && idx.MaxTime() >= tmin {
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
		id, ok := db.cat.Lookup(string(key))
		if !ok {
			return nil
		}
		s, _ := db.cat.Meta(id)
		var out []compaction.TimeRange
		for _, t := range live {
			if s.SelectedBy(&t.sel) {
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
			if h.TombApplied.Load() < maxSeq {
				target := maxSeq
				if p := db.pendingTombstone(h, tombs); p != math.MaxUint64 {
					target = p - 1
				}
				if target > h.TombApplied.Load() {
					h.TombApplied.Store(target)
				}
			}
			segOldest = min(segOldest, h.TombApplied.Load())
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
