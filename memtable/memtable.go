// Package memtable is strata's in-memory write buffer: the recent samples of
// every series, keyed by the engine's dense series ids, held until a flush
// writes them to a segment.
//
// # Layout
//
// A Table is a slice of series indexed by id, so it holds a slot for every
// id up to the largest applied: ids must be dense, as the engine's are. Each
// series stores its samples
// as columns (timestamps, 64-bit value payloads, and strings for string
// series only) split into chunks. Chunk capacities double from minChunk to
// maxChunk and every chunk but the last is full. Appending never copies
// earlier samples, so a series of n samples costs about 16n bytes plus one
// partly filled chunk, instead of the 2x to 3x that repeated slice growth
// allocates over a series' life.
//
// # Ordering
//
// Samples are appended in arrival order. A series whose appended timestamp
// is not greater than the previous one is marked unsorted; the first read
// that needs it sorted takes the write lock and sorts and deduplicates it in
// place (stable, so that the last applied value of a timestamp wins). Later
// reads of that series are cheap until the next out-of-order append.
//
// # Concurrency
//
// One writer at a time calls Apply or Delete (the engine serialises them);
// any number of readers may call the other methods concurrently with it and
// with each other. Bytes, Len, MinTime and MaxTime are atomic loads.
//
// # Compatibility
//
// This package is a building block of package engine, public so that the
// layout of the storage engine can be read and tested piece by piece. Its
// API has no compatibility promise and its signatures use types internal to
// strata (vfs.FS, point.Kind, ...): programs use package engine.
package memtable

import (
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/stratadb/strata/internal/point"
)

// Table holds recent samples per series. The zero Table is not usable; call
// New.
type Table struct {
	// Statistics, written under mu and read without it.
	bytes   atomic.Int64 // approximate heap memory held
	samples atomic.Int64 // samples held, duplicates not yet collapsed included
	minTime atomic.Int64 // math.MaxInt64 when empty
	maxTime atomic.Int64 // math.MinInt64 when empty

	// mu guards everything below. Apply, Delete and lazy sorting hold it
	// exclusively; reads of sorted series hold it shared.
	mu      sync.RWMutex
	series  []memSeries // indexed by series id
	scratch sortScratch // reused by sortSeries
}

// New returns an empty Table.
func New() *Table {
	t := &Table{}
	t.minTime.Store(math.MaxInt64)
	t.maxTime.Store(math.MinInt64)
	t.bytes.Store(int64(unsafe.Sizeof(Table{})))
	return t
}

// Apply appends a batch of entries. Every entry of a series must have that
// series' kind (the engine guarantees it). Timestamps may arrive in any order
// and may repeat; a repeated timestamp keeps the value applied last. Apply
// takes the write lock once for the whole batch and does not retain entries.
func (t *Table) Apply(entries []point.Entry) {
	if len(entries) == 0 {
		return
	}
	mint, maxt := int64(math.MaxInt64), int64(math.MinInt64)
	var grown int64

	t.mu.Lock()
	for i := range entries {
		e := &entries[i]
		if e.ID >= uint64(len(t.series)) {
			grown += t.growSeries(e.ID)
		}
		grown += t.series[e.ID].append(e.Time, e.Value)
		mint = min(mint, e.Time)
		maxt = max(maxt, e.Time)
	}
	if mint < t.minTime.Load() {
		t.minTime.Store(mint)
	}
	if maxt > t.maxTime.Load() {
		t.maxTime.Store(maxt)
	}
	t.samples.Add(int64(len(entries)))
	t.bytes.Add(grown)
	t.mu.Unlock()
}

// growSeries extends t.series so that id is a valid index and returns the
// bytes newly allocated. Capacity grows geometrically.
func (t *Table) growSeries(id uint64) int64 {
	old := cap(t.series)
	need := int(id) + 1
	if need > old {
		n := max(2*old, need, 64)
		grown := make([]memSeries, len(t.series), n)
		copy(grown, t.series)
		t.series = grown
	}
	t.series = t.series[:need]
	return int64(cap(t.series)-old) * int64(unsafe.Sizeof(memSeries{}))
}

// Delete removes the samples of series id with mint <= Time <= maxt. Samples
// applied later, even inside that range, are kept.
func (t *Table) Delete(id uint64, mint, maxt int64) {
	if mint > maxt {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if id >= uint64(len(t.series)) {
		return
	}
	s := &t.series[id]
	if s.empty() {
		return
	}
	oldMin, oldMax := s.bounds()
	if maxt < oldMin || mint > oldMax {
		return
	}
	removed, freed := s.deleteRange(mint, maxt)
	if removed == 0 {
		return
	}
	t.samples.Add(-int64(removed))
	t.bytes.Add(-freed)
	if oldMin == t.minTime.Load() || oldMax == t.maxTime.Load() {
		t.recomputeBounds()
	}
}

// recomputeBounds sets minTime and maxTime from the series' own bounds. It
// runs under the write lock after a Delete that may have moved them.
func (t *Table) recomputeBounds() {
	mint, maxt := int64(math.MaxInt64), int64(math.MinInt64)
	for i := range t.series {
		if s := &t.series[i]; !s.empty() {
			lo, hi := s.bounds()
			mint, maxt = min(mint, lo), max(maxt, hi)
		}
	}
	t.minTime.Store(mint)
	t.maxTime.Store(maxt)
}

// Samples appends to dst the samples of series id with mint <= Time <= maxt,
// sorted by time, one per timestamp (the value applied last), and returns
// the extended slice.
func (t *Table) Samples(id uint64, mint, maxt int64, dst []point.Sample) []point.Sample {
	if mint > maxt {
		return dst
	}
	s, excl := t.readSeries(id)
	if s != nil {
		dst = s.appendSamples(dst, mint, maxt)
	}
	t.unlock(excl)
	return dst
}

// Columns is Samples in columnar form, for encoders. It appends the times
// of series id's samples in [mint, maxt] to times, and their values to vals
// (the payload of point.Value.Bits) for a non-string series or to strs for a
// string series; the other one of vals and strs is returned unchanged.
func (t *Table) Columns(id uint64, mint, maxt int64, times []int64, vals []uint64, strs []string) ([]int64, []uint64, []string) {
	if mint > maxt {
		return times, vals, strs
	}
	s, excl := t.readSeries(id)
	if s != nil {
		times, vals, strs = s.appendColumns(times, vals, strs, mint, maxt)
	}
	t.unlock(excl)
	return times, vals, strs
}

// readSeries returns series id, sorted and deduplicated, with t.mu held:
// exclusively when excl is true, shared otherwise. The caller releases it
// with t.unlock(excl). It returns a nil series when the table holds no
// sample of id.
//
// A sorted series is returned under the read lock. An unsorted one is sorted
// under the write lock, which is then kept for the read: the sort writes the
// columns, so no reader may look at them meanwhile.
func (t *Table) readSeries(id uint64) (s *memSeries, excl bool) {
	t.mu.RLock()
	if id >= uint64(len(t.series)) || t.series[id].empty() {
		return nil, false
	}
	if !t.series[id].unsorted {
		return &t.series[id], false
	}
	t.mu.RUnlock()

	t.mu.Lock()
	// The series may have been deleted, or sorted by another reader, while
	// no lock was held; id stays in range because series are never removed.
	s = &t.series[id]
	if s.empty() {
		return nil, true
	}
	if s.unsorted {
		t.sortSeries(s)
	}
	return s, true
}

func (t *Table) unlock(excl bool) {
	if excl {
		t.mu.Unlock()
	} else {
		t.mu.RUnlock()
	}
}

// sortSeries sorts s by time and collapses equal timestamps to the value
// applied last. It runs under the write lock.
func (t *Table) sortSeries(s *memSeries) {
	before := t.scratch.bytes()
	removed, freed := s.sortDedup(&t.scratch)
	t.samples.Add(-int64(removed))
	t.bytes.Add(t.scratch.bytes() - before - freed)
}

// Kind returns the kind of series id's samples and whether the table holds
// any sample of it. It returns point.KindInvalid when it holds none.
func (t *Table) Kind(id uint64) (point.Kind, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if id >= uint64(len(t.series)) || t.series[id].empty() {
		return point.KindInvalid, false
	}
	return t.series[id].kind, true
}

// Bounds returns the smallest and largest timestamps of series id and
// whether the table holds any sample of it.
func (t *Table) Bounds(id uint64) (mint, maxt int64, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if id >= uint64(len(t.series)) || t.series[id].empty() {
		return math.MaxInt64, math.MinInt64, false
	}
	mint, maxt = t.series[id].bounds()
	return mint, maxt, true
}

// IDs returns the ids of the series that hold at least one sample, in
// ascending order.
func (t *Table) IDs() []uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var ids []uint64
	for i := range t.series {
		if !t.series[i].empty() {
			ids = append(ids, uint64(i))
		}
	}
	return ids
}

// Bytes returns the approximate heap memory the table holds: column and
// bookkeeping capacity plus the bytes of stored strings. It only grows
// while data is applied, and shrinks when Delete or deduplication releases
// whole chunks or strings.
func (t *Table) Bytes() int64 { return t.bytes.Load() }

// Len returns the number of samples held. Duplicate timestamps count until
// a read sorts their series and collapses them.
func (t *Table) Len() int64 { return t.samples.Load() }

// MinTime returns the smallest timestamp held, or math.MaxInt64 when the
// table is empty.
func (t *Table) MinTime() int64 { return t.minTime.Load() }

// MaxTime returns the largest timestamp held, or math.MinInt64 when the
// table is empty.
func (t *Table) MaxTime() int64 { return t.maxTime.Load() }
