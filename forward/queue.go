package forward

// The forward queue: a directory of append-only files holding every batch
// the engine's change feed hands over, and a cursor file saying how much of
// it the remote has acknowledged.
//
// Queue file, named %08d.fq, numbered from 1; only the newest is written,
// and Open never appends to a file it did not create in this process:
//
//	+------------------+-----------+--------+---------------+---------------+
//	| magic "SFWQ" (4) | version 1 | 0 (3)  | file number   | crc32c of the |
//	|                  | (1)       |        | uint64 LE (8) | first 16 (4)  |
//	+------------------+-----------+--------+---------------+---------------+
//	| frame | frame | ...
//
//	frame := length uint32 LE (4)   payload length
//	       | crc uint32 LE (4)      crc32c of every byte after it (seq .. payload)
//	       | seq uint64 LE (8)      the engine's sequence number of the batch
//	       | time int64 LE (8)      when it was queued, Unix ns
//	       | samples uint32 LE (4)  samples in the payload
//	       | format (1)             engine.FeedFormatBatch
//	       | payload (length)       the engine's feed payload, as logged
//
// Sequence numbers ascend strictly through the files. A damaged frame at
// the end of the newest file is the torn tail of a crash and is cut off; a
// damaged frame elsewhere loses the rest of its file (counted and logged),
// never the other files.
//
// Preallocation: on Linux the file being written is created at its full
// size (SegmentBytes, or one frame if that is larger, rounded up to pages;
// fallocate) and mapped shared; a small frame is appended by copying it
// into the mapping, a large one with pwritev(2) into the preallocated
// space: either way the page cache holds it from then on, through a kill
// -9. The bytes past the last frame are zeros until written, and zeros
// are never a frame (the crc32c of zeros is not zero), so a file that ends
// in zeros ends after its last frame: Open cuts the zeros off without
// counting a loss (a torn frame followed by zeros is a torn tail, as
// above). A file is cut to its used size and fsynced when the next one is
// started (and on close), so only the newest file can end in zeros. Where
// a file cannot be preallocated or mapped (other systems, file systems
// without fallocate), frames are appended with write(2) and files hold no
// zeros.
//
// Cursor file, named "cursor", overwritten in place with one write (a
// checksum mismatch after a power loss means: deliver the whole queue):
//
//	+------------------+-----------+---------------+-----------------+---------------+
//	| magic "SFWC" (4) | version 1 | seq uint64 LE | done uint32 LE  | crc32c of the |
//	|                  | (1)       | (8)           | (4)             | first 17 (4)  |
//	+------------------+-----------+---------------+-----------------+---------------+
//
// Every sample of the frames before seq, and the first done samples of
// frame seq, have been delivered (or dropped for good).
//
// These constants are part of the durable format and must not be changed.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	queueMagic       = "SFWQ"
	cursorMagic      = "SFWC"
	queueVersion     = 1
	queueHeaderSize  = 20
	frameHeaderSize  = 29
	cursorSize       = 21
	cursorName       = "cursor"
	queueSuffix      = ".fq"
	maxFramePayload  = 1 << 30
	frameSamplesMax  = 1<<32 - 1
	defaultSegBytes  = 64 << 20
	minSegBytes      = 64 << 10
	queueFileNameLen = 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errQueueCorrupt marks damage found in a queue or cursor file.
var errQueueCorrupt = errors.New("forward: corrupt queue")

func queueFileName(n uint64) string { return fmt.Sprintf("%08d%s", n, queueSuffix) }

func parseQueueFileName(name string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, queueSuffix)
	if !ok || len(s) != queueFileNameLen {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil && n > 0
}

func appendQueueHeader(dst []byte, num uint64) []byte {
	start := len(dst)
	dst = append(dst, queueMagic...)
	dst = append(dst, queueVersion, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint64(dst, num)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

func checkQueueHeader(h []byte, num uint64) error {
	if len(h) < queueHeaderSize {
		return fmt.Errorf("%w: short header", errQueueCorrupt)
	}
	if string(h[:4]) != queueMagic {
		return fmt.Errorf("%w: bad magic %q", errQueueCorrupt, h[:4])
	}
	if h[4] != queueVersion {
		return fmt.Errorf("%w: unknown version %d", errQueueCorrupt, h[4])
	}
	if crc32.Checksum(h[:16], castagnoli) != binary.LittleEndian.Uint32(h[16:20]) {
		return fmt.Errorf("%w: header checksum mismatch", errQueueCorrupt)
	}
	if got := binary.LittleEndian.Uint64(h[8:16]); got != num {
		return fmt.Errorf("%w: header says file %d", errQueueCorrupt, got)
	}
	return nil
}

// frame is a decoded frame header with its payload.
type frame struct {
	seq     uint64
	time    int64
	samples uint32
	format  byte
	payload []byte
}

func (f *frame) size() int64 { return frameHeaderSize + int64(len(f.payload)) }

// appendFrame appends the encoding of a frame to dst.
func appendFrame(dst []byte, seq uint64, t int64, samples uint32, format byte, payload []byte) []byte {
	return append(appendFrameHeader(dst, seq, t, samples, format, payload), payload...)
}

// appendFrameHeader appends the header of the frame of payload to dst,
// its checksum over the payload included.
func appendFrameHeader(dst []byte, seq uint64, t int64, samples uint32, format byte, payload []byte) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = append(dst, 0, 0, 0, 0) // crc, below
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(t))
	dst = binary.LittleEndian.AppendUint32(dst, samples)
	dst = append(dst, format)
	crc := crc32.Update(crc32.Checksum(dst[start+8:], castagnoli), castagnoli, payload)
	binary.LittleEndian.PutUint32(dst[start+4:], crc)
	return dst
}

// parseFrame decodes the frame at the start of b. It returns errShort when
// b ends before the frame does (with need, the frame's whole size, when the
// header was readable) and errQueueCorrupt for a bad checksum. The payload
// aliases b.
func parseFrame(b []byte) (f frame, need int64, err error) {
	if len(b) < frameHeaderSize {
		return f, 0, errShort
	}
	n := binary.LittleEndian.Uint32(b)
	if n > maxFramePayload {
		return f, 0, fmt.Errorf("%w: frame length %d", errQueueCorrupt, n)
	}
	need = frameHeaderSize + int64(n)
	if int64(len(b)) < need {
		return f, need, errShort
	}
	if crc32.Checksum(b[8:need], castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return f, need, fmt.Errorf("%w: frame checksum mismatch", errQueueCorrupt)
	}
	f.seq = binary.LittleEndian.Uint64(b[8:])
	f.time = int64(binary.LittleEndian.Uint64(b[16:]))
	f.samples = binary.LittleEndian.Uint32(b[24:])
	f.format = b[28]
	f.payload = b[frameHeaderSize:need]
	return f, need, nil
}

var errShort = errors.New("forward: short frame")

// cursor is the acknowledged position: every sample before frame seq and
// the first done samples of it are delivered.
type cursor struct {
	seq  uint64
	done uint32
}

func (c cursor) marshal() []byte {
	b := make([]byte, 0, cursorSize)
	b = append(b, cursorMagic...)
	b = append(b, queueVersion)
	b = binary.LittleEndian.AppendUint64(b, c.seq)
	b = binary.LittleEndian.AppendUint32(b, c.done)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func unmarshalCursor(b []byte) (cursor, error) {
	switch {
	case len(b) != cursorSize:
		return cursor{}, fmt.Errorf("%w: cursor is %d bytes", errQueueCorrupt, len(b))
	case string(b[:4]) != cursorMagic:
		return cursor{}, fmt.Errorf("%w: bad cursor magic", errQueueCorrupt)
	case b[4] != queueVersion:
		return cursor{}, fmt.Errorf("%w: unknown cursor version %d", errQueueCorrupt, b[4])
	case crc32.Checksum(b[:17], castagnoli) != binary.LittleEndian.Uint32(b[17:]):
		return cursor{}, fmt.Errorf("%w: cursor checksum mismatch", errQueueCorrupt)
	}
	return cursor{seq: binary.LittleEndian.Uint64(b[5:]), done: binary.LittleEndian.Uint32(b[13:])}, nil
}

// qfile is what the queue knows of one of its files.
type qfile struct {
	num      uint64
	size     int64 // committed bytes: the reader never reads past it
	samples  int64 // samples of the committed frames
	firstSeq uint64
	lastSeq  uint64 // 0 while the file holds no frame
	newest   int64  // queue time of the newest frame
	broken   bool   // damaged past size: readers stop there
	dropped  bool   // trim skipped its unread frames
}

// readPos is where the reader stands: the next frame to read is at off in
// file num; read counts the samples of the file's frames before it.
type readPos struct {
	num  uint64
	off  int64
	read int64
}

// queue is the on-disk queue. The writer (the feed hooks, run under the
// engine's commit lock) and the reader (the sender goroutine) meet only
// under mu, which is never held during I/O.
type queue struct {
	dir      string
	segBytes int64
	logger   *slog.Logger
	now      func() time.Time

	// wmu serialises the writer: the active file and the pending frame.
	wmu    sync.Mutex
	active *os.File
	wsize  int64 // bytes written to the active file, the pending frame too
	// amap is the active file's mapping (see the format comment), nil when
	// frames are appended with write(2); noMap stops mapping new files.
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
	wbuf     []byte
	rollNext bool // the active file failed a write: start a new one

	cursorFile *os.File // the sender's, overwritten in place

	mu    sync.Mutex
	files []*qfile // ascending; the last one is active
	rd    readPos
	// backlog counts the samples queued and not yet read by the sender;
	// damaged those lost to damage found while reading.
	backlog int64
	damaged int64
	// unreadMax is at least the unread bytes: set to them by trim, grown
	// by commit, never lowered by reads, so that the writer can tell
	// cheaply when trim cannot have anything to do.
	unreadMax int64
	notify    chan struct{} // signalled when frames are published or the reader moves
}

// openQueue opens (creating) the queue in dir. Frames with a sequence number
// above recovered were never logged by the engine and are cut off. It
// returns the queue and the acknowledged cursor.
func openQueue(dir string, segBytes int64, recovered uint64, logger *slog.Logger, now func() time.Time) (*queue, cursor, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, cursor{}, fmt.Errorf("create queue dir: %w", err)
	}
	q := &queue{dir: dir, segBytes: segBytes, logger: logger, now: now, notify: make(chan struct{}, 1)}
	var cur cursor
	cpath := filepath.Join(dir, cursorName)
	switch b, err := os.ReadFile(cpath); {
	case err == nil && len(b) > 0:
		if cur, err = unmarshalCursor(b); err != nil {
			// Only a power loss mid-write does this: start over from the
			// oldest queued frame (duplicates, never a loss).
			logger.Warn("forward: damaged cursor; delivering the whole queue again", "file", cpath, "err", err)
			cur = cursor{}
		}
	case err == nil || errors.Is(err, fs.ErrNotExist):
	default:
		return nil, cursor{}, fmt.Errorf("read cursor: %w", err)
	}
	cf, err := os.OpenFile(cpath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, cursor{}, fmt.Errorf("open cursor: %w", err)
	}
	q.cursorFile = cf
	q.pf = newPrefaulter()
	fail := func(err error) (*queue, cursor, error) {
		q.pf.close()
		cf.Close()
		return nil, cursor{}, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fail(fmt.Errorf("list queue dir: %w", err))
	}
	var nums []uint64
	for _, e := range entries {
		if n, ok := parseQueueFileName(e.Name()); ok {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	var lastSeq uint64
	for i, n := range nums {
		f, err := q.scanFile(n, i == len(nums)-1, recovered, &lastSeq)
		if err != nil {
			return fail(err)
		}
		q.files = append(q.files, f)
	}
	// Files wholly acknowledged are removed; the reader starts at the first
	// frame not wholly acknowledged.
	for len(q.files) > 0 && q.files[0].lastSeq < cur.seq {
		if err := q.removeFile(q.files[0].num); err != nil {
			return fail(err)
		}
		q.files = q.files[1:]
	}
	for _, f := range q.files {
		q.backlog += f.samples
	}
	q.unreadMax = q.unreadBytesLocked()
	next := uint64(1)
	if len(nums) > 0 {
		next = nums[len(nums)-1] + 1
	}
	q.rd = readPos{num: next, off: queueHeaderSize}
	if len(q.files) > 0 {
		q.rd.num = q.files[0].num
	}
	if err := q.createFile(next, 0); err != nil {
		return fail(err)
	}
	return q, cur, nil
}

// scanFile reads file num and returns what the queue needs to know of it.
// In the last file, a torn tail and frames never logged (seq > recovered)
// are cut off.
func (q *queue) scanFile(num uint64, last bool, recovered uint64, lastSeq *uint64) (*qfile, error) {
	path := filepath.Join(q.dir, queueFileName(num))
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read queue file: %w", err)
	}
	f := &qfile{num: num, size: queueHeaderSize}
	if err := checkQueueHeader(data, num); err != nil {
		if last && (len(data) < queueHeaderSize || allZero(data)) {
			// Torn while being created (or preallocated, and its header
			// lost to a power loss): nothing was ever queued in it.
			q.logger.Warn("forward: removing torn queue file", "file", path)
			f.broken = true
			return f, nil
		}
		return nil, fmt.Errorf("queue file %s: %w", path, err)
	}
	off := int64(queueHeaderSize)
	for off < int64(len(data)) {
		fr, _, err := parseFrame(data[off:])
		if err != nil && allZero(data[off:]) {
			// Preallocated space after the last frame: the clean end.
			if !last {
				q.logger.Warn("forward: queue file was not cut to its frames; cutting it now", "file", path, "offset", off)
			}
			return f, truncateTail(path, off, f)
		}
		if err == nil && fr.seq <= *lastSeq {
			err = fmt.Errorf("%w: frame %d after %d", errQueueCorrupt, fr.seq, *lastSeq)
		}
		if err == nil && fr.seq > recovered {
			// Prepared, never logged: the engine does not hold it.
			q.logger.Warn("forward: cutting off queued batches the database never logged",
				"file", path, "offset", off, "seq", fr.seq, "recovered", recovered)
			return f, truncateTail(path, off, f)
		}
		if err != nil {
			if last {
				q.logger.Warn("forward: cutting off torn queue tail", "file", path, "offset", off, "bytes", int64(len(data))-off)
				return f, truncateTail(path, off, f)
			}
			q.logger.Error("forward: queue file damaged; its remaining batches are lost",
				"file", path, "offset", off, "bytes", int64(len(data))-off, "err", err)
			f.broken = true
			return f, nil
		}
		if f.lastSeq == 0 {
			f.firstSeq = fr.seq
		}
		f.lastSeq, *lastSeq = fr.seq, fr.seq
		f.samples += int64(fr.samples)
		f.newest = fr.time
		off += fr.size()
		f.size = off
	}
	return f, nil
}

// allZero tells whether b holds only zero bytes.
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func truncateTail(path string, off int64, f *qfile) error {
	if err := os.Truncate(path, off); err != nil {
		return fmt.Errorf("truncate queue file: %w", err)
	}
	f.size = off
	return nil
}

// createFile starts active file num, with room for a frame of need bytes
// when it is mapped. The caller holds wmu (or is Open).
func (q *queue) createFile(num uint64, need int64) error {
	path := filepath.Join(q.dir, queueFileName(num))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("create queue file: %w", err)
	}
	// The header is written first: a file cut short or ending in zeros
	// after it holds no frame, which Open tells from damage.
	if _, err := f.Write(appendQueueHeader(nil, num)); err != nil {
		f.Close()
		return fmt.Errorf("write queue file header: %w", err)
	}
	if err := syncDir(q.dir); err != nil {
		f.Close()
		return err
	}
	q.active, q.wsize, q.amap = f, queueHeaderSize, nil
	q.mapActive(need)
	q.mu.Lock()
	q.files = append(q.files, &qfile{num: num, size: queueHeaderSize})
	q.mu.Unlock()
	return nil
}

// mapActive preallocates and maps the active file, still empty, with room
// for a frame of need bytes (unless mapping failed before). The caller
// holds wmu.
func (q *queue) mapActive(need int64) {
	if q.noMap {
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
	m, err := mapFile(q.active, queueHeaderSize, size)
	if err != nil {
		q.logger.Debug("forward: appending to the queue with write(2)", "err", err)
		q.noMap = true
		return
	}
	q.amap, q.pfAsked = m, 0
	q.pf.set(m)
}

var pageSize = int64(os.Getpagesize())

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open queue dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync queue dir: %w", err)
	}
	return nil
}

// prepare appends a frame to the active file; it is not visible to the
// reader until commit. A failed write makes the frame lost: commit counts
// it as dropped. It returns the error for the caller to log.
func (q *queue) prepare(seq uint64, samples int, format byte, payload []byte) error {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	q.pending.ok, q.pending.lost = true, false
	q.pending.seq, q.pending.samples = seq, int64(samples)
	need := int64(frameHeaderSize + len(payload))
	if q.active == nil || q.rollNext || q.wsize >= q.segBytes ||
		q.amap != nil && q.wsize+need > int64(len(q.amap)) && q.wsize > queueHeaderSize {
		if err := q.roll(need); err != nil {
			q.pending.lost = true
			return err
		}
	} else if q.amap != nil && q.wsize+need > int64(len(q.amap)) {
		q.mapActive(need) // a frame larger than the empty file: grow it
	}
	now := q.now().UnixNano()
	q.pending.off, q.pending.size, q.pending.time = q.wsize, need, now
	if q.amap != nil && q.wsize+need > int64(len(q.amap)) {
		// Cannot happen (roll made room): keep the file whole regardless.
		q.pending.lost = true
		q.rollNext = true
		return fmt.Errorf("append to queue: frame of %d bytes past the mapped file", need)
	}
	if q.amap != nil && need <= mapFrameMax {
		if err := q.appendMapped(seq, now, samples, format, payload); err != nil {
			q.pending.lost = true
			return err
		}
		return nil
	}
	var n int
	var err error
	if q.amap != nil {
		// Into the preallocated space, the payload from where it is.
		q.wbuf = appendFrameHeader(q.wbuf[:0], seq, now, uint32(min(uint64(samples), frameSamplesMax)), format, payload)
		n, err = writeFrameAt(q.active, q.wbuf, payload, q.wsize)
	} else {
		q.wbuf = appendFrame(q.wbuf[:0], seq, now, uint32(min(uint64(samples), frameSamplesMax)), format, payload)
		n, err = q.active.Write(q.wbuf)
	}
	q.wsize += int64(n)
	if err != nil {
		q.pending.lost = true
		q.undoLocked()
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
func (q *queue) appendMapped(seq uint64, now int64, samples int, format byte, payload []byte) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if _, fault := r.(interface{ Addr() uintptr }); !fault {
			panic(r)
		}
		err = fmt.Errorf("append to queue: fault writing the mapped file: %v", r)
		q.logger.Error("forward: cannot write the mapped queue file; starting a new file, with write(2)", "err", err)
		q.noMap, q.rollNext = true, true
		q.mu.Lock()
		q.files[len(q.files)-1].broken = true
		q.mu.Unlock()
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	off := q.wsize
	b := appendFrame(q.amap[off:off:len(q.amap)], seq, now, uint32(min(uint64(samples), frameSamplesMax)), format, payload)
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
	if _, err := q.active.Seek(q.pending.off, io.SeekStart); err != nil {
		q.rollNext = true
		return
	}
	q.wsize = q.pending.off
}

// roll finishes the active file (closeActive) and starts the next, with
// room for a frame of need bytes. The caller holds wmu.
func (q *queue) roll(need int64) error {
	next := uint64(1)
	if q.active != nil {
		if err := q.closeActive(); err != nil {
			q.logger.Warn("forward: finish queue file", "err", err)
		}
	}
	q.mu.Lock()
	if len(q.files) > 0 {
		next = q.files[len(q.files)-1].num + 1
	}
	q.mu.Unlock()
	if err := q.createFile(next, need); err != nil {
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
	q.active = nil
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
	q.mu.Lock()
	f := q.files[len(q.files)-1]
	if f.lastSeq == 0 {
		f.firstSeq = seq
	}
	f.lastSeq = seq
	f.size = p.off + p.size
	f.samples += p.samples
	f.newest = p.time
	q.backlog += p.samples
	q.unreadMax += p.size
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
	return p.samples, 0
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
// is valid until the next call.
func (q *queue) next(rb *readBuf) (fr frame, ok bool, err error) {
	for {
		q.mu.Lock()
		pos := q.rd
		i := q.fileIndex(pos.num)
		if i < 0 {
			// Its file is gone: go on with the next one left.
			j := slices.IndexFunc(q.files, func(f *qfile) bool { return f.num > pos.num })
			q.rd = readPos{num: q.files[j].num, off: queueHeaderSize} // the active file is always there
			q.mu.Unlock()
			continue
		}
		f := *q.files[i]
		last := i == len(q.files)-1
		q.mu.Unlock()
		if pos.off >= f.size {
			if last {
				return frame{}, false, nil
			}
			q.advance(pos, readPos{num: q.files[i+1].num, off: queueHeaderSize}, 0)
			continue
		}
		fr, err := q.readFrame(rb, f.num, pos.off, f.size)
		if err != nil {
			// Damage past what a scan found (or a vanished file): lose the
			// rest of this file, counted, and go on.
			q.logger.Error("forward: unreadable queue frame; dropping the rest of the file",
				"file", queueFileName(f.num), "offset", pos.off, "err", err)
			q.dropRest(pos)
			continue
		}
		if !q.advance(pos, readPos{num: pos.num, off: pos.off + fr.size(), read: pos.read + int64(fr.samples)}, int64(fr.samples)) {
			continue // the trimmer moved the reader meanwhile
		}
		return fr, true, nil
	}
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

// readFrame returns the frame at off in file num, whose committed bytes
// end at end, from rb, which it refills from the file when the frame is not
// wholly in it.
func (q *queue) readFrame(rb *readBuf, num uint64, off, end int64) (frame, error) {
	if rb.num == num && off >= rb.off && off < rb.off+int64(len(rb.b)) {
		fr, _, err := parseFrame(rb.b[off-rb.off:])
		if !errors.Is(err, errShort) {
			return fr, err
		}
	}
	f, err := os.Open(filepath.Join(q.dir, queueFileName(num)))
	if err != nil {
		return frame{}, err
	}
	defer f.Close()
	rb.num, rb.off, rb.b = 0, 0, rb.b[:0] // empty unless the read succeeds
	read := func(n int64) error {
		if int64(cap(rb.b)) < n {
			rb.b = make([]byte, n)
		}
		if _, err := f.ReadAt(rb.b[:n], off); err != nil {
			return err
		}
		rb.num, rb.off, rb.b = num, off, rb.b[:n]
		return nil
	}
	if err := read(min(end-off, readAhead)); err != nil {
		return frame{}, err
	}
	fr, need, err := parseFrame(rb.b)
	if !errors.Is(err, errShort) {
		return fr, err
	}
	if need == 0 || off+need > end {
		return frame{}, fmt.Errorf("%w: frame past the committed end", errQueueCorrupt)
	}
	if err := read(need); err != nil {
		return frame{}, err
	}
	fr, _, err = parseFrame(rb.b)
	return fr, err
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
// when it is the active one) and returns the samples it skipped.
func (q *queue) dropReaderFileLocked() int64 {
	i := q.fileIndex(q.rd.num)
	if i < 0 {
		return 0
	}
	f := q.files[i]
	n := max(f.samples-q.rd.read, 0)
	f.dropped = true
	if i == len(q.files)-1 {
		q.rd.off, q.rd.read = f.size, f.samples
	} else {
		q.rd = readPos{num: q.files[i+1].num, off: queueHeaderSize}
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
			n += f.size - q.rd.off
		case f.num > q.rd.num:
			n += f.size - queueHeaderSize
		}
	}
	return n
}

// trim drops the oldest unread data, a file at a time, while the unread
// bytes pass maxBytes or the reader's file was wholly queued before cutoff
// (Unix ns). It returns the samples dropped.
func (q *queue) trim(maxBytes int64, cutoff int64) (dropped int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	defer func() { q.unreadMax = q.unreadBytesLocked() }()
	for {
		i := q.fileIndex(q.rd.num)
		if i < 0 {
			return dropped
		}
		f := q.files[i]
		if q.rd.off >= f.size && i < len(q.files)-1 {
			q.rd = readPos{num: q.files[i+1].num, off: queueHeaderSize} // read through
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

// removeDone removes the files that nothing needs any more: files before
// the reader's whose frames are all acknowledged, or which trim dropped
// (unless the acknowledged position is inside them: their read part is
// still in flight).
func (q *queue) removeDone(acked cursor) error {
	q.mu.Lock()
	var rm []uint64
	keep := q.files[:0:0]
	for i, f := range q.files {
		done := f.lastSeq == 0 || f.lastSeq < acked.seq ||
			f.dropped && (acked.seq < f.firstSeq || acked.seq > f.lastSeq)
		if i < len(q.files)-1 && f.num < q.rd.num && done {
			rm = append(rm, f.num)
			continue
		}
		keep = append(keep, f)
	}
	q.files = keep
	q.mu.Unlock()
	for _, n := range rm {
		if err := q.removeFile(n); err != nil {
			return err
		}
	}
	return nil
}

func (q *queue) removeFile(num uint64) error {
	if err := os.Remove(filepath.Join(q.dir, queueFileName(num))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove queue file: %w", err)
	}
	return nil
}

// saveCursor records c as the acknowledged position, overwriting the
// cursor file in place with one write: the page cache keeps it through a
// kill -9 at any instant. It is fsynced on close only: after a power loss
// the cursor may be older than the truth, or fail its checksum, and delivery
// then resumes earlier (duplicates, never a loss).
func (q *queue) saveCursor(c cursor) error {
	if _, err := q.cursorFile.WriteAt(c.marshal(), 0); err != nil {
		return fmt.Errorf("write cursor: %w", err)
	}
	return nil
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

// close finishes the active file (closeActive) and syncs and closes the
// cursor.
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
