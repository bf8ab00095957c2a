package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	iofs "io/fs"
	"path/filepath"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/record"
	"github.com/stratadb/strata/internal/vfs"
)

// ReplayResult describes what ReplayDir read and repaired.
type ReplayResult struct {
	Files    int    // files read
	Records  int    // intact records passed to fn
	LastFile uint64 // number of the last file read; 0 when there was none
	// Torn is set when the last file ends in a torn tail: the unacknowledged
	// end of a crash, from TruncatedOffset to the end of TruncatedFile.
	Torn bool
	// Truncated is set when ReplayDir cut the torn tail off (not ReadOnly).
	Truncated       bool
	TruncatedFile   string // path of the file with the torn tail
	TruncatedOffset int64  // offset of the torn tail: the start of the torn record
	TruncatedBytes  int64  // bytes in the torn tail
}

// ReplayOptions tune ReplayDir.
type ReplayOptions struct {
	// From is the number of the first file to replay; files below it are
	// ignored. When From is above 0, file From must exist if any file at or
	// above it does: the first file missing is corruption.
	From uint64
	// ReadOnly leaves a torn tail in place: replay stops before it and
	// reports it in the result. Nothing is written. TruncateTail cuts it
	// later, once the caller has validated the rest.
	ReadOnly bool
}

// ReplayDir reads the WAL files of dir numbered from opts.From on, in
// order, and calls fn for each intact record. payload is only valid during
// the call. A missing dir holds no files. Unless opts.ReadOnly, ReplayDir
// repairs the last file, so it must not run while a Log is writing dir: the
// engine replays, then calls Open.
//
// A torn or corrupt record at the tail of the last file is the unacknowledged
// end of a crash: ReplayDir truncates the file at that record's offset,
// fsyncs it, and reports it in the result (ReadOnly: reports it only). The
// same holds for a last file shorter than its header or with an all-zero
// header (a crash right after the file was created). Damage anywhere else is
// an error wrapping base.ErrCorrupt, a *base.CorruptionError naming the file
// and the offset: a bad record in an earlier file, or in the last file with
// a valid record after it, a file shorter than its header that is not the
// last, a missing file between two present ones (file numbers are
// consecutive), and a missing first file (opts.From).
//
// An error from fn stops replay and is returned as it is, except that an
// error wrapping base.ErrCorrupt that is not already a *base.CorruptionError
// is wrapped in one naming the file and the record's offset, so a payload
// decode failure (or a gap the caller finds in its sequence numbers) is
// located.
func ReplayDir(fs vfs.FS, dir string, opts ReplayOptions, fn func(file uint64, typ byte, payload []byte) error) (ReplayResult, error) {
	if fs == nil {
		fs = vfs.Default
	}
	var res ReplayResult
	nums, err := Files(fs, dir)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return res, nil
		}
		return res, fmt.Errorf("wal: replay: %w", err)
	}
	i := 0
	for i < len(nums) && nums[i] < opts.From {
		i++
	}
	nums = nums[i:]
	if len(nums) > 0 && opts.From > 0 && nums[0] != opts.From {
		return res, &base.CorruptionError{Path: filepath.Join(dir, FileName(opts.From)), Offset: 0,
			Err: fmt.Errorf("wal file %d is missing: the log must start there, and file %d exists", opts.From, nums[0])}
	}
	for i := 1; i < len(nums); i++ {
		if nums[i] != nums[i-1]+1 {
			return res, &base.CorruptionError{Path: filepath.Join(dir, FileName(nums[i-1]+1)), Offset: 0,
				Err: fmt.Errorf("wal file %d is missing between files %d and %d", nums[i-1]+1, nums[i-1], nums[i])}
		}
	}
	var r fileReader
	r.readOnly = opts.ReadOnly
	prevSize := int64(-1)
	for i, num := range nums {
		res.Files++
		res.LastFile = num
		if err := r.replayFile(fs, dir, num, i == len(nums)-1, prevSize, fn, &res); err != nil {
			return res, err
		}
		prevSize = r.size
	}
	return res, nil
}

// TruncateTail cuts the torn tail that a ReadOnly ReplayDir reported in res
// and fsyncs the file. It does nothing when res reports none.
func TruncateTail(fs vfs.FS, res *ReplayResult) error {
	if !res.Torn || res.Truncated {
		return nil
	}
	if fs == nil {
		fs = vfs.Default
	}
	return truncate(fs, res.TruncatedFile, res.TruncatedOffset, res.TruncatedOffset+res.TruncatedBytes, res)
}

// fileReader reads one file through a window buffer that is reused across
// files. The buffer never grows past the bytes left in the file.
type fileReader struct {
	readOnly bool  // report a torn tail, do not truncate it
	hdrSize  int64 // header length of the current file, by its version
	f        vfs.File
	path     string
	size     int64
	w        record.Window
}

// bytes returns the n bytes at off. The caller has checked off+n <= size.
// The slice is valid until the next call.
func (r *fileReader) bytes(off int64, n int) ([]byte, error) {
	b, err := r.w.Bytes(off, n)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	return b, nil
}

// badRecord says why the bytes at an offset are not a record.
type badRecord uint8

const (
	recordOK badRecord = iota
	badShortHeader
	badHeaderCRC
	badType
	badLength
	badCRC
)

func (b badRecord) String() string {
	switch b {
	case badShortHeader:
		return "truncated record header"
	case badHeaderCRC:
		return "record header checksum mismatch"
	case badType:
		return "record type 0"
	case badLength:
		return "record length beyond the end of the file"
	case badCRC:
		return "record checksum mismatch"
	}
	return "ok"
}

// walBad words the record package's verdict as the WAL always has.
func walBad(b record.Bad) badRecord {
	switch b {
	case record.OK:
		return recordOK
	case record.Short:
		return badShortHeader
	case record.BadHeaderCRC:
		return badHeaderCRC
	case record.BadHeader:
		return badType
	case record.BadLength, record.PastEnd:
		return badLength
	}
	return badCRC
}

// record reads the record at off. On success it returns its type, payload
// (valid until the next read) and the offset of the next record.
func (r *fileReader) record(off int64) (typ byte, payload []byte, next int64, bad badRecord, err error) {
	f, b, err := recordLayout.Read(&r.w, off)
	if err != nil {
		return 0, nil, 0, 0, fmt.Errorf("wal: %w", err)
	}
	if b != record.OK {
		return 0, nil, 0, walBad(b), nil
	}
	return f.Header[4], f.Payload, off + f.Size, recordOK, nil
}

// validRecordAfter scans the offsets from start on for a valid record and
// returns the first one found. Each offset costs O(1): only a header that
// passes its own checksum gets its payload read and checked.
func (r *fileReader) validRecordAfter(start int64) (int64, bool, error) {
	p, found, err := recordLayout.Scan(&r.w, max(start, r.hdrSize))
	if err != nil {
		return 0, false, fmt.Errorf("wal: %w", err)
	}
	return p, found, nil
}

// checkFileHeader validates the header h of file number num (of the
// length its version says): magic, then version, then checksum, then the
// fields the checksum covers. It returns the size the header records for
// the previous file (noPreviousFile for version 1).
func checkFileHeader(h []byte, num uint64) (uint64, error) {
	if string(h[:4]) != fileMagic {
		return 0, fmt.Errorf("bad magic %q", h[:4])
	}
	prev := uint64(noPreviousFile)
	switch h[4] {
	case formatVersion:
		if len(h) < fileHeaderSize || crc32.Checksum(h[:24], castagnoli) != binary.LittleEndian.Uint32(h[24:28]) {
			return 0, errors.New("file header checksum mismatch")
		}
		prev = binary.LittleEndian.Uint64(h[16:24])
	case formatVersionV1:
		if len(h) < fileHeaderSizeV1 || crc32.Checksum(h[:16], castagnoli) != binary.LittleEndian.Uint32(h[16:20]) {
			return 0, errors.New("file header checksum mismatch")
		}
	default:
		return 0, fmt.Errorf("unsupported version %d", h[4])
	}
	if h[5] != 0 || h[6] != 0 || h[7] != 0 {
		return 0, errors.New("nonzero reserved header bytes")
	}
	if got := binary.LittleEndian.Uint64(h[8:16]); got != num {
		return 0, fmt.Errorf("header names file %d, want %d", got, num)
	}
	return prev, nil
}

// headerSize returns the header length of a file starting with h (at least
// 5 bytes): a version 1 file's is shorter.
func headerSize(h []byte) int64 {
	if len(h) >= 5 && string(h[:4]) == fileMagic && h[4] == formatVersionV1 {
		return fileHeaderSizeV1
	}
	return fileHeaderSize
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// replayFile replays file num. prevSize is the size of the file before it
// in this replay, or -1 for the first.
func (r *fileReader) replayFile(fs vfs.FS, dir string, num uint64, last bool, prevSize int64,
	fn func(file uint64, typ byte, payload []byte) error, res *ReplayResult) error {
	path := filepath.Join(dir, FileName(num))
	f, err := fs.Open(path)
	if err != nil {
		return fmt.Errorf("wal: replay: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("wal: replay: stat %s: %w", path, err)
	}
	r.f, r.path, r.size = f, path, fi.Size()
	r.w.Reset(f, path, r.size)
	r.hdrSize = fileHeaderSize
	if r.size >= 5 {
		h, err := r.bytes(0, 5)
		if err != nil {
			return err
		}
		r.hdrSize = headerSize(h)
	}

	// A torn tail at off: truncate it away when it is the end of the last
	// file, and report cause as corruption anywhere else.
	tail := func(off int64, cause error) error {
		if !last {
			return &base.CorruptionError{Path: path, Offset: off, Err: cause}
		}
		p, found, err := r.validRecordAfter(off + 1)
		if err != nil {
			return err
		}
		if found {
			return &base.CorruptionError{Path: path, Offset: off,
				Err: fmt.Errorf("%w; a valid record follows at offset %d", cause, p)}
		}
		res.Torn = true
		res.TruncatedFile, res.TruncatedOffset, res.TruncatedBytes = path, off, r.size-off
		if r.readOnly {
			return nil
		}
		return truncate(fs, path, off, r.size, res)
	}

	if r.size == 0 {
		return nil // created, then a crash before its header: no records
	}
	if r.size < r.hdrSize {
		return tail(0, fmt.Errorf("file of %d bytes is shorter than its header", r.size))
	}
	h, err := r.bytes(0, int(r.hdrSize))
	if err != nil {
		return err
	}
	recorded, err := checkFileHeader(h, num)
	if err != nil {
		if allZero(h) {
			return tail(0, errors.New("zeroed file header"))
		}
		return &base.CorruptionError{Path: path, Offset: 0, Err: err}
	}
	if prevSize >= 0 && recorded != noPreviousFile && recorded != uint64(prevSize) {
		return &base.CorruptionError{Path: path, Offset: 16, Err: fmt.Errorf(
			"wal file %d is %d bytes, but was %d when this file was created: it was cut or extended", num-1, prevSize, recorded)}
	}
	for off := r.hdrSize; off < r.size; {
		typ, payload, next, bad, err := r.record(off)
		if err != nil {
			return err
		}
		if bad != recordOK {
			return tail(off, errors.New(bad.String()))
		}
		if err := fn(num, typ, payload); err != nil {
			var ce *base.CorruptionError
			if errors.Is(err, base.ErrCorrupt) && !errors.As(err, &ce) {
				err = &base.CorruptionError{Path: path, Offset: off, Err: err}
			}
			return err
		}
		res.Records++
		off = next
	}
	return nil
}

// truncate cuts the torn tail of path at off and fsyncs the file.
func truncate(fs vfs.FS, path string, off, size int64, res *ReplayResult) error {
	if err := vfs.TruncateSync(fs, path, off); err != nil {
		return fmt.Errorf("wal: truncate torn tail of %s at %d: %w", path, off, err)
	}
	res.Torn = true
	res.Truncated = true
	res.TruncatedFile = path
	res.TruncatedOffset = off
	res.TruncatedBytes = size - off
	return nil
}
