// Package memtable is strata's in-memory write buffer: the recent samples of
// every series, keyed by the engine's series ids, held until a flush writes
// them to a segment.
//
// # Layout
//
// A Table maps each series id it holds to a dense local slot number,
// through pages of 256 slot numbers found by a map keyed by id/256, so its
// size follows the series it holds, never the largest id the engine has
// issued: ids are dense in the engine, so a page usually serves many series,
// and consecutive entries of one page cost no map lookup. A slot is a
// 56-byte memSeries holding no pointer (so the garbage collector never scans
// the slots); slots are allocated in pages of 1024 (the first page grows to
// that size, so that a small table stays small) and are never copied past
// the first page.
//
// Samples are stored as columns: timestamps, 64-bit value payloads and
// sequence numbers, 20 bytes a sample. The columns of the whole table live
// in its arena, slabs of one array per column (the first of 128 samples,
// doubling to 64Ki) from which chunks are carved. A series holds its samples
// in chunks of 1, 3, 6, 8, 12, ... 122 samples (about 1.5x each past the
// third, 512 in all), then of 256; every chunk but the last is full. A
// chunk is named by a 32-bit handle, its slab's number and its offset. The
// first three handles, enough for 10 samples, live in the slot; a longer
// series keeps its handles in a list of the arena. So a series of up to 10
// samples costs no allocation of its own and about 60 bytes (its slot and
// its share of a slot page and of the id map) besides its chunks, which
// waste at most half their capacity (a third past 10 samples); a long one
// wastes at most one partly filled chunk. The first chunk holds one sample:
// at high cardinality a memtable sees most series once (a million series
// written time-major, 440,000 of them a memtable), and a first chunk of two
// left half of every such series' columns empty. Appending never copies earlier samples. A string series stores in
// its value column the index of each string in a slice of strings of the
// table.
//
// Nothing carved from the arena is released before the table is: a removal
// or a sort that shortens a series keeps its chunks, and the series reuses
// them as it grows again; a removed string is cleared so that it can be
// collected (its slot in the slice stays). Bytes counts what is allocated,
// so it is the table's heap cost.
//
// # Sequence numbers and views
//
// Every sample carries the sequence number of the write that applied it
// (stored as a 32-bit offset from the table's first one). A read is made
// through a View: as of a sequence number (later samples are invisible), with
// masks that hide what deletes removed (samples applied before a delete's
// sequence number, in its time range). So a reader sees each write and
// delete whole or not at all, whatever is applied meanwhile.
//
// # Ordering
//
// Samples are appended in arrival order, which is sequence order. A series
// whose appended timestamp is not greater than the previous one is marked
// unsorted; the first read that needs it sorted takes the write lock and
// sorts it in place (stable, so versions of one timestamp stay in sequence
// order). Versions that no reader can see any more (a newer version of the
// same timestamp is at or below View.Oldest) are discarded then; the others
// are kept, and a read returns the newest version visible to it.
//
// # Concurrency
//
// ApplySeq, DeleteBefore and DropSeq take the write lock and may run
// concurrently; ApplySeq calls come in sequence order (the engine
// serialises them), and Delete and the tests' Apply, which number the next write
// themselves, need a single writer. Any number of readers may call the
// other methods concurrently with them and with each other. Bytes, Len,
// MinTime and MaxTime are atomic loads.
//
// # Compatibility
//
// This package is a building block of package engine, public so that the
// layout of the storage engine can be read and tested piece by piece. Its
// API has no compatibility promise and its signatures use types internal to
// strata (vfs.FS, point.Kind, ...): programs use package engine.
package memtable

import (
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/stratadb/strata/internal/point"
)

// Mask hides the samples applied before sequence number Seq whose time is
// in [Min, Max]: what a delete with that sequence number removed.
type Mask struct {
	Seq      uint64
	Min, Max int64
}

// View says which samples a read sees.
type View struct {
	// AsOf: samples applied with a sequence number above it are invisible.
	AsOf uint64
	// Oldest: no reader reads as of a sequence number below it, so a
	// version shadowed by a newer one at or below Oldest may be discarded.
	// It must not exceed AsOf.
	Oldest uint64
	// Masks apply to the series read.
	Masks []Mask
}

// Latest sees every sample applied, the newest version of each timestamp.
var Latest = View{AsOf: math.MaxUint64, Oldest: math.MaxUint64}

// maxRel bounds the offset of a sequence number from the table's base.
const maxRel = math.MaxUint32 - 1

// Slot pages: page p holds, for ids p*pageSize .. p*pageSize+pageSize-1,
// the slot of each plus one (0 when the table holds no such series).
const (
	pageBits = 8
	pageSize = 1 << pageBits
)

type slotPage [pageSize]uint32

// pageBytes is the memory one page takes with its map entry (Go's map stores
// 8 slots of 16 bytes plus a control word per group, kept between 7/16 and
// 7/8 full).
const pageBytes = int64(unsafe.Sizeof(slotPage{})) + 28

// Table holds recent samples per series. The zero Table is not usable; call
// New.
type Table struct {
	// Statistics, written under mu and read without it.
	bytes   atomic.Int64 // approximate heap memory held
	samples atomic.Int64 // samples held, versions not yet collapsed included
	minTime atomic.Int64 // math.MaxInt64 when empty
	maxTime atomic.Int64 // math.MinInt64 when empty
	lastSeq atomic.Uint64

	// mu guards everything below. Apply, Delete and lazy sorting hold it
	// exclusively; reads of sorted series hold it shared.
	mu      sync.RWMutex
	base    uint64               // sequence numbers are stored as seq-base; set by the first Apply
	pages   map[uint64]*slotPage // id>>pageBits -> slots of those ids
	series  [][]memSeries        // the series by slot, in pages; see addSeries
	nseries int
	arena   arena       // the series' samples
	scratch sortScratch // reused by sortSeries
	onNew   func(id uint64)
}

// OnNewSeries sets a function that ApplySeq calls, under the table's write
// lock, for each series id the table did not hold yet. Set it before the
// first Apply.
func (t *Table) OnNewSeries(f func(id uint64)) { t.onNew = f }

// New returns an empty Table.
func New() *Table {
	t := &Table{pages: make(map[uint64]*slotPage)}
	t.minTime.Store(math.MaxInt64)
	t.maxTime.Store(math.MinInt64)
	t.bytes.Store(int64(unsafe.Sizeof(Table{})))
	return t
}

// Fits reports whether Apply accepts sequence number seq: the table stores
// sequence numbers as 32-bit offsets from its first, so a table that has
// seen about four billion sequence numbers is full and must be replaced.
func (t *Table) Fits(seq uint64) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.base == 0 && t.nseries == 0 || seq > t.base && seq-t.base <= maxRel
}

// ErrSeq is returned by ApplySeq for a sequence number not above every one
// applied before, or too far above the first (see Fits).
var ErrSeq = errors.New("memtable: sequence number out of order or out of range")

// ApplySeq appends a batch of entries, all written with sequence number seq,
// which must be above every sequence number applied before and must fit
// (see Fits); otherwise it returns ErrSeq and applies nothing. Every entry of a series must have that series' kind (the
// engine guarantees it). Timestamps may arrive in any order and may repeat;
// a repeated timestamp keeps the value applied last. ApplySeq takes the
// write lock once for the whole batch and does not retain entries.
func (t *Table) ApplySeq(entries []point.Entry, seq uint64) error {
	if len(entries) == 0 {
		return nil
	}
	mint, maxt := int64(math.MaxInt64), int64(math.MinInt64)
	var grown int64

	t.mu.Lock()
	if t.lastSeq.Load() == 0 && t.nseries == 0 && seq > 0 {
		t.base = seq - 1
	}
	if seq <= t.lastSeq.Load() || seq <= t.base || seq-t.base > maxRel {
		t.mu.Unlock()
		return ErrSeq
	}
	rel := uint32(seq - t.base)
	pageNo, page := uint64(math.MaxUint64), (*slotPage)(nil)
	for i := range entries {
		e := &entries[i]
		if pn := e.ID >> pageBits; pn != pageNo || page == nil {
			pageNo, page = pn, t.pages[pn]
			if page == nil {
				page = new(slotPage)
				t.pages[pn] = page
				grown += pageBytes
			}
		}
		slot := page[e.ID&(pageSize-1)]
		if slot == 0 {
			if t.onNew != nil {
				t.onNew(e.ID)
			}
			grown += t.addSeries(e.ID)
			slot = uint32(t.nseries)
			page[e.ID&(pageSize-1)] = slot
		}
		grown += t.slot(slot-1).append(&t.arena, e.Time, e.Value, rel)
		mint = min(mint, e.Time)
		maxt = max(maxt, e.Time)
	}
	if mint < t.minTime.Load() {
		t.minTime.Store(mint)
	}
	if maxt > t.maxTime.Load() {
		t.maxTime.Store(maxt)
	}
	t.lastSeq.Store(seq)
	t.samples.Add(int64(len(entries)))
	t.bytes.Add(grown)
	t.mu.Unlock()
	return nil
}

// Series pages: slot i is t.series[i/seriesPage][i%seriesPage]. Every page
// but the last is full. The first one doubles from 16 slots to seriesPage,
// so that a small table stays small; the others are allocated whole, so
// that slots are never copied past the first page.
const (
	seriesPageBits = 10
	seriesPage     = 1 << seriesPageBits
)

// slot returns the series of slot i.
func (t *Table) slot(i uint32) *memSeries {
	return &t.series[i>>seriesPageBits][i&(seriesPage-1)]
}

// addSeries gives id the next slot and returns the bytes newly allocated.
func (t *Table) addSeries(id uint64) (grown int64) {
	const size = int64(unsafe.Sizeof(memSeries{}))
	n := len(t.series)
	if n == 0 || len(t.series[n-1]) == seriesPage {
		var p []memSeries
		if n > 0 {
			p = make([]memSeries, 0, seriesPage)
			grown += seriesPage * size
		}
		old := cap(t.series)
		t.series = append(t.series, p)
		grown += int64(cap(t.series)-old) * int64(unsafe.Sizeof(p))
		n++
	}
	p := &t.series[n-1]
	if len(*p) == cap(*p) { // the first page, which doubles up to seriesPage
		old := cap(*p)
		grownPage := make([]memSeries, len(*p), min(max(2*old, 16), seriesPage))
		copy(grownPage, *p)
		*p = grownPage
		grown += int64(cap(*p)-old) * size
	}
	*p = append(*p, memSeries{id: id})
	t.nseries++
	return grown
}

// Base returns a sequence number below that of every sample the table
// holds or will hold (the first write's minus one), and false when no write
// was applied yet.
func (t *Table) Base() (uint64, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.base, t.lastSeq.Load() != 0
}

// Delete removes the samples of series id applied so far with
// mint <= Time <= maxt. Samples applied later, even inside that range, are
// kept. It is DeleteBefore with the sequence number after the last applied.
func (t *Table) Delete(id uint64, mint, maxt int64) {
	t.DeleteBefore(id, mint, maxt, t.lastSeq.Load()+1)
}

// DeleteBefore removes the samples of series id applied with a sequence
// number below seq and mint <= Time <= maxt: it makes what Mask{seq, mint,
// maxt} hides physical. The caller makes sure no reader needs them.
func (t *Table) DeleteBefore(id uint64, mint, maxt int64, seq uint64) {
	if mint > maxt {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.lookup(id)
	if s == nil || s.empty() {
		return
	}
	oldMin, oldMax := s.bounds()
	if maxt < oldMin || mint > oldMax || seq <= t.base {
		return
	}
	before := t.rel(seq)
	t.remove(s, oldMin, oldMax, func(ts int64, rel uint32) bool { return rel < before && ts >= mint && ts <= maxt })
}

// DropSeq removes every sample applied with sequence number seq: the
// engine undoes a write whose WAL record could not be made durable before
// any reader may see it.
func (t *Table) DropSeq(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq <= t.base || seq-t.base > maxRel {
		return
	}
	rel := uint32(seq - t.base)
	for _, p := range t.series {
		for i := range p {
			s := &p[i]
			if s.empty() || s.top < rel {
				continue
			}
			lo, hi := s.bounds()
			t.remove(s, lo, hi, func(_ int64, r uint32) bool { return r == rel })
		}
	}
}

func (t *Table) remove(s *memSeries, oldMin, oldMax int64, drop func(int64, uint32) bool) {
	removed, freed := s.removeIf(&t.arena, drop)
	if removed == 0 {
		return
	}
	t.samples.Add(-int64(removed))
	t.bytes.Add(-freed)
	if oldMin == t.minTime.Load() || oldMax == t.maxTime.Load() {
		t.recomputeBounds()
	}
}

// rel converts a sequence number to the table's 32-bit offsets, clamped.
// The caller holds mu.
func (t *Table) rel(seq uint64) uint32 {
	switch {
	case seq <= t.base:
		return 0
	case seq-t.base >= math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(seq - t.base)
}

func (t *Table) lookup(id uint64) *memSeries {
	page := t.pages[id>>pageBits]
	if page == nil || page[id&(pageSize-1)] == 0 {
		return nil
	}
	return t.slot(page[id&(pageSize-1)] - 1)
}

// recomputeBounds sets minTime and maxTime from the series' own bounds. It
// runs under the write lock after a removal that may have moved them.
func (t *Table) recomputeBounds() {
	mint, maxt := int64(math.MaxInt64), int64(math.MinInt64)
	for _, p := range t.series {
		for i := range p {
			if s := &p[i]; !s.empty() {
				lo, hi := s.bounds()
				mint, maxt = min(mint, lo), max(maxt, hi)
			}
		}
	}
	t.minTime.Store(mint)
	t.maxTime.Store(maxt)
}

// Samples appends to dst the samples of series id with mint <= Time <= maxt
// as Latest sees them: sorted by time, one per timestamp (the value applied
// last). It returns the extended slice.
func (t *Table) Samples(id uint64, mint, maxt int64, dst []point.Sample) []point.Sample {
	return t.Read(id, mint, maxt, &Latest, dst)
}

// Read appends to dst the samples of series id with mint <= Time <= maxt
// that v sees, sorted by time, one per timestamp (the newest version v
// sees, unless a mask hides it), and returns the extended slice.
func (t *Table) Read(id uint64, mint, maxt int64, v *View, dst []point.Sample) []point.Sample {
	if mint > maxt {
		return dst
	}
	s, excl := t.readSeries(id, v.Oldest)
	if s != nil {
		var rv relView
		t.relView(v, &rv)
		dst = s.appendSamples(&t.arena, dst, mint, maxt, &rv)
	}
	t.unlock(excl)
	return dst
}

// relView is a View in the table's 32-bit sequence offsets.
type relView struct {
	asOf  uint32
	masks []relMask // allocated only when a delete's mask applies
}

type relMask struct {
	before   uint32
	min, max int64
}

// relView converts v; the caller holds mu.
func (t *Table) relView(v *View, rv *relView) {
	rv.asOf = t.rel(v.AsOf)
	rv.masks = nil
	for _, m := range v.Masks {
		if m.Seq > t.base && m.Min <= m.Max {
			rv.masks = append(rv.masks, relMask{before: t.rel(m.Seq), min: m.Min, max: m.Max})
		}
	}
}

// hidden reports whether a mask hides the sample (ts, rel).
func (rv *relView) hidden(ts int64, rel uint32) bool {
	for _, m := range rv.masks {
		if rel < m.before && ts >= m.min && ts <= m.max {
			return true
		}
	}
	return false
}

// readSeries returns series id, sorted, with t.mu held: exclusively when
// excl is true, shared otherwise. The caller releases it with
// t.unlock(excl). It returns a nil series when the table holds no sample of
// id.
//
// A sorted series is returned under the read lock. An unsorted one is sorted
// under the write lock, which is then kept for the read: the sort writes the
// columns, so no reader may look at them meanwhile.
func (t *Table) readSeries(id uint64, oldest uint64) (s *memSeries, excl bool) {
	t.mu.RLock()
	s = t.lookup(id)
	if s == nil || s.empty() {
		return nil, false
	}
	if !s.unsorted {
		return s, false
	}
	t.mu.RUnlock()

	t.mu.Lock()
	// The series may have been emptied, or sorted by another reader, while
	// no lock was held; its slot stays because series are never removed.
	s = t.lookup(id)
	if s.empty() {
		return nil, true
	}
	if s.unsorted {
		t.sortSeries(s, t.rel(oldest))
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

// sortSeries sorts s by time and discards versions shadowed by a newer one
// at or below oldest. It runs under the write lock.
func (t *Table) sortSeries(s *memSeries, oldest uint32) {
	before := t.scratch.bytes()
	removed, freed := s.sortDedup(&t.arena, &t.scratch, oldest)
	t.samples.Add(-int64(removed))
	t.bytes.Add(t.scratch.bytes() - before - freed)
}

// Kind returns the kind of series id's samples and whether the table holds
// any sample of it. It returns point.KindInvalid when it holds none.
func (t *Table) Kind(id uint64) (point.Kind, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s := t.lookup(id)
	if s == nil || s.empty() {
		return point.KindInvalid, false
	}
	return s.kind, true
}

// Bounds returns the smallest and largest timestamps of series id and
// whether the table holds any sample of it.
func (t *Table) Bounds(id uint64) (mint, maxt int64, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s := t.lookup(id)
	if s == nil || s.empty() {
		return math.MaxInt64, math.MinInt64, false
	}
	mint, maxt = s.bounds()
	return mint, maxt, true
}

// IDs returns the ids of the series that hold at least one sample, in
// ascending order.
func (t *Table) IDs() []uint64 {
	t.mu.RLock()
	ids := make([]uint64, 0, t.nseries)
	for _, p := range t.series {
		for i := range p {
			if !p[i].empty() {
				ids = append(ids, p[i].id)
			}
		}
	}
	t.mu.RUnlock()
	slices.Sort(ids)
	return ids
}

// NumSeries returns the number of series the table has held.
func (t *Table) NumSeries() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.nseries
}

// Bytes returns the heap memory the table holds: its arena's slabs and
// chunk lists, its series slots and map, the string slots and the bytes of
// the strings stored. It only grows while data is applied, and shrinks only
// when a removal or deduplication releases strings.
func (t *Table) Bytes() int64 { return t.bytes.Load() }

// Len returns the number of samples held. Versions of one timestamp count
// until a read sorts their series and discards them.
func (t *Table) Len() int64 { return t.samples.Load() }

// MinTime returns the smallest timestamp held, or math.MaxInt64 when the
// table is empty.
func (t *Table) MinTime() int64 { return t.minTime.Load() }

// MaxTime returns the largest timestamp held, or math.MinInt64 when the
// table is empty.
func (t *Table) MaxTime() int64 { return t.maxTime.Load() }
