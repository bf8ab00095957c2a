package engine

// The appender: a write path for callers that know their series. Append
// with ref 0 resolves (measurement, tags, field) once and returns a ref;
// Append with that ref skips the names altogether, as Prometheus' head
// appender does. Commit hands the pending samples to the write path Write
// uses (commitLocked), so one Commit is one WAL record, one change-feed
// batch, atomic and durable exactly as one Write.
//
// A ref is opaque to callers. It is 64 bits:
//
//	 63                37 36  35  32 31                    0
//	+--------------------+---+------+-----------------------+
//	| check (27 bits)    | P | kind | id+1, or slot+1 if P  |
//	+--------------------+---+------+-----------------------+
//
// An existing series' ref holds its catalog id (ids are never reused, so
// the ref names that series for the life of the handle). A series that a
// batch creates has no id before the batch commits: its ref (P set) holds
// a slot of the DB's ref table, which Commit fills with the id once the
// batch is logged. The check is a keyed hash of the low 37 bits with a
// seed drawn per DB handle, so a ref that was never handed out (or one of
// another handle) is refused with ErrInvalid instead of naming some other
// series, except with odds of 2^-27; the kind lets Append refuse a value
// of another kind without looking anything up. Refs live in memory only:
// nothing of them is stored.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/stratadb/strata/internal/catalog"
	"github.com/stratadb/strata/internal/point"
)

// SeriesRef names a series for Append: 0 is unknown. A ref is valid for
// the life of the DB handle that returned it, on any of its appenders;
// refs of another handle (or of this database before a reopen) are
// refused with ErrInvalid.
//
//	type SeriesRef uint64
type SeriesRef = point.SeriesRef

const (
	refLowBits    = 32
	refKindShift  = 32
	refPending    = 1 << 36
	refCheckShift = 37
	refCheckBits  = 64 - refCheckShift

	// pendingID marks a pending entry's ID as an index into
	// Appender.pend rather than a catalog id (which fit in 32 bits).
	pendingID = 1 << 63

	refChunkBits = 14
	refChunkLen  = 1 << refChunkBits
)

// refTable holds the seed of the handle's refs and the slots of the refs
// of series created through appenders: slot s holds id+1 once the batch
// that creates the series is logged, 0 before (and for ever when it never
// is). It grows by chunks, so readers index it without a lock.
type refTable struct {
	once   sync.Once
	seed   uint64
	mu     sync.Mutex // serialises slot allocation
	n      uint32     // slots allocated
	chunks atomic.Pointer[[]*[refChunkLen]atomic.Uint32]
}

func (t *refTable) init() {
	t.once.Do(func() { t.seed = rand.Uint64() })
}

func (t *refTable) check(v uint64) uint64 {
	h := (v ^ t.seed) * 0x9E3779B97F4A7C15
	h ^= h >> 29
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 32
	return h >> (64 - refCheckBits)
}

func (t *refTable) ref(low uint64, kind Kind, pending bool) SeriesRef {
	v := low | uint64(kind)<<refKindShift
	if pending {
		v |= refPending
	}
	return SeriesRef(v | t.check(v)<<refCheckShift)
}

// decode returns what r holds, or ok false when r was not made by t.
func (t *refTable) decode(r SeriesRef) (low uint64, kind Kind, pending, ok bool) {
	v := uint64(r) & (1<<refCheckShift - 1)
	if uint64(r)>>refCheckShift != t.check(v) {
		return 0, 0, false, false
	}
	low = v & (1<<refLowBits - 1)
	return low, Kind(v >> refKindShift & 0xF), v&refPending != 0, low != 0
}

// alloc returns a new slot, 0 for now.
func (t *refTable) alloc() (uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == math.MaxUint32-1 {
		return 0, errors.New("appender: out of series refs")
	}
	s := t.n
	var chunks []*[refChunkLen]atomic.Uint32
	if p := t.chunks.Load(); p != nil {
		chunks = *p
	}
	if int(s>>refChunkBits) == len(chunks) {
		grown := append(slices.Clip(chunks), new([refChunkLen]atomic.Uint32))
		t.chunks.Store(&grown)
	}
	t.n++
	return s, nil
}

// load returns the id+1 of slot s, 0 when the series is not created.
func (t *refTable) load(s uint32) uint32 {
	p := t.chunks.Load()
	if p == nil || int(s>>refChunkBits) >= len(*p) {
		return 0
	}
	return (*p)[s>>refChunkBits][s&(refChunkLen-1)].Load()
}

func (t *refTable) store(s uint32, id uint64) {
	(*t.chunks.Load())[s>>refChunkBits][s&(refChunkLen-1)].Store(uint32(id + 1))
}

// Appender batches samples for one atomic Commit. Get one from
// DB.Appender; it is for one goroutine at a time, and is reused after
// Commit or Rollback.
//
// Semantics, beside Write's:
//   - Append validates the sample at once, as Write validates a point:
//     names, value, MaxKeyLen, MaxPointBytes, and MaxWriteBytes for the
//     pending batch (a sample that would take the batch past it is refused
//     and the batch is kept: Commit it and go on). A refused sample leaves
//     the batch as it was.
//   - Kind conflicts with existing series are ErrFieldTypeConflict at
//     Append; so is a value whose kind is not that of ref's series. A
//     series that another writer creates with another kind between Append
//     and Commit fails the Commit with a *PointError (ErrFieldTypeConflict)
//     whose Index is the sample's position in the batch.
//   - A series new to the database gets a ref at once, usable in this
//     batch; Commit creates it, and after a Commit that returned nil the
//     ref is valid on every appender of the handle. When the batch is
//     rolled back, or its Commit fails before logging it (a refusal, a
//     closed DB), Append with that ref returns an error wrapping
//     ErrInvalid: Append again with ref 0. (A Commit that logged the batch
//     and then failed to sync it has created the series: their refs stay
//     valid.) A ref that the
//     handle never returned is ErrInvalid too, never another series.
//   - Append may return a ref other than the one it was given (a created
//     series' ref becomes its id's); keep the last one.
//   - Several samples of one series and time in a batch: the last wins.
//   - After Close: ErrClosed; on a ReadOnly DB: ErrReadOnly. After Commit
//     or Rollback, whatever they returned, the batch is empty.
type Appender struct {
	db      *DB
	entries []point.Entry // ID: catalog id, or pendingID|index into pend
	pend    []appendSeries
	byKey   map[string]int32 // index into pend by series key
	bytes   int              // what MaxWriteBytes counts of the batch
	maxID   uint64           // largest catalog id of entries, +1
	catLen  int              // catalog size when the first of pend was looked up
	tags    []Tag            // scratch: sorted tags
	key     []byte           // scratch: series key
	keys    []byte           // scratch: the bytes of pend's keys (carveKey), reused by reset
	ids     []uint64         // scratch of Commit: id of each of pend
	setPend []pendingSeries  // scratch of Commit: series to create
	// uncounted: a series-limit refusal of Commit is not counted in Stats,
	// because the caller offers the same points to Write next (SampleAppender).
	uncounted bool
}

// appendSeries is a series a pending batch creates.
type appendSeries struct {
	key   string
	kind  Kind
	slot  uint32 // of its ref
	first int    // index of the sample that created it
}

// Appender returns an appender of db.
func (db *DB) Appender() *Appender {
	db.refs.init()
	return &Appender{db: db}
}

// Append adds a sample to the pending batch. With ref != 0 the names are
// not looked at; with ref 0 the series is resolved (and created on
// Commit) and its ref returned. Validation as Write.
func (a *Appender) Append(ref SeriesRef, measurement string, tags []Tag, field string, t int64, v Value) (SeriesRef, error) {
	db := a.db
	if db.closed.Load() {
		return 0, ErrClosed
	}
	if db.readOnly {
		return 0, ErrReadOnly
	}
	kind := v.Kind()
	if kind != KindInt && kind != KindUint && kind != KindBool {
		if err := point.ValidateValue(&Field{Key: field, Value: v}); err != nil {
			return 0, err
		}
	}
	eb := point.EntryBytes(v)
	if ref != 0 {
		return a.appendRef(ref, kind, t, v, eb)
	}

	if !slices.IsSortedFunc(tags, point.CompareTags) {
		a.tags = append(a.tags[:0], tags...)
		point.SortTags(a.tags)
		tags = a.tags
	}
	h := catalog.HashSet(measurement, tags)
	id, have, catLen, setKnown, found := db.cat.FindField(h, measurement, tags, field)
	if found {
		if have != kind {
			return 0, kindConflict(measurement, field, have, kind)
		}
		if err := a.fits(eb, 0); err != nil {
			return 0, err
		}
		a.add(id, t, v, eb)
		return db.refs.ref(id+1, kind, false), nil
	}
	if !setKnown {
		if err := point.ValidateSeries(&Point{Measurement: measurement, Tags: tags}); err != nil {
			return 0, err
		}
	}
	if err := point.ValidateFieldKey(field); err != nil {
		return 0, err
	}
	a.key = point.AppendSeriesKey(a.key[:0], measurement, tags, field)
	if len(a.key) > MaxKeyLen {
		return 0, fmt.Errorf("%w: series key of %d bytes, more than %d", ErrInvalid, len(a.key), MaxKeyLen)
	}
	if i, ok := a.byKey[string(a.key)]; ok {
		ps := &a.pend[i]
		if ps.kind != kind {
			return 0, kindConflict(measurement, field, ps.kind, kind)
		}
		if err := a.fits(eb, 0); err != nil {
			return 0, err
		}
		a.add(pendingID|uint64(i), t, v, eb)
		return db.refs.ref(uint64(ps.slot)+1, kind, true), nil
	}
	if err := a.fits(eb, len(a.key)+16); err != nil {
		return 0, err
	}
	slot, err := db.refs.alloc()
	if err != nil {
		return 0, err
	}
	if len(a.pend) == 0 {
		a.catLen = catLen
	}
	if a.byKey == nil {
		a.byKey = make(map[string]int32)
	}
	key := carveKey(&a.keys, a.key) // valid until reset; Commit's catalog gets its own copy
	a.byKey[key] = int32(len(a.pend))
	a.pend = appendDoubling(a.pend, appendSeries{key: key, kind: kind, slot: slot, first: len(a.entries)})
	a.bytes += len(key) + 16
	a.add(pendingID|uint64(len(a.pend)-1), t, v, eb)
	return db.refs.ref(uint64(slot)+1, kind, true), nil
}

// appendRef is Append with a ref.
func (a *Appender) appendRef(ref SeriesRef, kind Kind, t int64, v Value, eb int) (SeriesRef, error) {
	refs := &a.db.refs
	low, rkind, pending, ok := refs.decode(ref)
	if !ok {
		return 0, fmt.Errorf("%w: series ref %#x is not one of this database handle", ErrInvalid, uint64(ref))
	}
	if rkind != kind {
		return 0, fmt.Errorf("%w: series ref %#x is of a %s field, not %s", ErrFieldTypeConflict, uint64(ref), rkind, kind)
	}
	if err := a.fits(eb, 0); err != nil {
		return 0, err
	}
	if !pending {
		a.add(low-1, t, v, eb)
		return ref, nil
	}
	slot := uint32(low - 1)
	if id := refs.load(slot); id != 0 {
		a.add(uint64(id-1), t, v, eb)
		return refs.ref(uint64(id), kind, false), nil
	}
	// Created by this batch? Its slots ascend with pend.
	i, found := slices.BinarySearchFunc(a.pend, slot, func(s appendSeries, slot uint32) int {
		return int(int64(s.slot) - int64(slot))
	})
	if !found {
		return 0, fmt.Errorf("%w: series ref %#x names a series whose batch was not committed: append it with ref 0", ErrInvalid, uint64(ref))
	}
	a.add(pendingID|uint64(i), t, v, eb)
	return ref, nil
}

// fits checks that a sample of eb bytes (and newKey bytes of a new
// series) fits a point and the batch.
func (a *Appender) fits(eb, newKey int) error {
	if n := eb + newKey; n > MaxPointBytes {
		return fmt.Errorf("%w: sample of %d bytes, more than %d", ErrInvalid, n, MaxPointBytes)
	}
	if n := a.bytes + eb + newKey; n > MaxWriteBytes {
		return fmt.Errorf("%w: %w: the pending batch would take %d bytes, more than %d for one Commit",
			ErrInvalid, point.ErrBatchFull, n, MaxWriteBytes)
	}
	return nil
}

func (a *Appender) add(id uint64, t int64, v Value, eb int) {
	if id&pendingID == 0 && id >= a.maxID {
		a.maxID = id + 1
	}
	a.bytes += eb
	a.entries = appendDoubling(a.entries, point.Entry{ID: id, Time: t, Value: v})
}

// appendDoubling appends x to s, doubling a full slice's capacity: the
// batches of an Appender are reused, and append's growth by a quarter
// past 256 elements allocated about five times the largest one on the
// way to it, where doubling allocates at most four times and usually
// about twice.
func appendDoubling[T any](s []T, x T) []T {
	if len(s) == cap(s) {
		s = slices.Grow(s, max(len(s), 16))
	}
	return append(s, x)
}

func kindConflict(measurement, field string, have, kind Kind) error {
	return fmt.Errorf("%w: field %q of %s is %s, not %s", ErrFieldTypeConflict, field, measurement, have, kind)
}

// Commit stores the pending samples atomically and durably, exactly as one
// Write of them would, and empties the batch whatever it returns.
func (a *Appender) Commit() error {
	defer a.reset()
	db := a.db
	if locked, err := db.lockForCommit(len(a.entries)); !locked {
		return err
	}
	base := uint64(db.cat.Len())
	if a.maxID > base {
		db.commitMu.Unlock()
		return fmt.Errorf("%w: series ref of unknown series %d", ErrInvalid, a.maxID-1)
	}
	// Series of pend that others created since they were looked up are
	// not created again.
	recheck := int(base) != a.catLen
	// Series limits are checked where series are created, as Write does.
	limited := db.opts.MaxSeries > 0 || db.opts.MaxSeriesPerMeasurement > 0
	ids := slices.Grow(a.ids[:0], len(a.pend))
	create := slices.Grow(a.setPend[:0], len(a.pend))
	for i := range a.pend {
		ps := &a.pend[i]
		if recheck {
			if id, ok := db.cat.Lookup(ps.key); ok {
				if m, _ := db.cat.Meta(id); m.Kind != ps.kind {
					db.commitMu.Unlock()
					return &PointError{Index: ps.first, Err: fmt.Errorf("%w: series %q is %s, not %s",
						ErrFieldTypeConflict, ps.key, m.Kind, ps.kind)}
				}
				ids = append(ids, id)
				continue
			}
		}
		if limited {
			m, _, _, err := point.ParseSeriesKey([]byte(ps.key))
			if err == nil {
				err = db.admitSeries(m, len(create), a.uncounted)
			}
			if err != nil {
				db.commitMu.Unlock()
				return &PointError{Index: ps.first, Err: err}
			}
		}
		ids = append(ids, base+uint64(len(create)))
		create = append(create, pendingSeries{key: ps.key, kind: ps.kind})
	}
	a.ids, a.setPend = ids, create
	if len(a.pend) > 0 {
		for i := range a.entries {
			if e := &a.entries[i]; e.ID&pendingID != 0 {
				e.ID = ids[e.ID&^pendingID]
			}
		}
	}
	logged, err := db.commitLocked(a.entries, create, len(a.entries))
	if logged {
		for i := range a.pend {
			db.refs.store(a.pend[i].slot, ids[i])
		}
	}
	return err
}

// Rollback drops the pending samples. Refs that Append returned for the
// series the batch would have created are refused from now on.
func (a *Appender) Rollback() error {
	a.reset()
	return nil
}

func (a *Appender) reset() {
	a.entries = a.entries[:0]
	clear(a.pend)
	a.pend = a.pend[:0]
	clear(a.setPend)
	a.setPend = a.setPend[:0]
	clear(a.byKey)
	a.keys = a.keys[:0] // no view of it is left
	a.bytes, a.maxID = 0, 0
}

// pending returns the number of samples pending.
func (a *Appender) pending() int { return len(a.entries) }

// truncate drops the pending samples after the first n and the series
// only they created.
func (a *Appender) truncate(n int) {
	if n < 0 || n >= len(a.entries) {
		return
	}
	a.entries = a.entries[:n]
	k := len(a.pend)
	for k > 0 && a.pend[k-1].first >= n {
		k--
		delete(a.byKey, a.pend[k].key)
	}
	clear(a.pend[k:])
	a.pend = a.pend[:k]
	a.bytes, a.maxID = 0, 0
	for _, e := range a.entries {
		a.bytes += point.EntryBytes(e.Value)
		if e.ID&pendingID == 0 && e.ID >= a.maxID {
			a.maxID = e.ID + 1
		}
	}
	for _, ps := range a.pend {
		a.bytes += len(ps.key) + 16
	}
}

// sampleAppender is an Appender with the methods decoders outside this
// package need (point.SampleAppender).
type sampleAppender Appender

func (s *sampleAppender) Append(ref SeriesRef, measurement string, tags []Tag, field string, t int64, v Value) (SeriesRef, error) {
	return (*Appender)(s).Append(ref, measurement, tags, field, t, v)
}
func (s *sampleAppender) Commit() error   { return (*Appender)(s).Commit() }
func (s *sampleAppender) Rollback() error { return (*Appender)(s).Rollback() }
func (s *sampleAppender) Pending() int    { return (*Appender)(s).pending() }
func (s *sampleAppender) Truncate(n int)  { (*Appender)(s).truncate(n) }

// SampleAppender returns a new appender as the interface that decoders
// which cannot import this package take (lineproto.Write looks for this
// method): Append, Commit and Rollback as Appender's, plus Pending and
// Truncate to take back the samples of a line refused half way. A Commit
// refused for a series limit is not counted in Stats().SeriesLimitRefusals:
// such a caller writes the same points through Write next, to learn which
// of them are refused, and Write counts them.
func (db *DB) SampleAppender() point.SampleAppender {
	a := db.Appender()
	a.uncounted = true
	return (*sampleAppender)(a)
}
