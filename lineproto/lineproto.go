package lineproto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
)

// DB receives the points. *engine.DB satisfies it.
//
// Write must be atomic (all points or none). To refuse a point it returns an
// error for which errors.As finds a *base.PointError whose Index is the
// point's position in points and whose Err wraps base.ErrInvalid,
// base.ErrFieldTypeConflict or base.ErrSeriesLimit; any other error is a
// failure that ends the ingest. Write must not keep points or their Tags and Fields slices after it
// returns (they are reused for the next batch); it may keep the strings.
type DB interface {
	Write(points []point.Point) error
}

// AppenderDB is a DB that also takes samples through an appender with
// series refs; *engine.DB is one. Write then hands each batch to one
// appender Commit (atomic as one db.Write) and remembers the ref of each
// series section and field it has seen, so that a line of a known series
// is stored without resolving its names again. Refs are remembered across
// Write calls on the same db (a comparable value, such as a pointer).
//
// A wrapper that embeds *engine.DB to intercept Write inherits
// SampleAppender too, and its Write is then never called: hold the engine
// in a named field instead (or give the wrapper its own SampleAppender).
type AppenderDB interface {
	DB
	SampleAppender() point.SampleAppender
}

// Precision is the unit of the timestamps in the input.
type Precision uint8

const (
	Nanosecond Precision = iota // the default
	Microsecond
	Millisecond
	Second
)

// ParsePrecision returns the precision named s: "ns", "us" (or "µs"), "ms"
// or "s".
func ParsePrecision(s string) (Precision, error) {
	switch s {
	case "ns", "n":
		return Nanosecond, nil
	case "us", "u", "µs":
		return Microsecond, nil
	case "ms":
		return Millisecond, nil
	case "s":
		return Second, nil
	}
	return 0, fmt.Errorf("%w: unknown precision %q (want ns, us, ms or s)", base.ErrInvalid, s)
}

// Duration returns one unit of p.
func (p Precision) Duration() time.Duration {
	switch p {
	case Microsecond:
		return time.Microsecond
	case Millisecond:
		return time.Millisecond
	case Second:
		return time.Second
	}
	return time.Nanosecond
}

func (p Precision) String() string {
	switch p {
	case Nanosecond:
		return "ns"
	case Microsecond:
		return "us"
	case Millisecond:
		return "ms"
	case Second:
		return "s"
	}
	return fmt.Sprintf("Precision(%d)", uint8(p))
}

// Defaults for the zero fields of Options.
const (
	DefaultBatchSize    = 5000
	DefaultMaxLineBytes = 64 << 10
	DefaultMaxRejected  = 100
	DefaultLinger       = time.Second
)

// Options configure Write. The zero value is valid: every zero field means
// its default.
type Options struct {
	// Precision is the unit of the timestamps; default Nanosecond.
	Precision Precision
	// Now gives the timestamp of lines without one, truncated to Precision.
	// It is read once per batch; default time.Now.
	Now func() time.Time
	// BatchSize is the number of points per db.Write; default 5000.
	BatchSize int
	// MaxLineBytes is the longest entry accepted, not counting its final
	// newline. A longer one is rejected alone and reading resumes at the next
	// newline. Default 64 KiB.
	MaxLineBytes int
	// MaxRejected is how many rejected entries Result.Rejected keeps: those
	// with the lowest line numbers. Every rejection is counted in
	// Result.RejectedCount, so memory does not grow with the number of bad
	// lines. Default 100.
	MaxRejected int
	// Linger is the longest a complete entry waits, in a batch that is not
	// full, before it is written: when the input is idle (a pipe, a socket)
	// Write writes what it has after Linger instead of waiting for a full
	// batch or the end of the input. Default 1s, as Telegraf's flush
	// interval.
	Linger time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if o.Precision > Second {
		return o, fmt.Errorf("lineproto: %w: unknown precision %d", base.ErrInvalid, o.Precision)
	}
	if o.BatchSize < 0 {
		return o, fmt.Errorf("lineproto: %w: negative batch size %d", base.ErrInvalid, o.BatchSize)
	}
	if o.MaxLineBytes < 0 {
		return o, fmt.Errorf("lineproto: %w: negative max line bytes %d", base.ErrInvalid, o.MaxLineBytes)
	}
	if o.Linger < 0 {
		return o, fmt.Errorf("lineproto: %w: negative linger %v", base.ErrInvalid, o.Linger)
	}
	if o.MaxRejected < 0 {
		return o, fmt.Errorf("lineproto: %w: negative max rejected %d", base.ErrInvalid, o.MaxRejected)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.MaxLineBytes == 0 {
		o.MaxLineBytes = DefaultMaxLineBytes
	}
	if o.MaxRejected == 0 {
		o.MaxRejected = DefaultMaxRejected
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	return o, nil
}

// Result reports what Write did.
type Result struct {
	Lines  int // entries read: non-blank, non-comment lines
	Points int // points written
	// Rejected holds the first Options.MaxRejected entries not written, in
	// line order.
	Rejected []*LineError
	// RejectedCount is the number of entries not written, kept in Rejected
	// or not: Lines == Points + RejectedCount once the input is read to the
	// end.
	RejectedCount int
}

// LineError is an entry that was not written and why.
type LineError struct {
	Line int   // 1-based physical line where the entry starts
	Err  error // the reason
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

func (e *LineError) Unwrap() error { return e.Err }

// ErrLineTooLong is the reason of an entry longer than Options.MaxLineBytes.
var ErrLineTooLong = errors.New("lineproto: line too long")

// invalidError is the reason the parser rejected an entry. It matches
// base.ErrInvalid with errors.Is and unwraps to the cause.
type invalidError struct {
	col int // 1-based column in the entry's line, or 0 when unknown
	err error
}

func (e *invalidError) Error() string {
	if e.col > 0 {
		return fmt.Sprintf("column %d: %v", e.col, e.err)
	}
	return e.err.Error()
}

func (e *invalidError) Unwrap() error { return e.err }

func (e *invalidError) Is(target error) bool { return target == base.ErrInvalid }

func invalidf(format string, args ...any) error {
	return &invalidError{err: fmt.Errorf(format, args...)}
}

// errNotKept is the reason given to a rejected entry whose reason Result
// will not keep (Options.MaxRejected lower line numbers are kept already):
// wording it would only make garbage, one allocation or more a line.
var errNotKept = &invalidError{err: errors.New("lineproto: invalid entry (reason not kept)")}

// Write reads line protocol from r and writes it to db in batches of
// opts.BatchSize points, and writes a partial batch once its first entry has
// waited opts.Linger. It returns a nil error when r was read to the end,
// whatever the number of rejected lines; the error of r or of db otherwise.
// Points acknowledged by db before an error stay written. Memory use is
// bounded by the batch, not by the input.
//
// Cancelling ctx stops the ingest promptly, even while a Read of r blocks:
// Write stops reading, writes every complete entry it has read (those in
// Result), and returns ctx.Err(). Only an entry whose end was not read yet is
// dropped, so no line Write has taken from r is lost silently. Reads of r run
// in a goroutine of their own; when ctx is cancelled during a Read that
// blocks, Write returns without waiting for it, the goroutine ends when that
// Read returns, and what it read is discarded: do not use r after a
// cancelled Write. A *bytes.Buffer is read in place instead, 64 KiB at a
// time, with no goroutine and no copy: a server's request body read whole
// costs no more than its parse.
func Write(ctx context.Context, db DB, r io.Reader, opts Options) (Result, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	w := getWriter()
	w.start(ctx, db, o)
	defer w.release()
	in := newInput(ctx, r)
	defer in.close()
	w.in = in
	err = w.run(in)
	return w.res, err
}

// writers keeps idle writers between Write calls: their buffers, and
// their tables of names and series sections (with the refs of a DB's
// series), so that a server's requests do not build them again each time.
// It is a bounded free list rather than a sync.Pool, which every garbage
// collection empties: a server allocating steadily would lose its tables
// every few requests.
var writers struct {
	sync.Mutex
	free []*writer
}

// maxIdleWriters bounds the idle writers kept: each holds at most
// maxInternBytes + maxSeriesBytes of tables and a batch of buffers.
var maxIdleWriters = max(2, runtime.GOMAXPROCS(0))

func getWriter() *writer {
	writers.Lock()
	defer writers.Unlock()
	if n := len(writers.free); n > 0 {
		w := writers.free[n-1]
		writers.free[n-1] = nil
		writers.free = writers.free[:n-1]
		return w
	}
	return &writer{
		names:  make(map[string]string),
		series: make(map[string]*series),
	}
}

func putWriter(w *writer) {
	writers.Lock()
	defer writers.Unlock()
	if len(writers.free) < maxIdleWriters {
		writers.free = append(writers.free, w)
	}
}

// start readies w, from the pool, for a Write call.
func (w *writer) start(ctx context.Context, db DB, o Options) {
	w.ctx, w.db, w.opts = ctx, db, o
	w.unit = int64(o.Precision.Duration())
	w.res = Result{}
	w.phys, w.open, w.skipping, w.cur, w.pieces = 0, false, false, splitEntry{}, 0
	w.chunkEntries = 1
	w.nowSet, w.retries = false, 0
	w.app = nil
	adb, ok := db.(AppenderDB)
	if !ok || !reflect.TypeOf(db).Comparable() {
		return
	}
	if w.owner != db {
		// The refs remembered are another DB's.
		for _, s := range w.series {
			s.refs = nil
		}
		w.owner, w.ownerApp = db, adb.SampleAppender()
	}
	w.app = w.ownerApp
}

// release returns w to the pool, holding no caller memory but the DB whose
// refs its tables remember.
func (w *writer) release() {
	if w.app != nil {
		w.app.Rollback()
	}
	clear(w.points)
	clear(w.sers)
	w.points, w.sers, w.lines = w.points[:0], w.sers[:0], w.lines[:0]
	w.tags, w.fields = w.tags[:0], w.fields[:0]
	w.chunk, w.entries = w.chunk[:0], w.entries[:0]
	if cap(w.chunk) > 4*chunkBytes {
		w.chunk = nil
	}
	if cap(w.points) > maxPooledPoints {
		w.points, w.sers, w.lines, w.tags, w.fields = nil, nil, nil, nil, nil
	}
	w.ctx, w.db, w.in, w.app, w.res = nil, nil, nil, nil, Result{}
	putWriter(w)
}

// maxPooledPoints is the largest batch whose buffers a pooled writer keeps.
const maxPooledPoints = 1 << 16

const (
	// The entries split so far are decoded when they fill chunkBytes or
	// reach writer.chunkEntries, which doubles from 1 to maxChunkEntries.
	chunkBytes      = 64 << 10
	maxChunkEntries = 4096
	// checkContextEvery is how many input pieces pass between two
	// looks at ctx.
	checkContextEvery = 128
	// wholeRetries is how many points of a batch the DB may refuse before
	// the points ahead of a refused one are written on their own, which
	// bounds the work for a batch full of conflicts.
	wholeRetries = 8
	// maxInterned, maxInternLen and maxInternBytes bound the table of
	// names, maxSeries, maxSeriesLen and maxSeriesBytes the table of series
	// sections: a table is emptied when it would go past its bound. The
	// bytes count the keys and strings, and entryCost for each entry, tag
	// or name besides.
	maxInterned    = 1 << 16
	maxInternLen   = 256
	maxInternBytes = 4 << 20
	maxSeries      = 1 << 16
	maxSeriesLen   = 1024
	maxSeriesBytes = 8 << 20
	entryCost      = 64
)

// readBufSize is the longest piece of a line that the splitter gets at once;
// longer lines arrive in several pieces. Tests make it small to send lines
// through pieces.
var readBufSize = 64 << 10

// entry is one split entry, on a line of writer.chunk.
type entry struct {
	line  int   // physical line where it starts
	shift int   // added to a decoder column to give the input column
	multi bool  // it spans several physical lines
	err   error // set for an entry rejected while splitting (too long)

	// A line whose series section (measurement and tags: the bytes before
	// the first unescaped space) was seen before is copied into chunk with
	// that section replaced by a one-byte measurement, and series holds
	// what the decoder made of it. Otherwise off and prefix locate the
	// section in chunk, to remember it once the line is decoded.
	series *series
	off    int
	prefix int
	end    int // offset in chunk of the newline that ends it
}

// series is the decoded series section of a line.
type series struct {
	measurement string
	tags        []point.Tag
	refs        []fieldRef // the appender's refs of its fields
}

// fieldRef is the ref of one field of a series section.
type fieldRef struct {
	field string
	ref   point.SeriesRef
}

// maxFieldRefs bounds the refs a series section remembers.
const maxFieldRefs = 64

func (s *series) ref(field string) point.SeriesRef {
	for _, r := range s.refs {
		if r.field == field {
			return r.ref
		}
	}
	return 0
}

// writer is the state of one Write call. The splitter (split.go) turns the
// input into entries, one line each, in chunk; decode (decode.go) turns them
// into points, and flush hands full batches to the DB.
type writer struct {
	ctx  context.Context
	db   DB
	opts Options
	unit int64 // nanoseconds per timestamp unit
	res  Result

	// Splitter state.
	phys     int  // physical lines read completely
	open     bool // an entry is being split (slow path)
	skipping bool // dropping the rest of a too-long line
	cur      splitEntry
	pieces   int // input pieces read, for the context check

	// chunk holds split entries, each on one line ending in '\n', with the
	// newlines of multi-line string values written as "\n" escapes.
	chunk        []byte
	entries      []entry
	chunkEntries int // entries that make a chunk: 1 at first, doubling to maxChunkEntries

	// The batch being built. Tags and Fields of points are carved from
	// tags and fields.
	points []point.Point
	lines  []int // line of each point
	tags   []point.Tag
	fields []point.Field
	names  map[string]string  // interned names, so repeated series do not allocate
	recent [16]string         // the name last seen at each position of a line
	series map[string]*series // series sections decoded before, by their bytes

	namesBytes, seriesBytes int // what the tables hold, as maxInternBytes counts

	nowSet  bool
	nowNS   int64 // Options.Now for this batch
	retries int   // points refused by the DB in this batch

	in   *input   // sets the linger deadline of what is pending
	keys []string // scratch space of validate
	// detail: the reason of the entry being decoded is kept if it is
	// rejected (keeps), so worth wording; otherwise errNotKept stands in.
	detail bool

	// With an AppenderDB: sers holds the series section of each point of
	// the batch (nil when not remembered), app the appender of owner, the
	// DB whose refs the series sections hold.
	sers     []*series
	app      point.SampleAppender
	owner    DB
	ownerApp point.SampleAppender
	okIdx    []int // scratch of appendBatch: the points appended
}

// keeps reports whether reject would keep the reason of a rejection of the
// entry at line.
func (w *writer) keeps(line int) bool {
	rej := w.res.Rejected
	return len(rej) < w.opts.MaxRejected || rej[len(rej)-1].Line > line
}

// reject records that the entry at line was not written. Rejected keeps the
// MaxRejected lowest line numbers, in order. The parser rejects in line
// order, so the usual case appends or drops; the DB's refusals, which come
// after the parser's rejections of later lines of the same batch, are
// inserted in place.
func (w *writer) reject(line int, err error) {
	w.res.RejectedCount++
	rej := w.res.Rejected
	n := len(rej)
	if n > 0 && rej[n-1].Line > line {
		i, _ := slices.BinarySearchFunc(rej, line, func(le *LineError, line int) int { return le.Line - line })
		if n == w.opts.MaxRejected {
			clear(rej[n-1:])
			rej = rej[:n-1]
		}
		w.res.Rejected = slices.Insert(rej, i, &LineError{Line: line, Err: err})
		return
	}
	if n < w.opts.MaxRejected {
		w.res.Rejected = append(rej, &LineError{Line: line, Err: err})
	}
}

func (w *writer) run(in *input) error {
	for {
		seg, rerr := in.readSlice(readBufSize)
		// A piece that ends neither its line nor the input: more of the
		// line follows, now or after an idle wait or never (stop).
		more := rerr == errPiece || rerr == errLinger || rerr == errStop
		final := rerr != nil && !more
		nl := len(seg) > 0 && seg[len(seg)-1] == '\n'
		body := seg
		if nl {
			body = seg[:len(seg)-1]
		}
		var err error
		switch {
		case w.skipping:
			if nl {
				w.phys++
				w.skipping = false
			}
		case final && rerr != io.EOF:
			// A read error: the unfinished line is dropped.
		case !w.open && (nl || final) && fastLine(body):
			if nl || len(body) > 0 {
				err = w.addLine(body)
			}
		case w.open || nl || len(body) > 0:
			err = w.addPiece(body, nl, final)
		}
		if err != nil {
			return err
		}
		switch {
		case rerr == nil || rerr == errPiece:
			if w.pieces++; w.pieces%checkContextEvery == 0 && w.ctx.Err() != nil {
				// Take in what was read; the input then reports errStop.
				in.drain()
			}
			continue
		case rerr == errLinger:
			// The input is idle: write what is complete.
			if err := w.decodeChunk(); err != nil {
				return err
			}
			if err := w.flush(); err != nil {
				return err
			}
			continue
		case rerr == errStop:
			return w.stop()
		}
		// End of input or a read error: write what was read completely.
		if err := w.decodeChunk(); err != nil {
			return err
		}
		if err := w.flush(); err != nil {
			return err
		}
		if rerr != io.EOF {
			return fmt.Errorf("lineproto: read input: %w", rerr)
		}
		return nil
	}
}

// stop ends a cancelled Write: it writes the complete entries read so far
// and returns the context's error.
func (w *writer) stop() error {
	if err := w.decodeChunk(); err != nil {
		return err
	}
	if err := w.flush(); err != nil {
		return err
	}
	return w.ctx.Err()
}

// pending notes that an entry or a point waits to be written: the input
// stops waiting for more at the linger deadline.
func (w *writer) pending() {
	if w.in != nil && w.in.deadline.IsZero() {
		w.in.deadline = time.Now().Add(w.opts.Linger)
	}
}

// endEntry appends the entry that ends at the end of chunk to entries and
// decodes the chunk when it is full.
func (w *writer) endEntry(e entry) error {
	e.end = len(w.chunk)
	w.chunk = append(w.chunk, '\n')
	w.entries = append(w.entries, e)
	w.res.Lines++
	w.pending()
	if len(w.chunk) >= chunkBytes || len(w.entries) >= w.chunkEntries {
		return w.decodeChunk()
	}
	return nil
}

// tooLong records an entry rejected for its length.
func (w *writer) tooLong(line int) error {
	return w.badEntry(line, &invalidError{
		err: fmt.Errorf("%w: more than %d bytes", ErrLineTooLong, w.opts.MaxLineBytes),
	})
}

// badEntry records an entry that the splitter rejects itself; it keeps its
// place among the entries so that Rejected stays in line order.
func (w *writer) badEntry(line int, err error) error {
	w.entries = append(w.entries, entry{line: line, err: err})
	w.res.Lines++
	w.pending()
	if len(w.entries) >= w.chunkEntries {
		return w.decodeChunk()
	}
	return nil
}

// flush writes the batch and starts a new one.
func (w *writer) flush() error {
	if w.in != nil {
		w.in.deadline = time.Time{}
	}
	if len(w.points) > 0 {
		write := w.write
		if w.app != nil {
			write = w.appendBatch
		}
		if err := write(w.points, w.lines); err != nil {
			return err
		}
	}
	clear(w.points) // drop references to strings for the GC
	clear(w.sers)
	w.points, w.lines, w.sers = w.points[:0], w.lines[:0], w.sers[:0]
	w.tags, w.fields = w.tags[:0], w.fields[:0]
	w.nowSet = false
	w.retries = 0
	return nil
}

// write hands pts to the DB. When the DB refuses a point, its line is
// rejected and the others are written again without it.
func (w *writer) write(pts []point.Point, lines []int) error {
	for len(pts) > 0 {
		err := w.db.Write(pts)
		if err == nil {
			w.res.Points += len(pts)
			return nil
		}
		var pe *base.PointError
		if !errors.As(err, &pe) || pe.Index < 0 || pe.Index >= len(pts) || !refused(pe.Err) {
			return err
		}
		i := pe.Index
		w.reject(lines[i], pe.Err)
		if w.retries++; w.retries > wholeRetries && i > 0 {
			// Many refusals in this batch: write the points ahead of the
			// refused one by themselves, so that each point is offered a
			// bounded number of times.
			if err := w.write(pts[:i], lines[:i]); err != nil {
				return err
			}
			pts, lines = pts[i+1:], lines[i+1:]
			continue
		}
		pts, lines = slices.Delete(pts, i, i+1), slices.Delete(lines, i, i+1)
	}
	return nil
}

// refused reports whether err is the DB refusing a point (which rejects its
// line) rather than a failure.
func refused(err error) bool {
	return errors.Is(err, base.ErrInvalid) || errors.Is(err, base.ErrFieldTypeConflict) ||
		errors.Is(err, base.ErrSeriesLimit)
}

// appendBatch hands pts to the appender, a line whole or not at all, and
// commits them as one batch. A line the appender refuses is rejected; a
// Commit refused for a point (a series past a series limit, or one that
// another writer created with another kind meanwhile) writes the lines
// through db.Write instead, which names the refused ones.
func (w *writer) appendBatch(pts []point.Point, lines []int) error {
	app := w.app
	ok := w.okIdx[:0]
	defer func() { w.okIdx = ok[:0] }()
	for i := range pts {
		mark := app.Pending()
		err := w.appendPoint(&pts[i], w.sers[i])
		if err != nil && errors.Is(err, point.ErrBatchFull) && len(ok) > 0 {
			// The batch is full: store it and start the next with this line.
			app.Truncate(mark)
			if err := w.commitAppended(pts, lines, ok); err != nil {
				return err
			}
			ok, mark = ok[:0], 0
			err = w.appendPoint(&pts[i], w.sers[i])
		}
		if err != nil {
			app.Truncate(mark)
			if !refused(err) {
				app.Rollback()
				return err
			}
			w.reject(lines[i], err)
			continue
		}
		ok = append(ok, i)
	}
	return w.commitAppended(pts, lines, ok)
}

// appendPoint appends the fields of p, whose series section is s (or nil).
func (w *writer) appendPoint(p *point.Point, s *series) error {
	for _, f := range p.Fields {
		var ref point.SeriesRef
		if s != nil {
			ref = s.ref(f.Key)
		}
		r, err := w.app.Append(ref, p.Measurement, p.Tags, f.Key, p.Time, f.Value)
		if err != nil && ref != 0 && !errors.Is(err, point.ErrBatchFull) && refused(err) {
			// A ref of a series whose batch was not stored, or a kind
			// conflict: resolve the names again, which also names them in
			// the error.
			r, err = w.app.Append(0, p.Measurement, p.Tags, f.Key, p.Time, f.Value)
		}
		if err != nil {
			return err
		}
		if s != nil && r != ref {
			w.setRef(s, f.Key, r)
		}
	}
	return nil
}

// setRef remembers ref for field of s, within the bounds of the table.
func (w *writer) setRef(s *series, field string, ref point.SeriesRef) {
	for i := range s.refs {
		if s.refs[i].field == field {
			s.refs[i].ref = ref
			return
		}
	}
	if len(s.refs) < maxFieldRefs && w.seriesBytes+entryCost <= maxSeriesBytes {
		w.seriesBytes += entryCost
		s.refs = append(s.refs, fieldRef{field: field, ref: ref})
	}
}

// commitAppended commits the appender's batch, which holds the points of
// pts at the indexes ok.
func (w *writer) commitAppended(pts []point.Point, lines []int, ok []int) error {
	if len(ok) == 0 {
		return w.app.Rollback()
	}
	err := w.app.Commit()
	if err == nil {
		w.res.Points += len(ok)
		return nil
	}
	var pe *base.PointError
	if !errors.As(err, &pe) || !refused(pe.Err) {
		return err
	}
	// Rare: write these points through Write, which rejects the lines
	// it refuses one by one.
	rp := make([]point.Point, len(ok))
	rl := make([]int, len(ok))
	for j, i := range ok {
		rp[j], rl[j] = pts[i], lines[i]
	}
	return w.write(rp, rl)
}
