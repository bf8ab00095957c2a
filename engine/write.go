package engine

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/stratadb/strata/internal/catalog"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/memtable"
	"github.com/stratadb/strata/wal"
)

// Limits of what Write accepts; see internal/point. Every value within them
// can be flushed, compacted, reopened and read back, and Write rejects what
// passes them with ErrInvalid, naming the point.
const (
	MaxStringLen  = point.MaxStringLen  // bytes of a string field value
	MaxKeyLen     = point.MaxKeyLen     // bytes of a canonical series key
	MaxTags       = point.MaxTags       // tags of a point
	MaxFields     = point.MaxFields     // fields of a point
	MaxPointBytes = point.MaxPointBytes // encoded bytes of a point's values and new series keys
	MaxWriteBytes = point.MaxWriteBytes // encoded bytes of the points of one Write call
)

// Write stores points atomically: when it returns nil all of them are
// stored (and, under SyncAlways, durable); on error none is. An invalid
// point or a field kind conflict gives a *PointError naming the point's
// index, wrapping ErrInvalid or ErrFieldTypeConflict.
func (db *DB) Write(points []Point) error {
	if locked, err := db.lockForCommit(len(points)); !locked {
		return err
	}
	if err := db.assignSeriesLocked(points); err != nil {
		db.commitMu.Unlock()
		return err
	}
	_, err := db.commitLocked(db.w.entries, db.w.pend, len(points))
	return err
}

// lockForCommit checks that db takes writes and, for a batch of n > 0
// points or samples, waits out a write stall and takes commitMu. It
// reports whether it took the lock: false with a nil error for an empty
// batch, which is nothing to store.
func (db *DB) lockForCommit(n int) (locked bool, _ error) {
	if err := db.checkOpen(); err != nil {
		return false, err
	}
	if err := db.checkWritable(); err != nil {
		return false, err
	}
	if n == 0 {
		return false, nil
	}
	if err := db.throttle(); err != nil {
		return false, err
	}
	db.commitMu.Lock()
	if err := db.checkOpen(); err != nil {
		db.commitMu.Unlock()
		return false, err
	}
	return true, nil
}

// commitLocked stores entries as one batch: the write path that Write and
// Appender.Commit share. pend are the series the batch creates, whose ids
// follow the catalog's in order; entries name them by those ids. The batch
// is logged as one WAL record (fed to the change feed), its series are
// added to the catalog, its samples applied, and the call waits for the
// durability Options.Sync asks for. points is what Stats counts as points
// written.
//
// The caller holds commitMu; commitLocked releases it. logged reports
// whether the record reached the WAL: then pend are in the catalog, even
// when the fsync failed (and the samples were taken back).
func (db *DB) commitLocked(entries []point.Entry, pend []pendingSeries, points int) (logged bool, _ error) {
	w := &db.w
	seq := db.seq.Load() + 1
	if !db.mu.mem.t.Fits(seq) {
		// The memtable has seen 2^32 sequence numbers: start a new one
		// before this write is logged into the current WAL file.
		if err := db.sealLocked(true); err != nil {
			db.commitMu.Unlock()
			return false, err
		}
	}
	base := uint64(db.cat.Len())
	// The definitions point at the keys' own bytes, which Marshal only
	// reads: copying them first cost a buffer as large as every key of
	// the largest batch.
	w.defs = slices.Grow(w.defs[:0], len(pend))
	for i := range pend {
		key := pend[i].key
		w.defs = append(w.defs, wal.SeriesDef{ID: base + uint64(i), Kind: pend[i].kind,
			Key: unsafe.Slice(unsafe.StringData(key), len(key))})
	}
	b := wal.Batch{Seq: seq, Series: w.defs, Entries: entries}
	if n := marshalBound(pend, entries); cap(w.buf) < n {
		// Sized from the bound, with an eighth more for the batches
		// after: Marshal's appends would grow the buffer by a quarter
		// at a time on the way to its size.
		w.buf = make([]byte, 0, n+n/8)
	}
	w.buf = b.Marshal(w.buf[:0])
	clear(w.defs)                                    // the keys are the catalog's from now on, not the scratch's
	subs := db.feedPrepare(seq, len(entries), w.buf) // change feed (feed.go)
	pos, err := db.wal.Write(wal.RecordBatch, w.buf)
	if err != nil {
		feedCommit(subs, seq, false)
		db.commitMu.Unlock()
		return false, err // wal errors name the log and file
	}
	db.seq.Store(seq)
	if len(pend) > 0 {
		ownKeys(pend) // the catalog keeps them: not views of a scratch buffer
		db.cat.AddAll(len(pend), func(i int) (string, Kind) { return pend[i].key, pend[i].kind })
	}
	// Fed after the catalog knows the batch's series.
	feedCommit(subs, seq, true)
	// Applied now, invisible to readers until seq is published. Only
	// commitMu holders replace mem; Fits was checked above, and sequence
	// numbers only grow, so ApplySeq cannot refuse.
	mem := db.mu.mem
	if err := mem.t.ApplySeq(entries, seq); err != nil {
		panic(fmt.Sprintf("engine: apply write %d: %v", seq, err))
	}
	db.st.pointsWritten.Add(int64(points))
	db.st.samplesWritten.Add(int64(len(entries)))
	if kb := mem.keyBytes.Load(); mem.t.Bytes()+kb >= db.opts.MemTableBytes || kb >= maxMemKeyBytes {
		// This write is logged and applied; a failed seal is the WAL's
		// sticky failure, which SyncTo and the next writes report.
		if err := db.sealLocked(true); err != nil {
			db.logger.Error("seal memtable", "err", err)
		}
	}
	db.commitMu.Unlock()
	if err := db.wal.SyncTo(pos); err != nil {
		// Not durable: undo the write before anyone may see it, and tell
		// the feed, which must not pass it on.
		mem.t.DropSeq(seq)
		feedResolve(subs, seq, false)
		db.vis.resolve(seq)
		return true, err
	}
	feedResolve(subs, seq, true)
	db.vis.resolve(seq)
	db.vis.wait(seq) // earlier writes sharing the fsync publish first
	return true, nil
}

// marshalBound returns about the most bytes the WAL record of pend and
// entries takes, string values aside (Marshal grows the buffer for them).
func marshalBound(pend []pendingSeries, entries []point.Entry) int {
	n := 3*binary.MaxVarintLen64 + len(pend)*(2*binary.MaxVarintLen64+1) + len(entries)*(3*binary.MaxVarintLen64+1)
	for i := range pend {
		n += len(pend[i].key)
	}
	return n
}

// assignSeriesLocked maps every field of points to a series id, checking
// kinds, and fills w.entries. Series the call creates are collected in
// w.pend with ids following the catalog's; nothing is registered yet.
// (Not to be confused with resolving a sequence number: see
// seqVisibility.resolve.)
func (db *DB) assignSeriesLocked(points []Point) error {
	w := &db.w
	w.entries = w.entries[:0]
	clear(w.pend)
	w.pend = w.pend[:0]
	clear(w.pendByID)
	w.keys = w.keys[:0] // no view of it is left
	n := db.cat.Len()
	base := uint64(n)
	// The tag-set cache pays while the catalog's sets fit the CPU's
	// caches (setCacheOn); past that, and for callers whose tag arrays are
	// always fresh, presolve looks the sets up.
	cacheable := n <= setCacheMaxSeries
	if cacheable {
		w.sizeSetCache(n)
	} else {
		w.sets = nil // the catalog has outgrown it for good
	}
	useCache := cacheable && w.setCacheOn()
	var pre []*catalog.Set
	if !useCache {
		pre = w.presolve(db.cat, points)
	}
	probes, hits := 0, 0
	callBytes := 0
	for i := range points {
		p := &points[i]
		tags := p.Tags
		// A cache hit means tags equal a known set's, which are sorted;
		// on a miss, unsorted tags are sorted into scratch, whose address
		// is not cached.
		var set *catalog.Set
		var slot *setCacheEntry
		if sample := cacheable && i%setCacheEvery == 0; useCache || sample {
			set, slot = w.cachedSet(p.Measurement, tags)
			if sample {
				probes++
				if set != nil {
					hits++
				}
			}
		}
		if set == nil && pre != nil {
			if set = pre[i]; set != nil && slot != nil {
				*slot = setCacheEntry{tags: uintptr(unsafe.Pointer(unsafe.SliceData(tags))), set: set}
			}
		}
		if set == nil && !slices.IsSortedFunc(tags, func(a, b Tag) int { return cmp.Compare(a.Key, b.Key) }) {
			w.tags = append(w.tags[:0], tags...)
			point.SortTags(w.tags)
			tags, slot = w.tags, nil
		}
		// Names equal to a known tag set's or field's were validated when
		// it was created; values are always checked.
		if set == nil {
			set = db.cat.FindSet(catalog.HashSet(p.Measurement, tags), p.Measurement, tags)
			if set != nil && slot != nil {
				*slot = setCacheEntry{tags: uintptr(unsafe.Pointer(unsafe.SliceData(tags))), set: set}
			}
		}
		if set == nil {
			if err := point.ValidateSeries(p); err != nil {
				return &PointError{Index: i, Err: err}
			}
		}
		if err := point.ValidateFieldCount(len(p.Fields)); err != nil {
			return &PointError{Index: i, Err: err}
		}
		pointBytes := 0
		for j := range p.Fields {
			if err := point.ValidateValue(&p.Fields[j]); err != nil {
				return &PointError{Index: i, Err: err}
			}
			pointBytes += point.EntryBytes(p.Fields[j].Value)
		}
		if len(p.Fields) > 1 {
			if k, dup := point.DuplicateFieldKey(p.Fields); dup {
				return &PointError{Index: i, Err: fmt.Errorf("%w: duplicate field key %q", ErrInvalid, k)}
			}
		}
		for _, f := range p.Fields {
			kind := f.Value.Kind()
			if set != nil {
				if id, have, ok := db.cat.FieldKind(set, f.Key); ok {
					if have != kind {
						return &PointError{Index: i, Err: fmt.Errorf("%w: field %q of %s is %s, not %s",
							ErrFieldTypeConflict, f.Key, p.Measurement, have, kind)}
					}
					w.entries = append(w.entries, point.Entry{ID: id, Time: p.Time, Value: f.Value})
					continue
				}
			}
			if err := point.ValidateFieldKey(f.Key); err != nil {
				return &PointError{Index: i, Err: err}
			}
			w.key = point.AppendSeriesKey(w.key[:0], p.Measurement, tags, f.Key)
			if len(w.key) > MaxKeyLen {
				return &PointError{Index: i, Err: fmt.Errorf("%w: series key of %d bytes, more than %d", ErrInvalid, len(w.key), MaxKeyLen)}
			}
			idx, ok := w.pendByID[string(w.key)]
			if ok {
				if have := w.pend[idx].kind; have != kind {
					return &PointError{Index: i, Err: fmt.Errorf("%w: field %q of %s is %s, not %s",
						ErrFieldTypeConflict, f.Key, p.Measurement, have, kind)}
				}
			} else {
				if err := db.admitSeries(p.Measurement, len(w.pend), false); err != nil {
					return &PointError{Index: i, Err: err}
				}
				idx = len(w.pend)
				key := carveKey(&w.keys, w.key) // valid until the next call; commitLocked copies it
				w.pendByID[key] = idx
				w.pend = append(w.pend, pendingSeries{key: key, kind: kind})
				pointBytes += len(key) + 16
			}
			w.entries = append(w.entries, point.Entry{ID: base + uint64(idx), Time: p.Time, Value: f.Value})
		}
		if pointBytes > MaxPointBytes {
			return &PointError{Index: i, Err: fmt.Errorf("%w: point of %d bytes, more than %d", ErrInvalid, pointBytes, MaxPointBytes)}
		}
		if callBytes += pointBytes; callBytes > MaxWriteBytes {
			return &PointError{Index: i, Err: fmt.Errorf("%w: the points up to this one take %d bytes, more than %d for one Write", ErrInvalid, callBytes, MaxWriteBytes)}
		}
	}
	w.setCacheUse(probes, hits)
	return nil
}

// pressure is how far the background is behind the writers.
type pressure int

const (
	pressureNone  pressure = iota
	pressureSlow           // delay each write a little: a stall is near
	pressureStall          // block writes until a flush or compaction ends
)

// writePressure says how writes should wait, given the sealed memtables
// queued to flush (nimm), the segments in L0 (nl0) and the bytes of the
// active memtable. Writes stall when the flush queue is full or L0 is at
// its stop; they slow when the next seal would stall them (the queue one
// short of full and the active memtable three quarters full) or L0 is
// half way from its compaction trigger to its stop. A flush running
// while the active memtable fills does not slow them by itself: it
// usually ends before the next seal.
func writePressure(o *Options, nimm, nl0 int, active int64) pressure {
	switch {
	case nimm >= o.MaxImmutableMemTables || nl0 >= o.L0StopWritesTrigger:
		return pressureStall
	case nimm > 0 && nimm >= o.MaxImmutableMemTables-1 && active >= o.MemTableBytes-o.MemTableBytes/4,
		l0Deep(o, nl0):
		return pressureSlow
	}
	return pressureNone
}

// throttle slows writers when flushes or L0 compactions fall behind and
// blocks them when they are far behind, so memory stays bounded. Writers
// are never failed for it.
func (db *DB) throttle() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	slowed := false
	for {
		if db.mu.bgErr != nil {
			return fmt.Errorf("background error: %w", db.mu.bgErr)
		}
		if db.mu.closing || db.closed.Load() {
			return ErrClosed
		}
		nimm, nl0 := len(db.mu.imm), len(db.mu.v.Levels[0])
		if db.opts.DisableBackgroundCompaction {
			nl0 = 0 // nothing would compact L0 for a stalled writer
		}
		mem := db.mu.mem
		switch writePressure(db.opts, nimm, nl0, mem.t.Bytes()+mem.keyBytes.Load()) {
		case pressureNone:
			return nil
		case pressureSlow:
			if slowed {
				return nil
			}
			// Slow down: give the background a millisecond per write.
			slowed = true
			db.st.writeSlowdowns.Add(1)
			db.mu.Unlock()
			time.Sleep(time.Millisecond)
			db.mu.Lock()
			continue
		}
		db.st.writeStalls.Add(1)
		if nl0 >= db.opts.L0StopWritesTrigger {
			db.maybeScheduleCompaction()
		}
		// Background compactions yield to a flush that writers wait on
		// (yieldToFlush).
		flushBound := nimm >= db.opts.MaxImmutableMemTables
		if flushBound {
			db.mu.flushStalls++
		}
		db.mu.cond.Wait()
		if flushBound {
			// The last writer to leave wakes a compaction paused for
			// the stall: it may have woken first, seen the stall still
			// counted, and waited again.
			if db.mu.flushStalls--; db.mu.flushStalls == 0 {
				db.mu.cond.Broadcast()
			}
		}
	}
}

// sealLocked turns the active memtable into an immutable one queued for
// flush and starts a fresh one. With roll, the WAL moves to a new file so
// the sealed memtable's records end with a whole file; Close seals without
// it, because no record follows. The caller holds commitMu.
func (db *DB) sealLocked(roll bool) error {
	walEnd := db.wal.CurrentFile() + 1
	if roll {
		var err error
		if walEnd, err = db.wal.Rotate(); err != nil {
			return fmt.Errorf("rotate wal: %w", err)
		}
	}
	db.mu.Lock()
	old := db.mu.mem
	old.walEnd = walEnd
	old.seriesEnd = db.cat.Len()
	old.sealed = true
	db.mu.imm = append(db.mu.imm, old)
	db.mu.mem = db.newMemRef(db.seq.Load())
	db.mu.cond.Broadcast()
	db.mu.Unlock()
	return nil
}

// maxMemKeyBytes bounds the series keys one memtable references, whatever
// MemTableBytes is: its flush writes them all to one segment index, which
// segment readers accept up to 1 GiB.
const maxMemKeyBytes = 256 << 20

// newMemRef returns an empty memtable whose samples are all written after
// sequence number tombApplied. It counts the key bytes of the series it
// holds, which its flush writes to the segment index, toward its size.
func (db *DB) newMemRef(tombApplied uint64) *memRef {
	m := &memRef{t: memtable.New(), tombApplied: tombApplied}
	m.t.OnNewSeries(func(id uint64) {
		// Called by Apply, which runs under commitMu (or alone, in
		// recovery): the catalog only grows under commitMu, so reading it
		// here needs no lock.
		s, _ := db.cat.Meta(id)
		m.keyBytes.Add(int64(len(s.Key)))
	})
	return m
}

// Delete removes the samples s selects that were written before it; later
// writes into the range are kept. It is applied to reads at once, as a
// tombstone (see tombstone.go), and physically by flush and compaction.
// A ctx cancelled before the delete is logged makes it return ctx's error
// with nothing deleted; once logged, the delete is done and Delete returns
// its outcome (a cancellation then only cuts short the freeing of memtable
// samples, which stay hidden until flushed).
func (db *DB) Delete(ctx context.Context, s Selector) error {
	if err := validateSelector(&s); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := db.checkOpen(); err != nil {
		return err
	}
	if err := db.checkWritable(); err != nil {
		return err
	}
	sel := s
	sel.Tags = slices.Clone(s.Tags)
	point.SortTags(sel.Tags)
	sel.Matchers = slices.Clone(s.Matchers)

	db.commitMu.Lock()
	if err := db.checkOpen(); err != nil {
		db.commitMu.Unlock()
		return err
	}
	if err := ctx.Err(); err != nil { // cancelled while waiting for writers
		db.commitMu.Unlock()
		return err
	}
	seq := db.seq.Load() + 1
	rec := wal.Delete{Seq: seq, Selector: sel}
	pos, err := db.wal.Write(wal.RecordDelete, rec.Marshal(nil))
	if err != nil {
		db.commitMu.Unlock()
		return err // wal errors name the log and file
	}
	db.seq.Store(seq)
	// Readers ignore the tombstone until seq is published.
	db.mu.Lock()
	db.mu.tombstones = append(slices.Clip(db.mu.tombstones), tombstone{seq: seq, sel: sel})
	db.mu.mem.deletes = true
	db.mu.Unlock()
	db.commitMu.Unlock()
	if err := db.wal.SyncTo(pos); err != nil {
		db.mu.Lock()
		db.mu.tombstones = slices.DeleteFunc(slices.Clone(db.mu.tombstones), func(t tombstone) bool { return t.seq == seq })
		db.mu.Unlock()
		db.vis.resolve(seq)
		return err
	}
	db.st.deletes.Add(1)
	db.vis.resolve(seq)
	db.vis.wait(seq)
	db.reclaimDeleted(ctx, &sel, seq)
	return nil
}

func validateSelector(s *Selector) error {
	if s.Measurement == "" {
		return fmt.Errorf("%w: empty measurement", ErrInvalid)
	}
	return validateSelectorFilters(s)
}
