package engine

// The change feed: a commit hook through which a subscriber (package
// forward's durable queue) sees every batch of samples the database logs,
// in commit order, whatever path wrote it (Write, lineproto, HTTP).
//
// For each Write the engine calls, holding its commit lock:
//
//	FeedPrepare(rec)        before the WAL record is written
//	FeedCommit(seq, logged) after the write: logged tells whether the record
//	                        is in the WAL (and so stored) or not
//
// and, to a subscriber that is also a FeedResolver, after the commit lock
// is released and the record's durability is resolved (the fsync the sync
// mode asks for: Write's return):
//
//	FeedResolve(seq, kept)  kept is false when the WAL could not make the
//	                        record durable and the write was undone: Write
//	                        returns an error and the database does not hold
//	                        the batch (the WAL then refuses every later write
//	                        until the database is reopened)
//
// Calling FeedPrepare before the WAL write makes a subscriber that persists
// the record there hold a superset of what the WAL holds: no crash can
// leave a logged record that the subscriber never saw. The one record it
// may hold in excess (prepared, then a crash before or during the WAL
// write) has a sequence number above FeedInfo.RecoveredSeq after the
// restart, so the subscriber can tell it apart and drop it. Deletes are not
// fed.

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/wal"
)

// FeedFormatBatch is the encoding of FeedRecord.Payload: the payload of a
// WAL batch record (drawn at the top of wal/record.go). Subscribers that
// store payloads keep the format byte beside them and pass both to
// FeedDecoder.Decode. The value is part of durable formats and must not be
// changed; a new encoding gets a new value.
const FeedFormatBatch byte = 1

// FeedRecord is one batch of samples about to be logged.
type FeedRecord struct {
	Seq     uint64 // sequence number of the batch; ascending from call to call
	Samples int    // samples in the batch (one per field of each point)
	Format  byte   // encoding of Payload (FeedFormatBatch)
	Payload []byte // valid only during the call: copy what is kept
}

// FeedSubscriber receives the change feed. Both methods run with the
// database's commit lock held, so every write waits for them: they must be
// quick (append to a file, signal a goroutine), must not block on the
// network, and must not call the DB's write methods (which would
// deadlock). They cannot veto a write: a subscriber that fails to keep a
// record accounts for it itself.
type FeedSubscriber interface {
	// FeedPrepare is called with each batch before it is logged.
	FeedPrepare(rec *FeedRecord)
	// FeedCommit follows every FeedPrepare, with the same seq: logged is
	// true when the batch is in the WAL and applied, false when logging
	// failed and the write returns an error (nothing of it is stored).
	FeedCommit(seq uint64, logged bool)
}

// FeedResolver is implemented by a FeedSubscriber that needs to know
// whether a logged batch stayed in the database: FeedResolve follows every
// FeedCommit(seq, true), once Write knows whether the record is durable, so
// that a subscriber that passes batches on (package forward) passes on only
// those kept. It runs without the commit lock, possibly after Unsubscribe
// returned for writes already committed, and calls for different seqs may
// come in any order; like the other methods it must be quick.
type FeedResolver interface {
	FeedResolve(seq uint64, kept bool)
}

// FeedInfo describes the database's sequence numbers when Subscribe
// returned.
type FeedInfo struct {
	// RecoveredSeq is the last sequence number the database recovered on
	// Open (manifest and WAL replay). A record a subscriber kept from
	// before the restart with a larger sequence number was never logged.
	RecoveredSeq uint64
	// Seq is the last sequence number assigned so far. Batches written
	// between Open and Subscribe (RecoveredSeq < seq <= Seq) were not fed.
	Seq uint64
}

// FeedSample is one decoded sample of a feed record: the series id (see
// FeedSeries), the time in Unix ns and the value.
type FeedSample = point.Entry

// feed is the DB's subscriber list, replaced whole under commitMu and read
// without a lock on the write path.
type feed struct {
	subs      atomic.Pointer[[]FeedSubscriber]
	recovered uint64 // set by Open, read-only after
}

// Subscribe registers s to receive every batch logged from now on. It takes
// the commit lock, so s sees whole writes only.
func (db *DB) Subscribe(s FeedSubscriber) (FeedInfo, error) {
	if db.opts.ReadOnly {
		return FeedInfo{}, ErrReadOnly
	}
	db.commitMu.Lock()
	defer db.commitMu.Unlock()
	if err := db.checkOpen(); err != nil {
		return FeedInfo{}, err
	}
	var subs []FeedSubscriber
	if p := db.feed.subs.Load(); p != nil {
		subs = slices.Clone(*p)
	}
	subs = append(subs, s)
	db.feed.subs.Store(&subs)
	return FeedInfo{RecoveredSeq: db.feed.recovered, Seq: db.seq.Load()}, nil
}

// FeedState returns the database's sequence numbers now, as Subscribe
// would: a subscriber that keeps records on disk reads RecoveredSeq to
// reconcile them before it subscribes.
func (db *DB) FeedState() FeedInfo {
	return FeedInfo{RecoveredSeq: db.feed.recovered, Seq: db.seq.Load()}
}

// Unsubscribe removes s; when it returns, s receives no further call.
func (db *DB) Unsubscribe(s FeedSubscriber) {
	db.commitMu.Lock()
	defer db.commitMu.Unlock()
	p := db.feed.subs.Load()
	if p == nil {
		return
	}
	subs := slices.DeleteFunc(slices.Clone(*p), func(x FeedSubscriber) bool { return x == s })
	db.feed.subs.Store(&subs)
}

// feedPrepare hands the batch about to be logged to the subscribers and
// returns them, so that feedCommit reaches the same set. The caller holds
// commitMu.
func (db *DB) feedPrepare(seq uint64, samples int, payload []byte) []FeedSubscriber {
	p := db.feed.subs.Load()
	if p == nil || len(*p) == 0 {
		return nil
	}
	rec := FeedRecord{Seq: seq, Samples: samples, Format: FeedFormatBatch, Payload: payload}
	for _, s := range *p {
		s.FeedPrepare(&rec)
	}
	return *p
}

func feedCommit(subs []FeedSubscriber, seq uint64, logged bool) {
	for _, s := range subs {
		s.FeedCommit(seq, logged)
	}
}

// feedResolve tells the subscribers that are FeedResolvers whether the
// logged batch seq was kept. The caller does not hold commitMu.
func feedResolve(subs []FeedSubscriber, seq uint64, kept bool) {
	for _, s := range subs {
		if r, ok := s.(FeedResolver); ok {
			r.FeedResolve(seq, kept)
		}
	}
}

// FeedSeries describes the series with the given id, as FeedSample.ID
// names it. Ids are never reused, so a record kept on disk resolves the
// same way after a restart. It works after Close too.
//
// info.Tags is a slice of its own, its strings the catalog's.
func (db *DB) FeedSeries(id uint64) (key string, info SeriesInfo, ok bool) {
	m, ok := db.cat.Meta(id)
	if !ok {
		return "", SeriesInfo{}, false
	}
	return m.Key, SeriesInfo{Measurement: m.Set.Measurement(), Tags: m.Set.Tags(), Field: m.Field, Kind: m.Kind}, true
}

// Dir returns the directory the database was opened in.
func (db *DB) Dir() string { return db.dir }

// FeedDecoder decodes feed payloads, reusing its buffers from call to call.
// The zero value is ready to use; it is not safe for concurrent use.
type FeedDecoder struct {
	b wal.Batch
}

// Decode returns the samples of a payload of the given format, in the
// order they were written. The slice is valid until the next call. A
// payload that does not decode, or whose sequence number is not seq, is an
// error wrapping ErrCorrupt.
func (d *FeedDecoder) Decode(format byte, seq uint64, payload []byte) ([]FeedSample, error) {
	if format != FeedFormatBatch {
		return nil, fmt.Errorf("%w: unknown feed format %d", ErrCorrupt, format)
	}
	if err := d.b.Unmarshal(payload); err != nil {
		return nil, fmt.Errorf("decode feed record %d: %w", seq, err)
	}
	if d.b.Seq != seq {
		return nil, fmt.Errorf("%w: feed record %d holds batch %d", ErrCorrupt, seq, d.b.Seq)
	}
	return d.b.Entries, nil
}
