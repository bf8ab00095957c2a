package forward

// The forward queue's durable formats: a directory of append-only queue
// files holding every batch the engine's change feed hands over, and a
// cursor file saying how much of it the remote has acknowledged.
//
// Queue file, named %08d.fq, numbered from 1 with no gap; only the newest
// is written, and Open never appends to a file it did not create in this
// process. Version 2 (written now):
//
//	+------------------+-----------+--------+---------------+---------------+---------------+
//	| magic "SFWQ" (4) | version 2 | 0 (3)  | file number   | start         | crc32c of the |
//	|                  | (1)       |        | uint64 LE (8) | uint64 LE (8) | first 24 (4)  |
//	+------------------+-----------+--------+---------------+---------------+---------------+
//	| frame | frame | ...
//
//	frame := magic "SFWF" (4)
//	       | hcrc uint32 LE (4)     crc32c of the rest of the header (length .. pcrc)
//	       | length uint32 LE (4)   payload length
//	       | seq uint64 LE (8)      the engine's sequence number of the batch
//	       | time int64 LE (8)      when it was queued, Unix ns
//	       | samples uint32 LE (4)  samples in the payload
//	       | format (1)             engine.FeedFormatBatch
//	       | count uint64 LE (8)    samples queued before this frame, since the
//	       |                        queue was created (start: before the file's
//	       |                        first frame)
//	       | pcrc uint32 LE (4)     crc32c of the payload
//	       | payload (length)       the engine's feed payload, as logged
//
// A frame whose header checks and whose payload does not is skipped whole
// (its length is known) and its samples counted lost. Past a damaged
// header, the magic lets a reader find the next frame (resync: the next
// magic whose frame checks), and count tells how many samples the damage
// took: the count of the frame found minus the count after the last good
// one, between frames of a file as across files (a removed file shows as a
// gap in the file numbers and in the counts).
//
// Version 1 (read, never written): a 20-byte header (magic, version 1,
// three zeros, file number, crc32c of the first 16) and frames of length,
// crc (of seq .. payload), seq, time, samples, format, payload: no magic
// and no count, so damage in a version 1 file loses the rest of the file.
//
// Sequence numbers ascend strictly through the files. A damaged frame at
// the end of the newest file, with no good frame after it, is the torn
// tail of a crash and is cut off; damage anywhere else is skipped to the
// next good frame, counted and logged. A file whose header is damaged is
// set aside as %08d.fq.damaged.
//
// Preallocation: on Linux the file being written is created at its full
// size (SegmentBytes, or one frame if that is larger, rounded up to pages;
// fallocate) and mapped shared; a small frame is appended by copying it
// into the mapping, a large one with pwritev(2) into the preallocated
// space: either way the page cache holds it from then on, through a kill
// -9. The bytes past the last frame are zeros until written, and zeros
// are never a frame (no magic), so a file that ends in zeros ends after
// its last frame: Open cuts the zeros off without counting a loss (a torn
// frame followed by zeros is a torn tail, as above). A file is cut to its
// used size and fsynced when the next one is started (and on close), so
// only the newest file can end in zeros. Where a file cannot be
// preallocated or mapped (other systems, file systems without fallocate,
// a full disk, a filesystem other than the operating system's), frames
// are written with pwrite(2) and files hold no zeros.
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
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

const (
	queueMagic        = "SFWQ"
	frameMagic        = "SFWF"
	cursorMagic       = "SFWC"
	queueVersion1     = 1
	queueVersion      = 2
	cursorVersion     = 1
	queueHeaderSizeV1 = 20
	queueHeaderSize   = 28
	frameHeaderSizeV1 = 29
	frameHeaderSize   = 45
	cursorSize        = 21
	cursorName        = "cursor"
	queueSuffix       = ".fq"
	damagedSuffix     = ".damaged"
	maxFramePayload   = 1 << 30
	frameSamplesMax   = 1<<32 - 1
	defaultSegBytes   = 64 << 20
	minSegBytes       = 64 << 10
	queueFileNameLen  = 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errQueueCorrupt marks damage found in a queue or cursor file.
var errQueueCorrupt = errors.New("forward: corrupt queue")

var errShort = errors.New("forward: short frame")

func queueFileName(n uint64) string { return fmt.Sprintf("%08d%s", n, queueSuffix) }

func parseQueueFileName(name string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, queueSuffix)
	if !ok || len(s) != queueFileNameLen {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil && n > 0
}

// appendQueueHeader appends a version 2 header of file num, whose first
// frame has count start.
func appendQueueHeader(dst []byte, num, start uint64) []byte {
	s := len(dst)
	dst = append(dst, queueMagic...)
	dst = append(dst, queueVersion, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint64(dst, num)
	dst = binary.LittleEndian.AppendUint64(dst, start)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[s:], castagnoli))
}

// appendQueueHeaderV1 appends a version 1 header (tests write old files).
func appendQueueHeaderV1(dst []byte, num uint64) []byte {
	s := len(dst)
	dst = append(dst, queueMagic...)
	dst = append(dst, queueVersion1, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint64(dst, num)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[s:], castagnoli))
}

// fileHeader is a decoded queue file header.
type fileHeader struct {
	version byte
	size    int64  // bytes of header: frames start there
	start   uint64 // version 2: the count of the first frame
}

// checkQueueHeader decodes the header of file num at the start of h.
func checkQueueHeader(h []byte, num uint64) (fileHeader, error) {
	if len(h) < queueHeaderSizeV1 {
		return fileHeader{}, fmt.Errorf("%w: short header", errQueueCorrupt)
	}
	if string(h[:4]) != queueMagic {
		return fileHeader{}, fmt.Errorf("%w: bad magic %q", errQueueCorrupt, h[:4])
	}
	var hd fileHeader
	switch h[4] {
	case queueVersion1:
		hd = fileHeader{version: queueVersion1, size: queueHeaderSizeV1}
		if crc32.Checksum(h[:16], castagnoli) != binary.LittleEndian.Uint32(h[16:20]) {
			return fileHeader{}, fmt.Errorf("%w: header checksum mismatch", errQueueCorrupt)
		}
	case queueVersion:
		if len(h) < queueHeaderSize {
			return fileHeader{}, fmt.Errorf("%w: short header", errQueueCorrupt)
		}
		if crc32.Checksum(h[:24], castagnoli) != binary.LittleEndian.Uint32(h[24:28]) {
			return fileHeader{}, fmt.Errorf("%w: header checksum mismatch", errQueueCorrupt)
		}
		hd = fileHeader{version: queueVersion, size: queueHeaderSize, start: binary.LittleEndian.Uint64(h[16:])}
	default:
		return fileHeader{}, fmt.Errorf("%w: unknown version %d", errQueueCorrupt, h[4])
	}
	if got := binary.LittleEndian.Uint64(h[8:16]); got != num {
		return fileHeader{}, fmt.Errorf("%w: header says file %d", errQueueCorrupt, got)
	}
	return hd, nil
}

// frame is a decoded frame header with its payload.
type frame struct {
	seq     uint64
	time    int64
	samples uint32
	format  byte
	count   uint64 // version 2: samples queued before it
	payload []byte
	hdr     int64 // bytes of frame header
	// hdrOK: the header checked (version 2), so that its fields hold even
	// when parseFrame fails on the payload.
	hdrOK bool
}

func (f *frame) size() int64 { return f.hdr + int64(len(f.payload)) }

// appendFrame appends the version 2 encoding of a frame to dst.
func appendFrame(dst []byte, seq uint64, t int64, samples uint32, format byte, count uint64, payload []byte) []byte {
	return append(appendFrameHeader(dst, seq, t, samples, format, count, payload), payload...)
}

// appendFrameHeader appends the version 2 header of the frame of payload
// to dst, its checksums included.
func appendFrameHeader(dst []byte, seq uint64, t int64, samples uint32, format byte, count uint64, payload []byte) []byte {
	s := len(dst)
	dst = append(dst, frameMagic...)
	dst = append(dst, 0, 0, 0, 0) // hcrc, below
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(t))
	dst = binary.LittleEndian.AppendUint32(dst, samples)
	dst = append(dst, format)
	dst = binary.LittleEndian.AppendUint64(dst, count)
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(payload, castagnoli))
	binary.LittleEndian.PutUint32(dst[s+4:], crc32.Checksum(dst[s+8:], castagnoli))
	return dst
}

// appendFrameV1 appends the version 1 encoding of a frame (tests write old
// files).
func appendFrameV1(dst []byte, seq uint64, t int64, samples uint32, format byte, payload []byte) []byte {
	s := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(t))
	dst = binary.LittleEndian.AppendUint32(dst, samples)
	dst = append(dst, format)
	crc := crc32.Update(crc32.Checksum(dst[s+8:], castagnoli), castagnoli, payload)
	binary.LittleEndian.PutUint32(dst[s+4:], crc)
	return append(dst, payload...)
}

// parseFrame decodes the frame of the given file version at the start of
// b. It returns errShort when b ends before the frame does (with need, the
// frame's whole size, when the header was readable) and errQueueCorrupt
// for a bad magic, length or checksum. The payload aliases b.
func parseFrame(version byte, b []byte) (f frame, need int64, err error) {
	if version == queueVersion1 {
		return parseFrameV1(b)
	}
	if len(b) < len(frameMagic) {
		if !bytes.HasPrefix([]byte(frameMagic), b) {
			return f, 0, fmt.Errorf("%w: no frame magic", errQueueCorrupt)
		}
		return f, 0, errShort
	}
	if string(b[:4]) != frameMagic {
		return f, 0, fmt.Errorf("%w: no frame magic", errQueueCorrupt)
	}
	if len(b) < frameHeaderSize {
		return f, 0, errShort
	}
	if crc32.Checksum(b[8:frameHeaderSize], castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return f, 0, fmt.Errorf("%w: frame header checksum mismatch", errQueueCorrupt)
	}
	n := binary.LittleEndian.Uint32(b[8:])
	if n > maxFramePayload {
		return f, 0, fmt.Errorf("%w: frame length %d", errQueueCorrupt, n)
	}
	f.seq = binary.LittleEndian.Uint64(b[12:])
	f.time = int64(binary.LittleEndian.Uint64(b[20:]))
	f.samples = binary.LittleEndian.Uint32(b[28:])
	f.format = b[32]
	f.count = binary.LittleEndian.Uint64(b[33:])
	f.hdr, f.hdrOK = frameHeaderSize, true
	need = frameHeaderSize + int64(n)
	if int64(len(b)) < need {
		return f, need, errShort
	}
	if crc32.Checksum(b[frameHeaderSize:need], castagnoli) != binary.LittleEndian.Uint32(b[41:]) {
		return f, need, fmt.Errorf("%w: frame payload checksum mismatch", errQueueCorrupt)
	}
	f.payload = b[frameHeaderSize:need]
	return f, need, nil
}

func parseFrameV1(b []byte) (f frame, need int64, err error) {
	if len(b) < frameHeaderSizeV1 {
		return f, 0, errShort
	}
	n := binary.LittleEndian.Uint32(b)
	if n > maxFramePayload {
		return f, 0, fmt.Errorf("%w: frame length %d", errQueueCorrupt, n)
	}
	need = frameHeaderSizeV1 + int64(n)
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
	f.payload = b[frameHeaderSizeV1:need]
	f.hdr = frameHeaderSizeV1
	return f, need, nil
}

// cursor is the acknowledged position: every sample before frame seq and
// the first done samples of it are delivered.
type cursor struct {
	seq  uint64
	done uint32
}

func (c cursor) marshal() []byte {
	b := make([]byte, 0, cursorSize)
	b = append(b, cursorMagic...)
	b = append(b, cursorVersion)
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
	case b[4] != cursorVersion:
		return cursor{}, fmt.Errorf("%w: unknown cursor version %d", errQueueCorrupt, b[4])
	case crc32.Checksum(b[:17], castagnoli) != binary.LittleEndian.Uint32(b[17:]):
		return cursor{}, fmt.Errorf("%w: cursor checksum mismatch", errQueueCorrupt)
	}
	return cursor{seq: binary.LittleEndian.Uint64(b[5:]), done: binary.LittleEndian.Uint32(b[13:])}, nil
}
