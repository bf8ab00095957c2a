package wal

// The on-disk framing of a WAL file. Every integer is little-endian.
//
// A file is a header followed by records, back to back, with no padding:
//
//	+-----------------+----------+----------+-----+----------+
//	| file header 28B | record 1 | record 2 | ... | record n |
//	+-----------------+----------+----------+-----+----------+
//
// File header (28 bytes):
//
//	0        4         5          8               16              24       28
//	+--------+---------+----------+---------------+---------------+--------+
//	| magic  | version | reserved | file number   | previous size | crc    |
//	| 4B     | 1B      | 3B       | uint64, 8B    | uint64, 8B    | 4B     |
//	+--------+---------+----------+---------------+---------------+--------+
//
//	magic          the bytes "SWAL" (0x53 0x57 0x41 0x4C)
//	version        formatVersion (2); version 1 is also read (below); a
//	               reader rejects any other value
//	reserved       three zero bytes; a reader rejects any other value
//	file number    the number in the file's name (%08d.wal), so a renamed or
//	               misplaced file is detected
//	previous size  the size in bytes of file number-1 when this file was
//	               created (after it was rolled, or replayed and its torn
//	               tail cut), or 2^64-1 when there was no such file. That
//	               file is never written again, so a reader finding another
//	               size knows it was cut or extended: a file cut exactly at a
//	               record boundary is detected, as long as a later file exists
//	crc            CRC-32C (Castagnoli) of bytes [0, 24)
//
// Version 1 (written by earlier releases) has a 20-byte header without the
// previous size: magic, version 1, reserved, file number, and the CRC-32C of
// bytes [0, 16) at [16, 20). Records follow it as in version 2.
//
// Record (13-byte header, then the payload):
//
//	0             4      5              9              13
//	+-------------+------+--------------+--------------+----------------+
//	| length      | type | header crc   | crc          | payload        |
//	| uint32, 4B  | 1B   | 4B           | 4B           | length bytes   |
//	+-------------+------+--------------+--------------+----------------+
//
//	length       payload bytes, at most maxPayload (256 MiB)
//	type         record type, 1..255 (0 is never written, so zeroed bytes
//	             are never a record)
//	header crc   CRC-32C of bytes [0, 5): checks length and type on their
//	             own, so a reader can test any offset for the start of a
//	             record in O(1) before it trusts the length
//	crc          CRC-32C of bytes [0, 9) followed by the payload
//
// The position of a record (Pos) is the offset just past its payload; the
// next record starts there. Readers never trust a length from disk: a length
// beyond maxPayload or beyond the bytes left in the file makes the record
// bad; it never sizes an allocation. The record header is recordLayout to
// the record package, which seals, checks and resynchronizes the records
// (as it does the series catalog's and the forward queue's).

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	iofs "io/fs"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/record"
	"github.com/stratadb/strata/internal/vfs"
)

// These constants are part of the durable format (drawn above) and must not be changed.
const (
	fileMagic        = "SWAL"
	formatVersion    = 2
	fileHeaderSize   = 28
	formatVersionV1  = 1
	fileHeaderSizeV1 = 20
	noPreviousFile   = math.MaxUint64 // previous size when file number-1 did not exist
	recordHeaderSize = 13
	maxPayload       = 256 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordLayout is the record header drawn above.
var recordLayout = &record.Layout{
	HeaderSize: recordHeaderSize,
	LengthAt:   0,
	MaxPayload: maxPayload,
	HeaderCRC:  &record.CRC{At: 5, From: 0, To: 5},
	PayloadCRC: record.CRC{At: 9, From: 0, To: 9},
	Valid:      func(h []byte) bool { return h[4] != 0 }, // type 0 is never a record
}

// appendFileHeader appends the header of file number num to dst; prevSize
// is the size of file num-1, or noPreviousFile.
func appendFileHeader(dst []byte, num, prevSize uint64) []byte {
	start := len(dst)
	dst = append(dst, fileMagic...)
	dst = append(dst, formatVersion, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint64(dst, num)
	dst = binary.LittleEndian.AppendUint64(dst, prevSize)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// appendRecord appends the framed record (typ, payload) to dst.
func appendRecord(dst []byte, typ byte, payload []byte) []byte {
	var h [recordHeaderSize]byte
	h[4] = typ
	return recordLayout.AppendFrame(dst, h[:], payload)
}

// FileName returns the name of WAL file number n: "%08d.wal".
func FileName(n uint64) string { return fmt.Sprintf("%08d.wal", n) }

// ParseFileName returns the number of the WAL file called name, and false
// when name is not one FileName makes.
func ParseFileName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, ".wal")
	if !ok || len(digits) < 8 {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n == 0 || FileName(n) != name {
		return 0, false
	}
	return n, true
}

// Files lists the WAL file numbers in dir, ascending. Other files are ignored.
func Files(fs vfs.FS, dir string) ([]uint64, error) {
	if fs == nil {
		fs = vfs.Default
	}
	names, err := fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list wal dir: %w", err)
	}
	var nums []uint64
	for _, name := range names {
		if n, ok := ParseFileName(name); ok {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	return nums, nil
}

// SyncMode says when SyncTo makes written records durable.
type SyncMode int

const (
	// SyncAlways fsyncs before SyncTo returns; concurrent callers share
	// fsyncs (group commit).
	SyncAlways SyncMode = iota
	// SyncInterval fsyncs from a background goroutine every SyncInterval;
	// SyncTo returns at once.
	SyncInterval
	// SyncNever leaves flushing to the OS (and to Rotate and Close).
	SyncNever
)

func (m SyncMode) String() string {
	switch m {
	case SyncAlways:
		return "always"
	case SyncInterval:
		return "interval"
	case SyncNever:
		return "never"
	}
	return "SyncMode(" + strconv.Itoa(int(m)) + ")"
}

// Options configure a Log. The zero value is valid: every zero field means
// its default.
type Options struct {
	FS           vfs.FS        // nil = vfs.Default
	SegmentBytes int64         // roll to a new file past this size; default 64 MiB
	Sync         SyncMode      // default SyncAlways
	SyncInterval time.Duration // default 100ms, for SyncInterval
	Logger       *slog.Logger  // nil = slog.Default()
	// MinFile is the lowest number Open may give its new file. The engine
	// passes the first file its manifest says to replay, so numbering never
	// goes back below it even when every older file has been removed.
	MinFile uint64
}

const (
	defaultSegmentBytes = 64 << 20
	defaultSyncInterval = 100 * time.Millisecond
	// A frame buffer grown past this by a large record is dropped after the
	// write rather than kept for the life of the Log.
	maxRetainedBuf = 1 << 20
)

func (o *Options) ensureDefaults() {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = defaultSegmentBytes
	}
	if o.SyncInterval == 0 {
		o.SyncInterval = defaultSyncInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

func (o *Options) validate() error {
	switch {
	case o.SegmentBytes < 0:
		return fmt.Errorf("%w: wal: negative SegmentBytes %d", base.ErrInvalid, o.SegmentBytes)
	case o.Sync < SyncAlways || o.Sync > SyncNever:
		return fmt.Errorf("%w: wal: unknown sync mode %d", base.ErrInvalid, int(o.Sync))
	case o.SyncInterval < 0:
		return fmt.Errorf("%w: wal: negative SyncInterval %v", base.ErrInvalid, o.SyncInterval)
	}
	return nil
}

// Pos is the position just after a written record; positions are ordered by
// (File, Offset).
type Pos struct {
	File   uint64
	Offset int64
}

// Compare returns -1, 0 or +1 as p is before, at or after q.
func (p Pos) Compare(q Pos) int {
	switch {
	case p.File < q.File:
		return -1
	case p.File > q.File:
		return 1
	case p.Offset < q.Offset:
		return -1
	case p.Offset > q.Offset:
		return 1
	}
	return 0
}

// Less reports whether p is before q.
func (p Pos) Less(q Pos) bool { return p.Compare(q) < 0 }

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.File, p.Offset) }

// Log is an open write-ahead log: a directory of numbered files of which
// only the newest is written. Its methods are safe for concurrent use.
//
// Locks, always taken in this order:
//   - writeMu serialises Write, Rotate and Close: it guards the current
//     file's write side (f, num, off, buf).
//   - syncMu is held by whoever fsyncs the current file: the group-commit
//     leader, the interval syncer, and a roll (so a file is never closed
//     under a running fsync). f may be read with either writeMu or syncMu.
//   - mu guards the small shared state below; no I/O is done under it.
type Log struct {
	fs     vfs.FS
	dir    string
	opts   Options
	logger *slog.Logger

	writeMu sync.Mutex
	syncMu  sync.Mutex

	f    vfs.File // current file; nil once closed or after a failed roll
	num  uint64   // current file number
	path string   // current file path
	off  int64    // bytes in the current file
	buf  []byte   // frame buffer, reused

	mu struct {
		sync.Mutex
		written Pos   // end of the last record written
		synced  Pos   // everything before this is durable
		err     error // sticky failure
		closed  bool
		files   []liveFile // live files, ascending, the current one last
	}

	size      atomic.Int64 // bytes in live files
	syncCount atomic.Int64 // file fsyncs performed

	stop chan struct{} // closed by Close to stop the interval syncer
	wg   sync.WaitGroup
}

type liveFile struct {
	num  uint64
	size int64
}

// Open creates dir if needed and starts a new file numbered one past the
// highest existing file (or 1). It never appends to an existing file: replay
// them first with ReplayDir. The new file's header is fsynced and its directory
// entry made durable before Open returns.
func Open(dir string, opts Options) (*Log, error) {
	opts.ensureDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	fs := opts.FS
	// Create the directory and make its entry durable, so that a power loss
	// cannot take the acknowledged records in it along.
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("wal: create dir: %w", err)
	}
	if err := fs.SyncDir(filepath.Dir(dir)); err != nil {
		return nil, fmt.Errorf("wal: sync parent of %s: %w", dir, err)
	}
	nums, err := Files(fs, dir)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	l := &Log{fs: fs, dir: dir, opts: opts, logger: opts.Logger, stop: make(chan struct{})}
	var total int64
	for _, n := range nums {
		fi, err := fs.Stat(filepath.Join(dir, FileName(n)))
		if err != nil {
			return nil, fmt.Errorf("wal: %w", err)
		}
		l.mu.files = append(l.mu.files, liveFile{num: n, size: fi.Size()})
		total += fi.Size()
	}
	l.size.Store(total)
	next := max(1, opts.MinFile)
	if len(nums) > 0 {
		next = max(next, nums[len(nums)-1]+1)
	}
	prevSize := uint64(noPreviousFile)
	if n := len(l.mu.files); n > 0 && l.mu.files[n-1].num == next-1 {
		prevSize = uint64(l.mu.files[n-1].size)
	}
	if err := l.createFile(next, prevSize); err != nil {
		return nil, err
	}
	if err := l.f.Sync(); err != nil {
		l.f.Close()
		return nil, fmt.Errorf("wal: sync %s: %w", l.path, err)
	}
	l.syncCount.Add(1)
	l.mu.synced = l.mu.written
	if opts.Sync == SyncInterval {
		l.wg.Go(l.syncLoop)
	}
	return l, nil
}

// createFile creates file num, whose predecessor is prevSize bytes long
// (or noPreviousFile), writes its header and makes its directory
// entry durable. The header itself is fsynced with the file's first fsync:
// until then no record in the file is acknowledged under SyncAlways, and a
// torn header is a torn tail to ReplayDir. Called with writeMu and syncMu held
// (or before the Log is shared).
func (l *Log) createFile(num, prevSize uint64) error {
	path := filepath.Join(l.dir, FileName(num))
	f, err := l.fs.Create(path)
	if err != nil {
		return fmt.Errorf("wal: create %s: %w", path, err)
	}
	var hdr [fileHeaderSize]byte
	if n, err := f.Write(appendFileHeader(hdr[:0], num, prevSize)); err != nil || n != len(hdr) {
		f.Close()
		return fmt.Errorf("wal: write header %s: %w", path, shortWrite(err))
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		f.Close()
		return fmt.Errorf("wal: sync dir %s: %w", l.dir, err)
	}
	l.f, l.num, l.path, l.off = f, num, path, fileHeaderSize
	pos := Pos{File: num, Offset: fileHeaderSize}
	l.mu.Lock()
	l.mu.written = pos
	l.mu.files = append(l.mu.files, liveFile{num: num, size: fileHeaderSize})
	l.mu.Unlock()
	l.size.Add(fileHeaderSize)
	return nil
}

func shortWrite(err error) error {
	if err == nil {
		return errors.New("short write")
	}
	return err
}

// failureLocked returns the error that refuses new writes: the sticky
// failure, or ErrClosed. Called with mu held.
func (l *Log) failureLocked() error {
	if l.mu.err != nil {
		return l.mu.err
	}
	if l.mu.closed {
		return base.ErrClosed
	}
	return nil
}

// failure is failureLocked for a caller that does not hold mu.
func (l *Log) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failureLocked()
}

// fail records err as the sticky failure unless one is already recorded, and
// returns the sticky failure.
func (l *Log) fail(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.err == nil {
		l.mu.err = err
		l.logger.Error("wal failed; refusing further writes", "dir", l.dir, "err", err)
	}
	return l.mu.err
}

// Write frames (typ, payload) as one record and writes it to the current
// file with one write call, rolling to a new file first when the current one
// is past SegmentBytes. It does not wait for fsync: pass the returned
// position to SyncTo for that. typ must not be 0 and payload must not be
// longer than 256 MiB (errors wrapping base.ErrInvalid, which do not fail
// the log). Any I/O failure is sticky: every later Write returns it.
func (l *Log) Write(typ byte, payload []byte) (Pos, error) {
	if typ == 0 {
		return Pos{}, fmt.Errorf("%w: wal: record type 0 is reserved", base.ErrInvalid)
	}
	if len(payload) > maxPayload {
		return Pos{}, fmt.Errorf("%w: wal: record of %d bytes exceeds %d", base.ErrInvalid, len(payload), maxPayload)
	}
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.failure(); err != nil {
		return Pos{}, err
	}
	if l.off > fileHeaderSize && l.off >= l.opts.SegmentBytes {
		if err := l.roll(); err != nil {
			return Pos{}, err
		}
	}
	l.buf = appendRecord(l.buf[:0], typ, payload)
	n, err := record.Write(l.f, l.buf)
	if cap(l.buf) > maxRetainedBuf {
		l.buf = nil
	}
	if err != nil {
		// A partial record may be on disk: never write after it.
		return Pos{}, l.fail(fmt.Errorf("wal: write %s: %w", l.path, err))
	}
	l.off += int64(n)
	pos := Pos{File: l.num, Offset: l.off}
	l.mu.Lock()
	l.mu.written = pos
	l.mu.files[len(l.mu.files)-1].size = l.off
	l.mu.Unlock()
	l.size.Add(int64(n))
	return pos, nil
}

// roll fsyncs and closes the current file and creates the next one. Called
// with writeMu held; a failure is sticky.
func (l *Log) roll() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	// A group-commit leader may have failed an fsync while this caller
	// waited for syncMu (its caller checked for a failure before): then
	// the records that fsync covered were refused, and a second fsync, which
	// may succeed without the pages the first one lost, must not mark them
	// durable (a Rotate would claim them, and a later SyncTo acknowledge
	// them).
	if err := l.failure(); err != nil {
		return err
	}
	old, oldPath, end := l.f, l.path, Pos{File: l.num, Offset: l.off}
	l.f = nil
	err := old.Sync()
	l.syncCount.Add(1)
	if err != nil {
		old.Close()
		return l.fail(fmt.Errorf("wal: sync %s: %w", oldPath, err))
	}
	l.mu.Lock()
	if l.mu.synced.Less(end) {
		l.mu.synced = end
	}
	l.mu.Unlock()
	if err := old.Close(); err != nil {
		return l.fail(fmt.Errorf("wal: close %s: %w", oldPath, err))
	}
	if err := l.createFile(l.num+1, uint64(end.Offset)); err != nil {
		return l.fail(err)
	}
	l.logger.Debug("wal rolled", "dir", l.dir, "file", l.num)
	return nil
}

// SyncTo blocks until every record up to pos (a position returned by Write)
// is durable as the sync mode promises. Under SyncAlways it fsyncs, with
// group commit: one caller (the leader) fsyncs everything written so far
// while the others wait, and a waiter whose pos the leader covered returns
// without an fsync of its own. Under SyncInterval and SyncNever it returns
// at once. It returns the sticky error if the log has failed before pos was
// durable, and base.ErrClosed after Close for a pos that was never synced.
func (l *Log) SyncTo(pos Pos) error {
	l.mu.Lock()
	if !l.mu.synced.Less(pos) {
		l.mu.Unlock()
		return nil
	}
	err := l.failureLocked()
	if err == nil && l.mu.written.Less(pos) {
		err = fmt.Errorf("%w: wal: sync to %v past the written end %v", base.ErrInvalid, pos, l.mu.written)
	}
	l.mu.Unlock()
	if err != nil || l.opts.Sync != SyncAlways {
		return err
	}
	_, err = l.syncIfBehind(pos)
	return err
}

// syncIfBehind fsyncs the current file unless pos is already durable, and
// reports whether it did. It is the group-commit leader step: waiters queue
// on syncMu and find their pos covered when the leader releases it.
func (l *Log) syncIfBehind(pos Pos) (bool, error) {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if !l.mu.synced.Less(pos) {
		l.mu.Unlock()
		return false, nil
	}
	if err := l.failureLocked(); err != nil {
		l.mu.Unlock()
		return false, err
	}
	target := l.mu.written
	l.mu.Unlock()
	// No roll can run while syncMu is held, so target lies in l.f (or in a
	// file that a roll already fsynced). Writes may go on meanwhile: they
	// are covered by a later fsync.
	err := l.f.Sync()
	l.syncCount.Add(1)
	if err != nil {
		return true, l.fail(fmt.Errorf("wal: sync %s: %w", l.path, err))
	}
	l.mu.Lock()
	if l.mu.synced.Less(target) {
		l.mu.synced = target
	}
	l.mu.Unlock()
	return true, nil
}

// syncLoop is the SyncInterval background goroutine.
func (l *Log) syncLoop() {
	t := time.NewTicker(l.opts.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		l.mu.Lock()
		target, failed := l.mu.written, l.mu.err != nil || l.mu.closed
		l.mu.Unlock()
		if failed {
			return
		}
		// A failure is sticky and logged by fail; the next Write reports it.
		l.syncIfBehind(target)
	}
}

// Sync makes every record written so far durable, whatever the sync mode
// (the engine calls it before a manifest edit that could otherwise make a
// later operation durable ahead of earlier ones). It shares fsyncs with
// concurrent SyncTo callers and does nothing when all is already durable.
func (l *Log) Sync() error {
	l.mu.Lock()
	pos := l.mu.written
	err := l.failureLocked()
	l.mu.Unlock()
	if err != nil {
		return err
	}
	_, err = l.syncIfBehind(pos)
	return err
}

// Rotate fsyncs and closes the current file and starts a new one, and
// returns the new file's number N: every record written before Rotate is in
// a file numbered below N and is durable.
func (l *Log) Rotate() (uint64, error) {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.failure(); err != nil {
		return 0, err
	}
	if err := l.roll(); err != nil {
		return 0, err
	}
	return l.num, nil
}

// RemoveBefore deletes the files numbered below n, whose records the caller
// has made durable elsewhere (a flushed segment). The current file is never
// removed, whatever n is. Removing a file that is already gone is not an
// error.
func (l *Log) RemoveBefore(n uint64) error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return base.ErrClosed
	}
	var victims []liveFile
	keep := l.mu.files[:0]
	for i, f := range l.mu.files {
		if f.num < n && i < len(l.mu.files)-1 {
			victims = append(victims, f)
		} else {
			keep = append(keep, f)
		}
	}
	l.mu.files = keep
	l.mu.Unlock()
	if len(victims) == 0 {
		return nil
	}
	var firstErr error
	for _, f := range victims {
		path := filepath.Join(l.dir, FileName(f.num))
		if err := l.fs.Remove(path); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			if firstErr == nil {
				firstErr = fmt.Errorf("wal: remove %s: %w", path, err)
			}
			l.mu.Lock() // still live: put it back for a later attempt
			l.mu.files = append(l.mu.files, f)
			slices.SortFunc(l.mu.files, func(a, b liveFile) int { return cmp.Compare(a.num, b.num) })
			l.mu.Unlock()
			continue
		}
		l.size.Add(-f.size)
	}
	if firstErr != nil {
		return firstErr
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("wal: sync dir %s: %w", l.dir, err)
	}
	return nil
}

// Size returns the bytes in live files: those not yet removed, the current
// one included.
func (l *Log) Size() int64 { return l.size.Load() }

// CurrentFile returns the number of the file being written.
func (l *Log) CurrentFile() uint64 {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	return l.num
}

// markClosed marks the log closed and stops the interval syncer; it
// returns base.ErrClosed when the log was closed already. The caller holds
// writeMu and not syncMu (the syncer takes syncMu, never writeMu).
func (l *Log) markClosed() error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return base.ErrClosed
	}
	l.mu.closed = true
	l.mu.Unlock()
	close(l.stop)
	l.wg.Wait()
	return nil
}

// Discard closes the log without fsyncing it and removes all its files.
// It is for a caller that has made every record durable elsewhere (the
// engine, after its final flush on Close): fsyncing data about to be
// deleted would only cost time. A second call, or Close after it, returns
// base.ErrClosed.
func (l *Log) Discard() error { return l.close(false) }

// Close fsyncs the current file, closes it and stops the background
// goroutine. It returns the sticky error if the log had failed (the file is
// still fsynced and closed, best effort); a second call returns
// base.ErrClosed.
func (l *Log) Close() error { return l.close(true) }

// close is Close with keep, Discard without.
func (l *Log) close(keep bool) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.markClosed(); err != nil {
		return err
	}
	err := l.closeFile(keep)
	l.mu.Lock()
	defer l.mu.Unlock()
	if keep {
		if l.mu.err != nil {
			return l.mu.err
		}
		return err
	}
	for _, f := range l.mu.files {
		if rerr := l.fs.Remove(filepath.Join(l.dir, FileName(f.num))); rerr != nil && !errors.Is(rerr, iofs.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	l.mu.files = nil
	l.size.Store(0)
	if err != nil {
		return fmt.Errorf("wal: discard: %w", err)
	}
	return nil
}

// closeFile closes the current file of a log markClosed has closed,
// fsyncing it first when sync is set. The caller holds writeMu.
func (l *Log) closeFile(sync bool) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.f == nil {
		return nil
	}
	var err error
	if sync {
		serr := l.f.Sync()
		l.syncCount.Add(1)
		if serr != nil {
			err = fmt.Errorf("wal: sync %s: %w", l.path, serr)
		} else {
			l.mu.Lock()
			if l.mu.err == nil {
				l.mu.synced = l.mu.written
			}
			l.mu.Unlock()
		}
	}
	if cerr := l.f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("wal: close %s: %w", l.path, cerr)
	}
	l.f = nil
	return err
}
