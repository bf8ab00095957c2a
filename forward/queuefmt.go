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
// checksum mismatch after a power loss means: deliver the whole queue).
// Version 2 (written now):
//
//	+------------------+-----------+---------------+----------------+-------------------+
//	| magic "SFWC" (4) | version 2 | seq uint64 LE | done uint32 LE | settled uint64 LE |
//	|                  | (1)       | (8)           | (4)            | (8)               |
//	+------------------+-----------+---------------+----------------+-------------------+
//	| queued uint64 LE | queued seq uint64 LE | flags (1) | crc32c of the first 42 (4) |
//	| (8)              | (8)                  |           |                            |
//	+------------------+----------------------+-----------+----------------------------+
//
// Every sample of the frames before seq, and the first done samples of
// frame seq, have been delivered (or dropped for good). The other fields
// are counts in the frames' count space (samples queued since the queue
// was created), so that a file that is gone can be counted:
//
//	settled     every sample below it is delivered or dropped by the
//	            backlog bounds (the batch in flight at seq, done aside)
//	queued      the count after the newest frame queued when the cursor
//	            was written, queued seq that frame's seq
//	flags       bit 0: written by a clean close (queued is the queue's end)
//
// The cursor is rewritten when the sender acknowledges, on the sync tick
// when frames were queued since, and before queue files are removed; it
// is fsynced then (but for the writer's roll, which does not wait for the
// disk) and on close; it is created by writing a new file and renaming
// it (a full disk leaves the old one). Open compares the first file's
// start with settled (a removed oldest file, or one set aside), and the
// count after the last good frame with queued (a removed or cut newest
// file): exact after a clean close, a lower bound after a crash (frames
// queued after the cursor's last write are not in queued).
//
// Version 1 (read, never written): magic, version 1, seq (8), done (4),
// crc32c of the first 17 (4); 21 bytes. It holds no counts: a loss before
// the oldest file or at the end of the newest is not counted then.
//
// Counted file, named "counted", replaced whole (write new, fsync, rename):
// the count ranges whose loss the queue has counted, so that damage still
// on disk at the next Open is not counted twice. Ranges below settled are
// left out.
//
//	+------------------+-----------+-------------+--------------------------+-------------+
//	| magic "SFWL" (4) | version 1 | n uint32 LE | n x [lo, hi) uint64 LE   | crc32c of   |
//	|                  | (1)       | (4)         | ascending, disjoint (16n) | the rest (4) |
//	+------------------+-----------+-------------+--------------------------+-------------+
//
// These constants are part of the durable format and must not be changed.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/stratadb/strata/internal/record"
)

const (
	queueMagic        = "SFWQ"
	frameMagic        = "SFWF"
	cursorMagic       = "SFWC"
	queueVersion1     = 1
	queueVersion      = 2
	cursorVersion1    = 1
	cursorVersion     = 2
	queueHeaderSizeV1 = 20
	queueHeaderSize   = 28
	frameHeaderSizeV1 = 29
	frameHeaderSize   = 45
	cursorSizeV1      = 21
	cursorSize        = 46
	countedMagic      = "SFWL"
	countedVersion    = 1
	countedName       = "counted"
	countedMax        = 1 << 12 // ranges kept; past it the oldest two are merged
	cursorClean       = 1       // cursor flags bit: written by a clean close
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

// frameLayout is a version 2 frame, drawn above, to the record package,
// which seals, checks and resynchronizes frames (as it does the WAL's and
// the series catalog's records).
var frameLayout = &record.Layout{
	Magic:      frameMagic,
	HeaderSize: frameHeaderSize,
	LengthAt:   8,
	MaxPayload: maxFramePayload,
	HeaderCRC:  &record.CRC{At: 4, From: 8, To: frameHeaderSize},
	PayloadCRC: record.CRC{At: 41},
}

// frameLayoutV1 is a version 1 frame: length, then the crc of seq ..
// payload.
var frameLayoutV1 = &record.Layout{
	HeaderSize: frameHeaderSizeV1,
	LengthAt:   0,
	MaxPayload: maxFramePayload,
	PayloadCRC: record.CRC{At: 4, From: 8, To: frameHeaderSizeV1},
}

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
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0) // hcrc, length: sealed below
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(t))
	dst = binary.LittleEndian.AppendUint32(dst, samples)
	dst = append(dst, format)
	dst = binary.LittleEndian.AppendUint64(dst, count)
	dst = append(dst, 0, 0, 0, 0) // pcrc
	frameLayout.Seal(dst[s:], payload)
	return dst
}

// appendFrameV1 appends the version 1 encoding of a frame (tests write old
// files).
func appendFrameV1(dst []byte, seq uint64, t int64, samples uint32, format byte, payload []byte) []byte {
	var h [frameHeaderSizeV1]byte
	binary.LittleEndian.PutUint64(h[8:], seq)
	binary.LittleEndian.PutUint64(h[16:], uint64(t))
	binary.LittleEndian.PutUint32(h[24:], samples)
	h[28] = format
	return frameLayoutV1.AppendFrame(dst, h[:], payload)
}

// parseFrame decodes the frame of the given file version at the start of
// b. It returns errShort when b ends before the frame does (with need, the
// frame's whole size, when the header was readable) and errQueueCorrupt
// for a bad magic, length or checksum. The payload aliases b.
func parseFrame(version byte, b []byte) (f frame, need int64, err error) {
	l := frameLayout
	if version == queueVersion1 {
		l = frameLayoutV1
	}
	fr, bad := l.Parse(b)
	switch bad {
	case record.OK, record.PastEnd, record.BadCRC:
		need = fr.Size
		if version == queueVersion {
			h := fr.Header
			f.seq = binary.LittleEndian.Uint64(h[12:])
			f.time = int64(binary.LittleEndian.Uint64(h[20:]))
			f.samples = binary.LittleEndian.Uint32(h[28:])
			f.format = h[32]
			f.count = binary.LittleEndian.Uint64(h[33:])
			f.hdr, f.hdrOK = frameHeaderSize, true
		}
	case record.Short:
		return f, 0, errShort
	case record.BadMagic:
		return f, 0, fmt.Errorf("%w: no frame magic", errQueueCorrupt)
	case record.BadHeaderCRC:
		return f, 0, fmt.Errorf("%w: frame header checksum mismatch", errQueueCorrupt)
	case record.BadLength:
		return f, 0, fmt.Errorf("%w: frame length %d", errQueueCorrupt, l.Length(b))
	}
	switch bad {
	case record.PastEnd:
		return f, need, errShort
	case record.BadCRC:
		if version == queueVersion1 {
			return f, need, fmt.Errorf("%w: frame checksum mismatch", errQueueCorrupt)
		}
		return f, need, fmt.Errorf("%w: frame payload checksum mismatch", errQueueCorrupt)
	}
	if version == queueVersion1 {
		h := fr.Header
		f.seq = binary.LittleEndian.Uint64(h[8:])
		f.time = int64(binary.LittleEndian.Uint64(h[16:]))
		f.samples = binary.LittleEndian.Uint32(h[24:])
		f.format = h[28]
		f.hdr = frameHeaderSizeV1
	}
	f.payload = fr.Payload
	return f, need, nil
}

// cursor is the acknowledged position: every sample before frame seq and
// the first done samples of it are delivered. count is the count of that
// position (the frame's count plus done) when countOK (a version 2 frame).
type cursor struct {
	seq     uint64
	done    uint32
	count   uint64
	countOK bool
}

// cursorRecord is what the cursor file holds (see the format above).
type cursorRecord struct {
	seq       uint64
	done      uint32
	settled   uint64
	queued    uint64
	queuedSeq uint64
	clean     bool
	// counts: settled and queued hold (a version 2 cursor).
	counts bool
}

func (r cursorRecord) ack() cursor { return cursor{seq: r.seq, done: r.done} }

// marshal appends the version 2 encoding of r to dst.
func (r cursorRecord) marshal(dst []byte) []byte {
	s := len(dst)
	dst = append(dst, cursorMagic...)
	dst = append(dst, cursorVersion)
	dst = binary.LittleEndian.AppendUint64(dst, r.seq)
	dst = binary.LittleEndian.AppendUint32(dst, r.done)
	dst = binary.LittleEndian.AppendUint64(dst, r.settled)
	dst = binary.LittleEndian.AppendUint64(dst, r.queued)
	dst = binary.LittleEndian.AppendUint64(dst, r.queuedSeq)
	var flags byte
	if r.clean {
		flags |= cursorClean
	}
	dst = append(dst, flags)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[s:], castagnoli))
}

// marshalV1 returns the version 1 encoding of c (tests write old files).
func (c cursor) marshalV1() []byte {
	b := make([]byte, 0, cursorSizeV1)
	b = append(b, cursorMagic...)
	b = append(b, cursorVersion1)
	b = binary.LittleEndian.AppendUint64(b, c.seq)
	b = binary.LittleEndian.AppendUint32(b, c.done)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// unmarshalCursor decodes a cursor file of either version.
func unmarshalCursor(b []byte) (cursorRecord, error) {
	if len(b) < 5 || string(b[:4]) != cursorMagic {
		return cursorRecord{}, fmt.Errorf("%w: bad cursor magic", errQueueCorrupt)
	}
	size := cursorSize
	switch b[4] {
	case cursorVersion1:
		size = cursorSizeV1
	case cursorVersion:
	default:
		return cursorRecord{}, fmt.Errorf("%w: unknown cursor version %d", errQueueCorrupt, b[4])
	}
	if len(b) != size {
		return cursorRecord{}, fmt.Errorf("%w: cursor is %d bytes", errQueueCorrupt, len(b))
	}
	if crc32.Checksum(b[:size-4], castagnoli) != binary.LittleEndian.Uint32(b[size-4:]) {
		return cursorRecord{}, fmt.Errorf("%w: cursor checksum mismatch", errQueueCorrupt)
	}
	r := cursorRecord{seq: binary.LittleEndian.Uint64(b[5:]), done: binary.LittleEndian.Uint32(b[13:])}
	if b[4] == cursorVersion1 {
		return r, nil
	}
	if b[41]&^cursorClean != 0 {
		return cursorRecord{}, fmt.Errorf("%w: unknown cursor flags %#x", errQueueCorrupt, b[41])
	}
	r.settled = binary.LittleEndian.Uint64(b[17:])
	r.queued = binary.LittleEndian.Uint64(b[25:])
	r.queuedSeq = binary.LittleEndian.Uint64(b[33:])
	r.clean, r.counts = b[41]&cursorClean != 0, true
	return r, nil
}

// span is a range [lo, hi) of counts.
type span struct{ lo, hi uint64 }

// marshalCounted returns the counted file holding spans.
func marshalCounted(spans []span) []byte {
	b := make([]byte, 0, 13+16*len(spans))
	b = append(b, countedMagic...)
	b = append(b, countedVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(spans)))
	for _, sp := range spans {
		b = binary.LittleEndian.AppendUint64(b, sp.lo)
		b = binary.LittleEndian.AppendUint64(b, sp.hi)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// unmarshalCounted decodes a counted file: ascending, disjoint, non-empty
// ranges.
func unmarshalCounted(b []byte) ([]span, error) {
	switch {
	case len(b) < 13 || string(b[:4]) != countedMagic:
		return nil, fmt.Errorf("%w: bad counted magic", errQueueCorrupt)
	case b[4] != countedVersion:
		return nil, fmt.Errorf("%w: unknown counted version %d", errQueueCorrupt, b[4])
	case crc32.Checksum(b[:len(b)-4], castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]):
		return nil, fmt.Errorf("%w: counted checksum mismatch", errQueueCorrupt)
	}
	n := binary.LittleEndian.Uint32(b[5:])
	body := b[9 : len(b)-4]
	if uint64(len(body)) != 16*uint64(n) {
		return nil, fmt.Errorf("%w: counted holds %d bytes for %d ranges", errQueueCorrupt, len(body), n)
	}
	spans := make([]span, 0, n)
	for i := 0; i < len(body); i += 16 {
		sp := span{binary.LittleEndian.Uint64(body[i:]), binary.LittleEndian.Uint64(body[i+8:])}
		if sp.lo >= sp.hi || len(spans) > 0 && sp.lo <= spans[len(spans)-1].hi {
			return nil, fmt.Errorf("%w: counted range %d out of order", errQueueCorrupt, i/16)
		}
		spans = append(spans, sp)
	}
	return spans, nil
}

// uncounted returns how much of [lo, hi) no span covers.
func uncounted(spans []span, lo, hi uint64) uint64 {
	if lo >= hi {
		return 0
	}
	n := hi - lo
	for _, sp := range spans {
		if a, b := max(sp.lo, lo), min(sp.hi, hi); a < b {
			n -= b - a
		}
	}
	return n
}

// addSpan adds [lo, hi) to the ascending, disjoint spans, merging those it
// touches. Past countedMax spans the two oldest are merged (damage that
// appears later between them is then not counted: a bound).
func addSpan(spans []span, lo, hi uint64) []span {
	if lo >= hi {
		return spans
	}
	out := make([]span, 0, len(spans)+1)
	i := 0
	for ; i < len(spans) && spans[i].hi < lo; i++ {
		out = append(out, spans[i])
	}
	nw := span{lo, hi}
	for ; i < len(spans) && spans[i].lo <= hi; i++ {
		nw.lo, nw.hi = min(nw.lo, spans[i].lo), max(nw.hi, spans[i].hi)
	}
	out = append(out, nw)
	out = append(out, spans[i:]...)
	if len(out) > countedMax {
		out[1].lo = out[0].lo
		out = out[1:]
	}
	return out
}

// pruneSpans drops the spans below settled.
func pruneSpans(spans []span, settled uint64) []span {
	i := 0
	for i < len(spans) && spans[i].hi <= settled {
		i++
	}
	return spans[i:]
}
