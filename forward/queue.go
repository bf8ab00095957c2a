package forward

// The forward queue: a directory of append-only files holding every batch
// the engine's change feed hands over, and a cursor file saying how much of
// it the remote has acknowledged. Their formats, and what a reader does
// with damage, are drawn at the top of queuefmt.go. Every file operation
// goes through a vfs.FS (the operating system's, or a simulated one in
// tests); the active file is mapped only where the FS hands out
// operating-system files (see mapActive).

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stratadb/strata/internal/record"
	"github.com/stratadb/strata/internal/vfs"
)

// createRetry is how long the writer waits, after it failed to start a
// queue file (a full disk), before it tries again; the batches written
// meanwhile are counted as dropped.
const createRetry = time.Second

// hole is a damaged byte range of a queue file that Open found and counted:
// the reader skips it.
type hole struct{ off, end int64 }

// qfile is what the queue knows of one of its files.
type qfile struct {
	num      uint64
	version  byte
	hdr      int64  // header size: the first frame's offset
	start    uint64 // version 2: the count of the file's first frame
	end      uint64 // version 2: the count after its last committed frame
	size     int64  // committed bytes: the reader never reads past it
	samples  int64  // samples of the committed frames
	firstSeq uint64
	lastSeq  uint64 // 0 while the file holds no frame
	lastN    int64  // samples of frame lastSeq
	newest   int64  // queue time of the newest frame
	holes    []hole // damaged ranges, ascending
	broken   bool   // damaged past size: readers stop there
	dropped  bool   // trim skipped its unread frames
	// readDropped: when trim dropped the file, the reader had read frames
	// of it, which the sender may hold undelivered.
	readDropped bool
}

// delivered tells whether every frame of f is acknowledged by acked.
func (f *qfile) delivered(acked cursor) bool {
	return f.lastSeq < acked.seq || f.lastSeq == acked.seq && int64(acked.done) >= f.lastN
}

func (f *qfile) name() string { return queueFileName(f.num) }

// readPos is where the reader stands: the next frame to read is at off in
// file num; read counts the samples of the file's frames before it.
type readPos struct {
	num  uint64
	off  int64
	read int64
}

// queueConfig configures openQueueConfig.
type queueConfig struct {
	fs        vfs.FS
	dir       string
	segBytes  int64
	rollAge   time.Duration // start a new file when the active one's first frame is older (0: never)
	recovered uint64        // the engine's FeedInfo.RecoveredSeq
	logger    *slog.Logger
	now       func() time.Time
}

// queue is the on-disk queue. The writer (the feed hooks, run under the
// engine's commit lock) and the reader (the sender goroutine) meet only
// under mu, which is never held during I/O.
type queue struct {
	fs       vfs.FS
	dir      string
	segBytes int64
	rollAge  int64 // ns
	logger   *slog.Logger
	now      func() time.Time

	// wmu serialises the writer: the active file and the pending frame.
	wmu    sync.Mutex
	active vfs.File // nil when there is none (a full disk): see retryAt
	osf    *os.File // active, when the FS is the operating system's
	wsize  int64    // bytes written to the active file, the pending frame too
	// amap is the active file's mapping (see the format comment), nil when
	// frames are written with pwrite(2); noMap stops mapping new files.
	amap    []byte
	noMap   bool
	pf      *prefaulter // maps amap's pages ahead of the writer
	pfAsked int64       // the offset of amap last asked of pf
	pending struct {
		ok      bool
		seq     uint64
		off     int64
		size    int64
		samples int64
		time    int64
		lost    bool // its write failed: it is counted as dropped, not published
	}
	wbuf      []byte
	rollNext  bool   // the active file failed a write: start a new one
	nextNum   uint64 // the number of the next file
	nextCount uint64 // the count of the next frame (see queuefmt.go)
	oldest    int64  // queue time of the active file's first frame, 0 if none
	retryAt   int64  // no file could be started: not again before (Unix ns)
	// freed is set when removeDone removed a file: the writer then tries
	// to start a file at once, not at retryAt.
	freed   atomic.Bool
	failing bool  // the last frame could not be queued
	failed  int64 // frames not queued since failing began

	// cmu serialises cursor writes; it is taken before mu, never inside it.
	cmu        sync.Mutex
	cursorFile vfs.File // the sender's, overwritten in place; nil until it opens
	cursorBuf  []byte
	wroteEnd   uint64 // queuedEnd when the cursor was last written

	mu        sync.Mutex
	files     []*qfile // ascending; the last one is active when activeNum is its number
	activeNum uint64   // 0: no active file
	rd        readPos
	acked     cursor // the last acknowledged position removeDone was given
	// backlog counts the samples queued and not yet read by the sender;
	// inHand those the sender read and has not delivered yet (next moves
	// a frame's samples from one to the other under mu, so that their sum
	// never misses a sample in between); damaged those lost to damage
	// found while reading.
	backlog int64
	inHand  int64
	damaged int64
	// The counts the cursor file records besides the acknowledged position
	// (see the cursor's format): settled, and the count and seq after the
	// newest committed frame; counted holds the count ranges whose loss
	// was counted (the counted file).
	settled              uint64
	queuedEnd, queuedSeq uint64
	counted              []span
	// unreadMax is at least the unread bytes: set to them by trim, grown
	// by commit, never lowered by reads, so that the writer can tell
	// cheaply when trim cannot have anything to do.
	unreadMax int64
	// Resolution (see engine.FeedResolver): when resolving, a committed
	// frame is not read until the engine says whether its write was kept.
	resolving  bool
	unresolved []uint64            // committed, not yet resolved, ascending
	aborted    map[uint64]struct{} // resolved as not kept, not yet passed by the reader
	notify     chan struct{}       // signalled when frames are published or the reader moves
}

// openQueue opens the queue in dir on the operating system's filesystem.
func openQueue(dir string, segBytes int64, recovered uint64, logger *slog.Logger, now func() time.Time) (*queue, cursor, error) {
	return openQueueConfig(queueConfig{fs: vfs.Default, dir: dir, segBytes: segBytes, recovered: recovered, logger: logger, now: now})
}

// openQueueConfig opens (creating) the queue in c.dir. Frames with a
// sequence number above c.recovered were never logged by the engine and
// are cut off; damage is skipped, counted (in damaged) and logged; a file
// with a damaged header is set aside. Only a directory it cannot create or
// list is an error: a queue file it cannot start (a full disk) is logged,
// and the writer tries again later. It returns the queue and the
// acknowledged cursor.
func openQueueConfig(c queueConfig) (*queue, cursor, error) {
	if err := c.fs.MkdirAll(c.dir, 0o755); err != nil {
		return nil, cursor{}, fmt.Errorf("create queue dir: %w", err)
	}
	// The directory's entry must be durable before any file in it is.
	if err := vfs.SyncDirOf(c.fs, c.dir); err != nil {
		c.logger.Warn("forward: sync the queue dir's parent", "dir", c.dir, "err", err)
	}
	q := &queue{fs: c.fs, dir: c.dir, segBytes: c.segBytes, rollAge: int64(c.rollAge), logger: c.logger, now: c.now,
		notify: make(chan struct{}, 1), aborted: make(map[uint64]struct{})}
	names, err := c.fs.ReadDir(c.dir)
	if err != nil {
		return nil, cursor{}, fmt.Errorf("list queue dir: %w", err)
	}
	rec := q.readCursor()
	cur := rec.ack()
	var nums []uint64
	for _, name := range names {
		if n, ok := parseQueueFileName(name); ok {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	st := &scanState{cur: cur, recovered: c.recovered}
	if rec.counts {
		// Nothing below settled is owed: what the files do not account
		// for above it is lost.
		st.end, st.endKnown, st.floor = rec.settled, true, rec.settled
	}
	st.spans = q.readCounted()
	before := len(st.spans)
	if !rec.counts && len(nums) > 0 {
		q.logger.Info("forward: the cursor holds no counts (an earlier release's, or none); a loss before the oldest queue file or at the end of the newest cannot be counted at this start",
			"dir", c.dir)
	}
	for i, n := range nums {
		if i > 0 && n != nums[i-1]+1 {
			q.logger.Error("forward: queue files are missing; their batches are lost",
				"dir", c.dir, "after", queueFileName(nums[i-1]), "missing", n-nums[i-1]-1)
			st.at, st.atOff = filepath.Join(c.dir, queueFileName(nums[i-1]+1)), 0
		}
		if f := q.scanFile(n, i == len(nums)-1, st); f != nil {
			q.files = append(q.files, f)
		}
	}
	q.checkEnd(rec, st, c.dir)
	q.damaged = st.lost
	// Files wholly acknowledged are removed; the reader starts at the first
	// frame not wholly acknowledged.
	for len(q.files) > 0 && q.files[0].delivered(cur) {
		if err := q.removeFile(q.files[0].num); err != nil {
			q.logger.Warn("forward: remove delivered queue file", "err", err)
		}
		q.files = q.files[1:]
	}
	for _, f := range q.files {
		q.backlog += f.samples
	}
	q.unreadMax = q.unreadBytesLocked()
	q.nextNum = 1
	if len(nums) > 0 {
		q.nextNum = nums[len(nums)-1] + 1
	}
	// Counts never go back, past a lost end of the newest file too: a
	// later Open counts from them.
	q.nextCount = max(st.end, st.floor)
	q.settled = rec.settled
	if !rec.counts && len(q.files) > 0 {
		// A version 1 cursor (or none): from now on settled holds.
		q.settled = q.files[0].start
	}
	q.counted = pruneSpans(st.spans, q.settled)
	if st.added || len(q.counted) != before {
		q.writeCounted(q.counted)
	}
	q.queuedEnd, q.queuedSeq = q.nextCount, st.lastSeq
	q.rd = readPos{num: q.nextNum, off: queueHeaderSize}
	if len(q.files) > 0 {
		q.rd = readPos{num: q.files[0].num, off: q.files[0].hdr}
	}
	q.acked = cur
	q.cmu.Lock()
	if err := q.writeCursorLocked(false, false); err != nil {
		q.logger.Error("forward: cannot write the cursor; retrying at the next delivery", "dir", c.dir, "err", err)
	}
	q.cmu.Unlock()
	q.pf = newPrefaulter()
	if err := q.createFile(q.nextNum, 0); err != nil {
		// A full disk: degrade, never fail. The queue read so far is
		// delivered; batches written until a file can be started are
		// counted as dropped.
		q.retryAt = q.now().Add(createRetry).UnixNano()
		q.logger.Error("forward: cannot start a queue file; batches are not queued until it can (counted as dropped)", "dir", c.dir, "err", err)
	}
	return q, cur, nil
}

// readCursor reads the cursor file. A cursor it cannot read is logged:
// delivery then resumes at the oldest queued frame (duplicates, never a
// loss), and the losses before the oldest file and at the end of the
// newest are not counted.
func (q *queue) readCursor() cursorRecord {
	cpath := filepath.Join(q.dir, cursorName)
	b, err := vfs.ReadFile(q.fs, cpath)
	switch {
	case err == nil && len(b) > 0:
		rec, err := unmarshalCursor(b)
		if err != nil {
			// Only a power loss mid-write does this: start over from the
			// oldest queued frame (duplicates, never a loss).
			q.logger.Warn("forward: damaged cursor; delivering the whole queue again", "file", cpath, "err", err)
			return cursorRecord{}
		}
		return rec
	case err == nil || errors.Is(err, fs.ErrNotExist):
		// No cursor: a new queue (nothing is owed below count 0), unless
		// queue files are there (checked by the caller's scan: their
		// counts then start where they start).
		return cursorRecord{counts: q.noQueueFiles()}
	default:
		q.logger.Error("forward: cannot read the cursor; delivering the whole queue again", "file", cpath, "err", err)
		return cursorRecord{}
	}
}

// noQueueFiles tells whether the queue directory holds no queue file.
func (q *queue) noQueueFiles() bool {
	names, err := q.fs.ReadDir(q.dir)
	if err != nil {
		return false
	}
	for _, name := range names {
		if _, ok := parseQueueFileName(name); ok {
			return false
		}
	}
	return true
}

// writeCursorLocked writes the cursor record (the acknowledged position
// and the counts) in place, with one write, and fsyncs it when sync (clean:
// on close). When the file is not open yet, it writes the record to a new
// file and renames it over the old one, keeping it open for the writes
// after, so that a crash never leaves a cursor cut short; only where the
// new file does not fit (a full disk) is the old one overwritten in place.
// The caller holds cmu, not mu.
func (q *queue) writeCursorLocked(sync, clean bool) error {
	q.mu.Lock()
	rec := cursorRecord{seq: q.acked.seq, done: q.acked.done, settled: q.settled,
		queued: q.queuedEnd, queuedSeq: q.queuedSeq, clean: clean, counts: true}
	q.mu.Unlock()
	q.cursorBuf = rec.marshal(q.cursorBuf[:0])
	if q.cursorFile == nil {
		f, err := q.createCursor(q.cursorBuf)
		if err != nil {
			// No room for a second cursor (a full disk): overwrite the
			// one there, whose space its own truncation gives back.
			f, err = q.fs.Create(filepath.Join(q.dir, cursorName))
			if err != nil {
				return fmt.Errorf("open cursor: %w", err)
			}
			q.cursorFile = f
			if _, err := f.WriteAt(q.cursorBuf, 0); err != nil {
				return fmt.Errorf("write cursor: %w", err)
			}
			if err := f.Sync(); err != nil {
				return fmt.Errorf("sync cursor: %w", err)
			}
		}
		q.cursorFile, q.wroteEnd = f, rec.queued
		return nil
	}
	if _, err := q.cursorFile.WriteAt(q.cursorBuf, 0); err != nil {
		return fmt.Errorf("write cursor: %w", err)
	}
	q.wroteEnd = rec.queued
	if sync {
		if err := q.cursorFile.Sync(); err != nil {
			return fmt.Errorf("sync cursor: %w", err)
		}
	}
	return nil
}

// createCursor publishes b as the cursor file (write new, fsync, rename,
// fsync dir) and returns it open.
func (q *queue) createCursor(b []byte) (vfs.File, error) {
	cpath := filepath.Join(q.dir, cursorName)
	tmp := cpath + ".tmp"
	f, err := q.fs.Create(tmp)
	if err != nil {
		return nil, fmt.Errorf("create cursor: %w", err)
	}
	if _, err = f.WriteAt(b, 0); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = q.fs.Rename(tmp, cpath)
	}
	if err == nil {
		err = q.fs.SyncDir(q.dir)
	}
	if err != nil {
		f.Close()
		q.fs.Remove(tmp)
		return nil, fmt.Errorf("write cursor: %w", err)
	}
	return f, nil
}

// checkEnd counts what the newest file lost at its end (or with it, when it
// is gone): the cursor's queued count past the count after the last good
// frame. After a clean close that is exact; after a crash, a lower bound
// (frames queued after the cursor's last write are not in it).
func (q *queue) checkEnd(rec cursorRecord, st *scanState, dir string) {
	if !rec.counts || rec.queued <= max(st.end, st.floor) {
		return
	}
	if rec.queuedSeq > st.recovered {
		q.logger.Warn("forward: the cursor counts batches the database never logged; a loss at the end of the queue cannot be counted",
			"dir", dir, "queued_seq", rec.queuedSeq, "recovered", st.recovered)
		return
	}
	at, off := st.at, st.atOff
	if at == "" {
		at, off = dir, 0
	}
	n := st.count(max(st.end, st.floor), rec.queued)
	if n == 0 {
		st.end = rec.queued
		return
	}
	if rec.clean {
		q.logger.Error("forward: the end of the newest queue file is gone; samples lost",
			"file", at, "offset", off, "samples", n, "after_seq", st.lastSeq)
	} else {
		q.logger.Error("forward: the end of the newest queue file is gone; at least this many samples lost (a lower bound: the queue was not closed cleanly)",
			"file", at, "offset", off, "samples", n, "after_seq", st.lastSeq)
	}
	st.end, st.at = rec.queued, ""
}

// scanState carries what scanFile learns from file to file.
type scanState struct {
	cur       cursor
	recovered uint64
	lastSeq   uint64 // of the last good frame
	end       uint64 // count after the last good frame (version 2)
	endKnown  bool   // end holds (false before the first file and after a version 1 file)
	at        string // where damage was last found, for the log
	atOff     int64
	lost      int64 // samples counted lost
	// floor: nothing below it is owed (delivered, or dropped by the
	// bounds); spans: the ranges counted lost before (added: and now).
	floor uint64
	spans []span
	added bool
}

// count counts the loss of the samples of counts [lo, hi) not counted
// before, and returns how many that is.
func (st *scanState) count(lo, hi uint64) int64 {
	n := uncounted(st.spans, lo, hi)
	if n > 0 {
		st.spans, st.added = addSpan(st.spans, lo, hi), true
	}
	st.lost += int64(n)
	return int64(n)
}

// readCounted reads the counted file (none: nothing counted yet). A
// damaged one is logged: damage counted before may be counted again.
func (q *queue) readCounted() []span {
	p := filepath.Join(q.dir, countedName)
	b, err := vfs.ReadFile(q.fs, p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var spans []span
	if err == nil {
		spans, err = unmarshalCounted(b)
	}
	if err != nil {
		q.logger.Warn("forward: cannot read what queue damage was counted; damage still on disk may be counted again", "file", p, "err", err)
	}
	return spans
}

// writeCounted replaces the counted file with spans; a failure is logged
// (damage still on disk may be counted again after a restart).
func (q *queue) writeCounted(spans []span) {
	if err := vfs.WriteFileAtomic(q.fs, filepath.Join(q.dir, countedName), marshalCounted(spans)); err != nil {
		q.logger.Warn("forward: cannot record what queue damage was counted; a restart may count it again", "err", err)
	}
}

// damage notes damage at off in path: the samples it took are counted at
// the next good frame (lose).
func (st *scanState) damage(path string, off int64) {
	if st.at == "" {
		st.at, st.atOff = path, off
	}
}

// lose counts the samples between the last good frame and the next good
// one, which has the given count and seq, unless the cursor says they
// were delivered before the damage.
func (q *queue) lose(st *scanState, count, seq uint64, what string) {
	at, off := st.at, st.atOff
	st.at = ""
	from := max(st.end, st.floor)
	if !st.endKnown || count <= from {
		if at != "" && !st.endKnown {
			q.logger.Error("forward: queue damaged before a version 1 or first file; its loss cannot be counted", "file", at, "offset", off)
		}
		return
	}
	n := uncounted(st.spans, from, count)
	if n == 0 {
		return // counted by an earlier Open
	}
	if at == "" {
		at = "(between frames)"
	}
	switch {
	case st.cur.seq >= seq:
		q.logger.Warn("forward: "+what+" where the queue was already delivered; nothing lost", "file", at, "offset", off, "samples", n)
		return
	case st.cur.seq <= st.lastSeq:
		q.logger.Error("forward: "+what+"; samples lost", "file", at, "offset", off, "samples", n, "before_seq", seq)
	default:
		// The acknowledged position lies inside the damage: part of it
		// was delivered; n bounds the loss.
		q.logger.Error("forward: "+what+"; at most this many samples lost (part was delivered)", "file", at, "offset", off, "samples", n, "before_seq", seq)
	}
	st.count(from, count)
}

// scanFile reads file num and returns what the queue needs to know of it,
// or nil when the file is set aside (or was a torn, empty newest file). In
// the last file, a torn tail and frames never logged (seq > recovered)
// are cut off; damage elsewhere becomes a hole, counted.
func (q *queue) scanFile(num uint64, last bool, st *scanState) *qfile {
	path := filepath.Join(q.dir, queueFileName(num))
	data, err := vfs.ReadFile(q.fs, path)
	if err != nil {
		q.logger.Error("forward: cannot read queue file; setting it aside", "file", path, "err", err)
		q.setAside(path, nil, st)
		return nil
	}
	hd, err := checkQueueHeader(data, num)
	if err != nil {
		if last && (len(data) < queueHeaderSize || allZero(data)) {
			// Torn while being created (or preallocated, and its header
			// lost to a power loss): nothing was ever queued in it.
			q.logger.Warn("forward: removing torn queue file", "file", path)
			if err := q.removeFile(num); err != nil {
				q.logger.Warn("forward: remove torn queue file", "err", err)
			}
			return nil
		}
		q.logger.Error("forward: queue file header damaged; setting the file aside", "file", path, "offset", 0, "err", err)
		q.setAside(path, data, st)
		return nil
	}
	f := &qfile{num: num, version: hd.version, hdr: hd.size, start: hd.start, size: hd.size}
	if hd.version == queueVersion1 {
		return q.scanFileV1(f, data, path, last, st)
	}
	if !st.endKnown || hd.start < st.end {
		st.end, st.endKnown = hd.start, true
	}
	off := hd.size
	for off < int64(len(data)) {
		fr, need, err := parseFrame(hd.version, data[off:])
		if err != nil && allZero(data[off:]) {
			// Preallocated space after the last frame: the clean end.
			if !last {
				q.logger.Warn("forward: queue file was not cut to its frames; cutting it now", "file", path, "offset", off)
			}
			q.truncateTail(path, off, f)
			return f
		}
		if fr.hdrOK && fr.seq <= st.lastSeq {
			err = fmt.Errorf("%w: frame %d after %d", errQueueCorrupt, fr.seq, st.lastSeq)
			fr.hdrOK = false
		}
		if fr.hdrOK && fr.seq > st.recovered {
			// Prepared, never logged: the engine does not hold it.
			q.logger.Warn("forward: cutting off queued batches the database never logged",
				"file", path, "offset", off, "seq", fr.seq, "recovered", st.recovered)
			q.truncateTail(path, off, f)
			return f
		}
		if err != nil && fr.hdrOK {
			// The header checks: the frame's batch is lost, and exactly
			// its samples (unless the cursor is past it).
			st.at, st.atOff = path, off
			end := off + need
			if errors.Is(err, errShort) || last && findFrame(data, end) < 0 && allZero(data[end:]) {
				// Cut short, or the last frame of the newest file: the
				// torn tail of a crash, counted.
				q.lostFrame(st, fr, "cutting off torn queue tail")
				f.end = st.end
				if last {
					q.truncateTail(path, off, f)
				} else {
					f.broken = true
				}
				return f
			}
			q.lostFrame(st, fr, "queue frame damaged, skipped")
			f.end = st.end
			f.holes = append(f.holes, hole{off, end})
			off = end
			continue
		}
		if err != nil {
			next := findFrame(data, off+1)
			switch {
			case next < 0 && last:
				// Nothing good after it in the newest file: a torn tail,
				// whose samples cannot be counted (its header is damaged).
				q.logger.Warn("forward: cutting off torn queue tail", "file", path, "offset", off, "bytes", int64(len(data))-off, "err", err)
				q.truncateTail(path, off, f)
				return f
			case next < 0:
				// Damaged to its end: counted at the next good frame.
				q.logger.Error("forward: queue file damaged to its end", "file", path, "offset", off, "bytes", int64(len(data))-off, "err", err)
				st.damage(path, off)
				f.broken = true
				return f
			}
			q.logger.Error("forward: queue file damaged; skipping to the next good frame", "file", path, "offset", off, "bytes", next-off, "err", err)
			st.damage(path, off)
			f.holes = append(f.holes, hole{off, next})
			off = next
			continue
		}
		if fr.count != st.end {
			if fr.count > st.end {
				if st.at == "" {
					st.at, st.atOff = path, off // samples missing before this frame
				}
				q.lose(st, fr.count, fr.seq, "samples missing before this frame (damage, or a queue file removed)")
			} else {
				q.logger.Warn("forward: queue frame counts go back; counting on from this frame", "file", path, "offset", off)
			}
		}
		st.at = ""
		if f.lastSeq == 0 {
			f.firstSeq = fr.seq
		}
		f.lastSeq, st.lastSeq, f.lastN = fr.seq, fr.seq, int64(fr.samples)
		st.end = fr.count + uint64(fr.samples)
		f.end = st.end
		f.samples += int64(fr.samples)
		f.newest = fr.time
		off += need
		f.size = off
	}
	return f
}

// scanFileV1 scans a version 1 file: damage loses the rest of the file
// (the frames carry no magic to resync on and no count to count it).
func (q *queue) scanFileV1(f *qfile, data []byte, path string, last bool, st *scanState) *qfile {
	st.endKnown = false
	off := f.hdr
	for off < int64(len(data)) {
		fr, need, err := parseFrame(queueVersion1, data[off:])
		if err != nil && allZero(data[off:]) {
			q.truncateTail(path, off, f)
			return f
		}
		if err == nil && fr.seq <= st.lastSeq {
			err = fmt.Errorf("%w: frame %d after %d", errQueueCorrupt, fr.seq, st.lastSeq)
		}
		if err == nil && fr.seq > st.recovered {
			q.logger.Warn("forward: cutting off queued batches the database never logged",
				"file", path, "offset", off, "seq", fr.seq, "recovered", st.recovered)
			q.truncateTail(path, off, f)
			return f
		}
		if err != nil {
			if last {
				q.logger.Warn("forward: cutting off torn queue tail", "file", path, "offset", off, "bytes", int64(len(data))-off)
				q.truncateTail(path, off, f)
				return f
			}
			q.logger.Error("forward: version 1 queue file damaged; its remaining batches are lost (uncounted)",
				"file", path, "offset", off, "bytes", int64(len(data))-off, "err", err)
			f.broken = true
			return f
		}
		if f.lastSeq == 0 {
			f.firstSeq = fr.seq
		}
		f.lastSeq, st.lastSeq, f.lastN = fr.seq, fr.seq, int64(fr.samples)
		f.samples += int64(fr.samples)
		f.newest = fr.time
		off += need
		f.size = off
	}
	return f
}

// setAside renames a queue file that cannot be used to *.damaged. The good
// frames it still holds (data, when it could be read) are counted as lost,
// as is anything between them and the frames around the file.
func (q *queue) setAside(path string, data []byte, st *scanState) {
	if err := q.fs.Rename(path, path+damagedSuffix); err != nil {
		q.logger.Error("forward: cannot set a damaged queue file aside", "file", path, "err", err)
	}
	st.damage(path, 0)
	for off := findFrame(data, queueHeaderSizeV1); off >= 0; {
		fr, need, err := parseFrame(queueVersion, data[off:])
		if err != nil || fr.seq <= st.lastSeq || fr.seq > st.recovered {
			off = findFrame(data, off+1)
			continue
		}
		// The frame is lost with the file (unless the cursor is past it).
		if st.at == "" {
			st.at, st.atOff = path, off
		}
		q.lostFrame(st, fr, "queue file set aside")
		off = findFrame(data, off+need)
	}
}

// lostFrame counts the samples of frame fr, whose header checks, as lost
// (and any gap before it), and moves the scan past it.
func (q *queue) lostFrame(st *scanState, fr frame, what string) {
	if !st.endKnown {
		st.end, st.endKnown = fr.count, true
	}
	q.lose(st, fr.count+uint64(fr.samples), fr.seq+1, what)
	st.lastSeq, st.end = fr.seq, fr.count+uint64(fr.samples)
}

// findFrame returns the offset of the first version 2 frame that checks
// in data at or after from, or -1.
func findFrame(data []byte, from int64) int64 {
	if from < 0 {
		return -1
	}
	off, ok, err := frameLayout.Scan(record.Mem(data), from)
	if !ok || err != nil {
		return -1
	}
	return off
}

// allZero tells whether b holds only zero bytes.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// truncateTail cuts the file at off (logging a failure: the reader stops
// at the committed size regardless).
func (q *queue) truncateTail(path string, off int64, f *qfile) {
	f.size = off
	h, err := q.fs.OpenReadWrite(path)
	if err == nil {
		err = h.Truncate(off)
		if cerr := h.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		q.logger.Warn("forward: cannot cut queue file", "file", path, "offset", off, "err", err)
	}
}

// createFile starts active file num, with room for a frame of need bytes
// when it is mapped. The caller holds wmu (or is Open). On failure nothing
// is left behind.
func (q *queue) createFile(num uint64, need int64) error {
	path := filepath.Join(q.dir, queueFileName(num))
	f, err := q.fs.Create(path)
	if err != nil {
		return fmt.Errorf("create queue file: %w", err)
	}
	fail := func(err error) error {
		f.Close()
		q.fs.Remove(path)
		return err
	}
	// The header is written first: a file cut short or ending in zeros
	// after it holds no frame, which Open tells from damage.
	if _, err := f.WriteAt(appendQueueHeader(nil, num, q.nextCount), 0); err != nil {
		return fail(fmt.Errorf("write queue file header: %w", err))
	}
	if err := q.fs.SyncDir(q.dir); err != nil {
		return fail(fmt.Errorf("sync queue dir: %w", err))
	}
	q.active, q.wsize, q.amap, q.oldest = f, queueHeaderSize, nil, 0
	q.osf, _ = f.(*os.File)
	q.nextNum = num + 1
	q.mapActive(need)
	q.mu.Lock()
	q.files = append(q.files, &qfile{num: num, version: queueVersion, hdr: queueHeaderSize, start: q.nextCount, end: q.nextCount, size: queueHeaderSize})
	q.activeNum = num
	q.mu.Unlock()
	return nil
}

// mapActive preallocates and maps the active file, still empty, with room
// for a frame of need bytes (unless mapping failed before, or the file is
// not the operating system's: then frames are written with pwrite). The
// caller holds wmu.
func (q *queue) mapActive(need int64) {
	if q.noMap {
		return
	}
	if q.osf == nil {
		q.noMap = true // an FS that does not hand out OS files never will
		return
	}
	if q.amap != nil {
		q.pf.set(nil)
		if err := unmapFile(q.amap); err != nil {
			q.logger.Warn("forward: remap queue file", "err", err)
		}
		q.amap = nil
	}
	size := roundUp(max(q.segBytes, queueHeaderSize+need), pageSize)
	m, err := mapFile(q.osf, queueHeaderSize, size)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			return // this file is written with pwrite; the next is mapped again
		}
		q.logger.Debug("forward: appending to the queue with pwrite(2)", "err", err)
		q.noMap = true
		return
	}
	q.amap, q.pfAsked = m, 0
	q.pf.set(m)
}

var pageSize = int64(os.Getpagesize())

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

// errNoFile is prepare's error while no queue file could be started and
// the retry is not due.
var errNoFile = errors.New("forward: no queue file (retrying)")

// prepare appends a frame to the active file; it is not visible to the
// reader until commit. A failed write makes the frame lost: commit counts
// it as dropped. The first failure of a run, and the recovery after it,
// are logged here; the error is returned for tests.
func (q *queue) prepare(seq uint64, samples int, format byte, payload []byte) error {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	q.pending.ok, q.pending.lost = true, false
	q.pending.seq, q.pending.samples = seq, int64(samples)
	err := q.prepareLocked(seq, samples, format, payload)
	switch {
	case err != nil:
		q.pending.lost = true
		q.failed++
		if !q.failing {
			q.failing = true
			q.logger.Error("forward: cannot queue batches; they are not forwarded (counted as dropped, reason queue) until the queue can be written again",
				"seq", seq, "samples", samples, "err", err)
		}
	case q.failing:
		q.failing = false
		q.logger.Warn("forward: queueing batches again", "batches_lost", q.failed)
		q.failed = 0
	}
	return err
}

func (q *queue) prepareLocked(seq uint64, samples int, format byte, payload []byte) error {
	now := q.now().UnixNano()
	if q.active == nil && now < q.retryAt && !q.freed.Swap(false) {
		return errNoFile
	}
	need := int64(frameHeaderSize + len(payload))
	aged := q.rollAge > 0 && q.oldest != 0 && now-q.oldest >= q.rollAge
	if q.active == nil || q.rollNext || aged || q.wsize >= q.segBytes ||
		q.amap != nil && q.wsize+need > int64(len(q.amap)) && q.wsize > queueHeaderSize {
		if err := q.roll(need); err != nil {
			q.retryAt = now + int64(createRetry)
			return err
		}
	} else if q.amap != nil && q.wsize+need > int64(len(q.amap)) {
		q.mapActive(need) // a frame larger than the empty file: grow it
	}
	q.pending.off, q.pending.size, q.pending.time = q.wsize, need, now
	count := q.nextCount
	ns := uint32(min(uint64(samples), frameSamplesMax))
	if q.amap != nil && q.wsize+need > int64(len(q.amap)) {
		// Cannot happen (roll made room): keep the file whole regardless.
		q.rollNext = true
		return fmt.Errorf("append to queue: frame of %d bytes past the mapped file", need)
	}
	if q.amap != nil && need <= mapFrameMax {
		return q.appendMapped(seq, now, ns, format, count, payload)
	}
	var n int
	var err error
	if q.amap != nil {
		// Into the preallocated space, the payload from where it is.
		q.wbuf = appendFrameHeader(q.wbuf[:0], seq, now, ns, format, count, payload)
		n, err = writeFrameAt(q.osf, q.wbuf, payload, q.wsize)
	} else {
		q.wbuf = appendFrame(q.wbuf[:0], seq, now, ns, format, count, payload)
		n, err = record.WriteAt(q.active, q.wbuf, q.wsize)
	}
	q.wsize += int64(n)
	if err != nil {
		q.undoLocked()
		// A full disk: the next frame starts a new file, so that this one,
		// once delivered, can be removed and its space freed.
		q.rollNext = true
		return fmt.Errorf("append to queue: %w", err)
	}
	return nil
}

// mapFrameMax is the largest frame copied into the mapping: a larger one
// is written with pwritev(2) into the preallocated space. Mapping fresh
// pages costs more CPU a byte than write(2) does (a page fault or populate
// each 4 KiB), so that the system call saves more than the mapping costs
// only for small frames: on a 2-core VM, write(2) costs ~4 µs + 0.4 ns a
// byte, a mapped copy ~0.15 ns a byte on the writer plus ~0.85 ns a byte
// of populate in the background (BenchmarkQueueAppend).
const mapFrameMax = 16 << 10

// appendMapped encodes the pending frame straight into the mapping. A
// fault there (an I/O error of the page cache: the blocks are allocated)
// is an error, not a crash; the file is then given up.
func (q *queue) appendMapped(seq uint64, now int64, samples uint32, format byte, count uint64, payload []byte) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if _, fault := r.(interface{ Addr() uintptr }); !fault {
			panic(r)
		}
		err = fmt.Errorf("append to queue: fault writing the mapped file: %v", r)
		q.logger.Error("forward: cannot write the mapped queue file; starting a new file, with pwrite(2)", "err", err)
		q.noMap, q.rollNext = true, true
		q.mu.Lock()
		q.files[len(q.files)-1].broken = true
		q.mu.Unlock()
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	off := q.wsize
	b := appendFrame(q.amap[off:off:len(q.amap)], seq, now, samples, format, count, payload)
	q.wsize += int64(len(b))
	if q.wsize+prefaultAhead/2 > q.pfAsked {
		q.pfAsked = q.wsize + prefaultAhead
		q.pf.ask(q.pfAsked)
	}
	return nil
}

// undoLocked removes the pending frame's bytes from the active file; if it
// cannot, the next frame goes to a new file (readers stop at the committed
// size, and a restart sees the damage at the end of a file that is not the
// last, losing nothing committed).
func (q *queue) undoLocked() {
	if q.wsize == q.pending.off {
		return
	}
	if q.amap != nil {
		// Zeros again, as preallocated: the file ends at the frame before.
		clear(q.amap[q.pending.off:q.wsize])
		q.wsize = q.pending.off
		return
	}
	if err := q.active.Truncate(q.pending.off); err != nil {
		q.logger.Error("forward: cannot remove a failed frame from the queue; starting a new file", "err", err)
		q.rollNext = true
		q.mu.Lock()
		q.files[len(q.files)-1].broken = true
		q.mu.Unlock()
		return
	}
	q.wsize = q.pending.off
}

// roll finishes the active file (closeActive), removes the files wholly
// delivered (the one just finished too: on a full disk that makes room for
// the next), and starts the next, with room for a frame of need bytes. The
// caller holds wmu.
func (q *queue) roll(need int64) error {
	if q.active != nil {
		if err := q.closeActive(); err != nil {
			q.logger.Warn("forward: finish queue file", "err", err)
		}
	}
	q.mu.Lock()
	acked := q.acked
	q.mu.Unlock()
	if err := q.removeDoneSync(acked, false); err != nil {
		q.logger.Warn("forward: remove delivered queue files", "err", err)
	}
	if err := q.createFile(q.nextNum, need); err != nil {
		return err
	}
	q.rollNext = false
	return nil
}

// closeActive unmaps the active file, cuts it to its used size, fsyncs it
// (so that a file that is not the newest is whole, and holds no
// preallocated zeros, after a power loss too) and closes it. The caller
// holds wmu.
func (q *queue) closeActive() error {
	f := q.active
	q.active, q.osf = nil, nil
	q.mu.Lock()
	q.activeNum = 0
	q.mu.Unlock()
	var err error
	if q.amap != nil {
		q.pf.set(nil)
		err = unmapFile(q.amap)
		q.amap = nil
	}
	if terr := f.Truncate(q.wsize); err == nil && terr != nil {
		err = fmt.Errorf("cut queue file to its frames: %w", terr)
	}
	if serr := f.Sync(); err == nil && serr != nil {
		err = fmt.Errorf("sync queue file: %w", serr)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close queue file: %w", cerr)
	}
	return err
}

// commit publishes the pending frame when the engine logged it, and removes
// it otherwise. It returns the samples published, and those lost (logged
// but not kept, because the frame's write failed).
func (q *queue) commit(seq uint64, logged bool) (published, lost int64) {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	p := &q.pending
	if !p.ok || p.seq != seq {
		return 0, 0
	}
	p.ok = false
	switch {
	case p.lost && logged:
		return 0, p.samples
	case p.lost:
		return 0, 0
	case !logged:
		q.undoLocked()
		return 0, 0
	}
	q.nextCount += uint64(p.samples)
	if q.oldest == 0 {
		q.oldest = p.time
	}
	q.mu.Lock()
	f := q.files[len(q.files)-1]
	if f.lastSeq == 0 {
		f.firstSeq = seq
	}
	f.lastSeq, f.lastN = seq, p.samples
	f.end = q.nextCount
	q.queuedEnd, q.queuedSeq = q.nextCount, seq
	f.size = p.off + p.size
	f.samples += p.samples
	f.newest = p.time
	q.backlog += p.samples
	q.unreadMax += p.size
	if q.resolving {
		q.unresolved = append(q.unresolved, seq)
	}
	q.mu.Unlock()
	if !q.resolving {
		q.wake()
	}
	return p.samples, 0
}

func (q *queue) wake() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// resolve records the outcome of the write of a committed frame: kept, it
// may be delivered; not kept (its WAL fsync failed and the database undid
// it), the reader skips it. Resolutions may come in any order; the reader
// waits at the first unresolved frame.
func (q *queue) resolve(seq uint64, kept bool) {
	q.mu.Lock()
	i := slices.Index(q.unresolved, seq)
	if i < 0 {
		q.mu.Unlock()
		return
	}
	q.unresolved = slices.Delete(q.unresolved, i, i+1)
	if !kept {
		q.aborted[seq] = struct{}{}
	}
	q.mu.Unlock()
	q.wake()
}

// readBuf is the reader's buffer: bytes of queue file num from offset off,
// read ahead of the frame asked for, so that a run of small frames costs
// one read, not a few system calls each. It only ever holds committed
// bytes, which never change, so what it holds stays valid.
type readBuf struct {
	num uint64
	off int64
	b   []byte
}

// readAhead is how much the reader reads at once (less at the committed
// end; a larger frame is read whole).
const readAhead = 1 << 20

// next reads the next committed frame at the reader's position, moving the
// reader past it. It returns ok false when there is none yet. The payload
// is valid until the next call. Frames whose write is not resolved yet are
// not returned; those the database undid are skipped.
func (q *queue) next(rb *readBuf) (fr frame, ok bool, err error) {
	for {
		q.mu.Lock()
		i := q.readerFileLocked()
		pos := q.rd
		if i < 0 {
			q.mu.Unlock()
			return frame{}, false, nil // no file yet (a full disk)
		}
		f := *q.files[i]
		last := i == len(q.files)-1
		var nextPos readPos
		if !last {
			nextPos = readPos{num: q.files[i+1].num, off: q.files[i+1].hdr}
		}
		q.mu.Unlock()
		if h := holeAt(f.holes, pos.off); h != nil {
			q.advance(pos, readPos{num: pos.num, off: h.end, read: pos.read}, 0)
			continue
		}
		if pos.off >= f.size {
			if last {
				return frame{}, false, nil
			}
			q.advance(pos, nextPos, 0)
			continue
		}
		fr, err := q.readFrame(rb, &f, pos.off)
		if err != nil {
			// Damage past what a scan found: skip to the next good frame,
			// or (a version 1 file, a vanished file) lose the rest of this
			// file; counted either way, and go on.
			q.skipDamage(rb, &f, pos, err)
			continue
		}
		to := readPos{num: pos.num, off: pos.off + fr.size(), read: pos.read + int64(fr.samples)}
		q.mu.Lock()
		if q.rd != pos {
			q.mu.Unlock()
			continue // the trimmer moved the reader meanwhile
		}
		if len(q.unresolved) > 0 && fr.seq >= q.unresolved[0] {
			q.mu.Unlock()
			return frame{}, false, nil // its write is not resolved yet
		}
		q.rd = to
		q.backlog -= int64(fr.samples)
		_, undone := q.aborted[fr.seq]
		delete(q.aborted, fr.seq)
		if !undone {
			q.inHand += int64(fr.samples)
		}
		q.mu.Unlock()
		if undone {
			continue // the database does not hold it
		}
		return fr, true, nil
	}
}

// readerFileLocked returns the index of the reader's file; when that file
// is gone (removed once read through), it moves the reader to the next
// file left, and returns -1 when there is none.
func (q *queue) readerFileLocked() int {
	if i := q.fileIndex(q.rd.num); i >= 0 {
		return i
	}
	num := q.rd.num
	j := slices.IndexFunc(q.files, func(f *qfile) bool { return f.num > num })
	if j >= 0 {
		q.rd = readPos{num: q.files[j].num, off: q.files[j].hdr}
	}
	return j
}

// holeAt returns the hole off lies in, or nil.
func holeAt(holes []hole, off int64) *hole {
	for i := range holes {
		if off >= holes[i].off && off < holes[i].end {
			return &holes[i]
		}
	}
	return nil
}

// setInHand records how many samples read from the queue the sender
// holds undelivered: set after each delivery, and when it takes fewer of
// a frame than next counted (delivered before a restart, undecodable).
func (q *queue) setInHand(n int64) {
	q.mu.Lock()
	q.inHand = n
	q.mu.Unlock()
}

// advance moves the reader from pos to to, unless someone moved it since.
func (q *queue) advance(pos, to readPos, samples int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.rd != pos {
		return false
	}
	q.rd = to
	q.backlog -= samples
	return true
}

func (q *queue) fileIndex(num uint64) int {
	for i, f := range q.files {
		if f.num == num {
			return i
		}
	}
	return -1
}

// readFrame returns the frame at off in file f (whose committed bytes end
// at f.size) from rb, which it refills from the file when the frame is not
// wholly in it.
func (q *queue) readFrame(rb *readBuf, f *qfile, off int64) (frame, error) {
	num, end := f.num, f.size
	if rb.num == num && off >= rb.off && off < rb.off+int64(len(rb.b)) {
		fr, _, err := parseFrame(f.version, rb.b[off-rb.off:])
		if !errors.Is(err, errShort) {
			return fr, err
		}
	}
	h, err := q.fs.Open(filepath.Join(q.dir, queueFileName(num)))
	if err != nil {
		return frame{}, err
	}
	defer h.Close()
	rb.num, rb.off, rb.b = 0, 0, rb.b[:0] // empty unless the read succeeds
	read := func(n int64) error {
		if int64(cap(rb.b)) < n {
			rb.b = make([]byte, n)
		}
		if _, err := h.ReadAt(rb.b[:n], off); err != nil {
			return err
		}
		rb.num, rb.off, rb.b = num, off, rb.b[:n]
		return nil
	}
	if err := read(min(end-off, readAhead)); err != nil {
		return frame{}, err
	}
	fr, need, err := parseFrame(f.version, rb.b)
	if !errors.Is(err, errShort) {
		return fr, err
	}
	if need == 0 || off+need > end {
		return frame{}, fmt.Errorf("%w: frame past the committed end", errQueueCorrupt)
	}
	if err := read(need); err != nil {
		return frame{}, err
	}
	fr, _, err = parseFrame(f.version, rb.b)
	return fr, err
}

// skipDamage moves the reader past damage found at pos in file f while
// running: to the next good frame of a version 2 file, counting exactly
// the samples skipped (the file's committed samples less those read and
// those of the good frames after), or past the rest of the file.
func (q *queue) skipDamage(rb *readBuf, f *qfile, pos readPos, cause error) {
	name := filepath.Join(q.dir, queueFileName(f.num))
	rb.num, rb.off, rb.b = 0, 0, rb.b[:0]
	var data []byte
	if f.version == queueVersion {
		if h, err := q.fs.Open(name); err == nil {
			data = make([]byte, f.size-pos.off)
			if _, err := h.ReadAt(data, pos.off); err != nil {
				data = nil
			}
			h.Close()
		}
	}
	next := int64(-1)
	if data != nil {
		next = findFrame(data, 1)
	}
	if next < 0 {
		q.logger.Error("forward: unreadable queue frame; dropping the rest of the file",
			"file", name, "offset", pos.off, "err", cause)
		q.dropRest(pos)
		return
	}
	var after int64
	nextFrame, _, _ := parseFrame(queueVersion, data[next:])
	for off := next; off >= 0; {
		fr, need, err := parseFrame(queueVersion, data[off:])
		if err != nil {
			off = findFrame(data, off+1)
			continue
		}
		after += int64(fr.samples)
		off += need
		if off >= int64(len(data)) {
			break
		}
	}
	q.mu.Lock()
	if q.rd != pos {
		q.mu.Unlock()
		return
	}
	lost := max(f.samples-pos.read-after, 0)
	q.logger.Error("forward: queue frame damaged; skipping to the next good frame; samples lost",
		"file", name, "offset", pos.off, "bytes", next, "samples", lost, "err", cause)
	q.rd = readPos{num: pos.num, off: pos.off + next, read: f.samples - after}
	q.damaged += lost
	q.backlog -= lost
	// Counted: an Open while the damage is still on disk does not count it
	// again.
	q.counted = addSpan(q.counted, nextFrame.count-uint64(lost), nextFrame.count)
	spans := q.counted
	q.mu.Unlock()
	if lost > 0 {
		q.writeCounted(spans)
	}
}

// dropRest drops the unread frames of the reader's file, as damaged.
// Callers hold nothing.
func (q *queue) dropRest(pos readPos) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.rd == pos {
		q.damaged += q.dropReaderFileLocked()
	}
}

// dropReaderFileLocked moves the reader past its current file (to its end
// when it is the last one) and returns the samples it skipped.
func (q *queue) dropReaderFileLocked() int64 {
	i := q.fileIndex(q.rd.num)
	if i < 0 {
		return 0
	}
	f := q.files[i]
	n := max(f.samples-q.rd.read, 0)
	f.dropped = true
	f.readDropped = f.readDropped || q.rd.read > 0
	if f.version == queueVersion {
		q.settled = max(q.settled, f.end) // dropped by the bounds: not owed
	}
	if i == len(q.files)-1 {
		q.rd.off, q.rd.read = f.size, f.samples
	} else {
		q.rd = readPos{num: q.files[i+1].num, off: q.files[i+1].hdr}
	}
	q.backlog -= n
	return n
}

// unreadBytesLocked is the size of the queue from the reader on.
func (q *queue) unreadBytesLocked() int64 {
	var n int64
	for _, f := range q.files {
		switch {
		case f.num == q.rd.num:
			n += max(f.size-q.rd.off, 0)
		case f.num > q.rd.num:
			n += f.size - f.hdr
		}
	}
	return n
}

// trim drops the oldest unread data, a file at a time, while the unread
// bytes pass maxBytes or the reader's file was wholly queued before cutoff
// (Unix ns). It returns the samples dropped. (The writer starts a new file
// when the active one's first frame is older than rollAge, so that a file
// ages out while writes go on.)
func (q *queue) trim(maxBytes int64, cutoff int64) (dropped int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	defer func() { q.unreadMax = q.unreadBytesLocked() }()
	for {
		i := q.readerFileLocked()
		if i < 0 {
			return dropped
		}
		f := q.files[i]
		if q.rd.off >= f.size && i < len(q.files)-1 {
			q.rd = readPos{num: q.files[i+1].num, off: q.files[i+1].hdr} // read through
			continue
		}
		unread := q.unreadBytesLocked()
		if unread == 0 {
			return dropped
		}
		old := f.newest != 0 && f.newest < cutoff && q.rd.off < f.size
		if unread <= maxBytes && !old {
			return dropped
		}
		dropped += q.dropReaderFileLocked()
		if i == len(q.files)-1 {
			return dropped
		}
	}
}

// mayPass tells whether the unread bytes may be past maxBytes: false means
// they are not, and trim would drop nothing for the byte bound.
func (q *queue) mayPass(maxBytes int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.unreadMax > maxBytes
}

// removeDone removes the files that nothing needs any more: files the
// reader is through, other than the active one, whose frames are all
// acknowledged, or which trim dropped (unless their read part may still be
// in flight: the acknowledged position is inside them, or before them when
// the reader had read frames of them). The cursor is written and fsynced
// first (see removeDoneSync).
func (q *queue) removeDone(acked cursor) error { return q.removeDoneSync(acked, true) }

// removeDoneSync is removeDone; unless sync, the cursor is written but not
// fsynced before the files are removed (the writer's roll, which must not
// wait for the disk under the engine's commit lock: after a power loss, as
// opposed to a kill -9, the files it removed may then be counted lost).
func (q *queue) removeDoneSync(acked cursor, sync bool) error {
	q.mu.Lock()
	q.acked = acked
	var rm []uint64
	keep := q.files[:0:0]
	for _, f := range q.files {
		done := f.lastSeq == 0 || f.delivered(acked) ||
			f.dropped && (acked.seq < f.firstSeq && !f.readDropped || acked.seq > f.lastSeq)
		through := f.num < q.rd.num || f.num == q.rd.num && q.rd.off >= f.size
		if f.num != q.activeNum && through && done {
			rm = append(rm, f.num)
			continue
		}
		keep = append(keep, f)
	}
	q.files = keep
	if len(rm) > 0 {
		// Everything before the first file left is delivered or dropped
		// (files of version 1 carry no counts: acknowledgements inside
		// them do not move settled).
		switch {
		case len(keep) > 0 && keep[0].version == queueVersion:
			q.settled = max(q.settled, keep[0].start)
		case len(keep) == 0:
			q.settled = max(q.settled, q.queuedEnd)
		}
	}
	q.mu.Unlock()
	if len(rm) == 0 {
		return nil
	}
	q.freed.Store(true)
	// The cursor says why the files are gone (settled) before they are: a
	// later Open tells them from files lost to damage.
	q.cmu.Lock()
	err := q.writeCursorLocked(sync, false)
	q.cmu.Unlock()
	if err != nil {
		q.logger.Warn("forward: cannot record the removal of delivered queue files in the cursor; a restart may count them as lost", "err", err)
		err = nil
	}
	for _, n := range rm {
		if rerr := q.removeFile(n); err == nil {
			err = rerr
		}
	}
	return err
}

func (q *queue) removeFile(num uint64) error {
	if err := q.fs.Remove(filepath.Join(q.dir, queueFileName(num))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove queue file: %w", err)
	}
	return nil
}

// saveCursor records c as the acknowledged position, overwriting the
// cursor file in place with one write: the page cache keeps it through a
// kill -9 at any instant. It is fsynced before files are removed and on
// close only: after a power loss the cursor may be older than the truth,
// or fail its checksum, and delivery then resumes earlier (duplicates,
// never a loss).
func (q *queue) saveCursor(c cursor) error {
	q.cmu.Lock()
	defer q.cmu.Unlock()
	q.mu.Lock()
	q.acked = c
	if c.countOK {
		q.settled = max(q.settled, c.count)
	}
	q.mu.Unlock()
	return q.writeCursorLocked(false, false)
}

// sync fsyncs the active file, outside the writer's lock (a file rolled
// meanwhile was fsynced by roll).
func (q *queue) sync() error {
	q.wmu.Lock()
	f := q.active
	q.wmu.Unlock()
	if f == nil {
		return nil
	}
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("sync queue file: %w", err)
	}
	q.noteQueued()
	// The fsync cleaned the mapped pages: writing them faults again, unless
	// they are mapped ahead once more.
	// Not under wmu: rewind may wait for the prefaulter's chunk, and the
	// writer must not wait for that (a rewind of a file rolled meanwhile
	// only maps some pages again).
	q.wmu.Lock()
	mapped, off := q.amap != nil, q.wsize
	q.wmu.Unlock()
	if mapped {
		q.pf.rewind(off)
	}
	return nil
}

// noteQueued rewrites the cursor when frames were queued since it was
// last written, so that a crash loses at most a sync interval of the count
// of the queue's end (see checkEnd).
func (q *queue) noteQueued() {
	q.cmu.Lock()
	defer q.cmu.Unlock()
	q.mu.Lock()
	moved := q.queuedEnd != q.wroteEnd
	q.mu.Unlock()
	if !moved {
		return
	}
	if err := q.writeCursorLocked(false, false); err != nil {
		q.logger.Warn("forward: write cursor", "err", err)
	}
}

// close finishes the active file (closeActive) and writes (clean), syncs
// and closes the cursor.
func (q *queue) close() error {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	var err error
	if q.active != nil {
		err = q.closeActive()
	}
	if q.pf != nil {
		q.pf.close()
		q.pf = nil
	}
	q.cmu.Lock()
	defer q.cmu.Unlock()
	if werr := q.writeCursorLocked(false, true); werr != nil {
		q.logger.Warn("forward: write cursor on close", "err", werr)
	}
	if q.cursorFile != nil {
		serr := q.cursorFile.Sync()
		if cerr := q.cursorFile.Close(); serr == nil {
			serr = cerr
		}
		if err == nil && serr != nil {
			err = fmt.Errorf("close cursor: %w", serr)
		}
		q.cursorFile = nil
	}
	return err
}
