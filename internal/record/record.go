// Package record is the framing machinery that strata's logs share: the
// WAL (wal), the series catalog (the SERIES file of internal/catalog) and
// the forward queue (forward). Each of them frames its records its own
// way, and each keeps the grammar of its frames beside the code that
// writes them; what they have in common lives here, parameterized by a
// Layout:
//
//   - sealing a frame: its length and its checksums (CRC-32C) put in place,
//     so that the caller writes it with one call (Write, WriteAt);
//   - checking a frame read back, in one order for every log: enough bytes
//     for a header, the magic, the header checksum, the header's own
//     fields, a length within bounds and within the bytes left (a length
//     from disk is never trusted, and never sizes an allocation), the
//     payload checksum (Check, Parse);
//   - resynchronizing past damage: the first offset at or after a point
//     where a whole frame checks (Scan), which tells a torn tail (nothing
//     valid after the damage) from damage in the middle of a log;
//   - reading a file through a reusable window (Window), so that scanning
//     costs no allocation per offset.
//
// A layout describes a frame as a header of HeaderSize bytes followed by
// the payload:
//
//	+----------------------------------------------+-----------------+
//	| header: magic?, length, checksums, fields    | payload         |
//	| (HeaderSize bytes; where each lies is the     | (length bytes)  |
//	| layout's)                                    |                 |
//	+----------------------------------------------+-----------------+
//
// The layouts themselves are part of each log's durable format and are
// declared, with their diagrams, by the package that writes the log.
package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/stratadb/strata/internal/vfs"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC places a CRC-32C in a frame's header: stored little-endian at
// header[At:At+4], it covers header[From:To], followed by the payload when
// it is the payload checksum.
type CRC struct{ At, From, To int }

// covers reports whether c's header range holds offset off.
func (c CRC) covers(off int) bool { return off < c.To && off+4 > c.From }

// Layout describes how a log frames a record. Its fields are part of that
// log's durable format.
type Layout struct {
	// Magic, when not empty, starts every frame: damage can then be
	// skipped by looking for the next magic.
	Magic string
	// HeaderSize is the bytes before the payload.
	HeaderSize int
	// LengthAt is the offset in the header of the payload's length, a
	// uint32 LE.
	LengthAt int
	// MinPayload and MaxPayload bound the length: a length outside them is
	// damage, whatever the bytes left.
	MinPayload, MaxPayload uint32
	// HeaderCRC, when set, checks the header on its own, so that any
	// offset can be tested for the start of a frame in O(1) before its
	// length is trusted.
	HeaderCRC *CRC
	// PayloadCRC checks the payload (and the header bytes it covers).
	PayloadCRC CRC
	// Valid, when set, checks the header's own fields, after its checksum
	// (the WAL: type 0 is never a record).
	Valid func(h []byte) bool
}

// Bad says why the bytes at an offset are not a frame. The checks run in
// the order of the constants.
type Bad uint8

const (
	OK           Bad = iota
	Short            // fewer bytes than a header (or than the magic, when they start it)
	BadMagic         // no magic where the frame starts
	BadHeaderCRC     // the header checksum does not match
	BadHeader        // Layout.Valid refused the header
	BadLength        // the length is outside [MinPayload, MaxPayload]
	PastEnd          // the payload would end past the bytes there are
	BadCRC           // the payload checksum does not match
)

func (b Bad) String() string {
	switch b {
	case OK:
		return "ok"
	case Short:
		return "short frame header"
	case BadMagic:
		return "no frame magic"
	case BadHeaderCRC:
		return "frame header checksum mismatch"
	case BadHeader:
		return "bad frame header"
	case BadLength:
		return "bad frame length"
	case PastEnd:
		return "frame past the end"
	case BadCRC:
		return "frame checksum mismatch"
	}
	return fmt.Sprintf("record.Bad(%d)", uint8(b))
}

// HeaderOK reports whether a header that gave b was itself intact: its
// fields (the length too) can be used although the frame is not whole.
func (b Bad) HeaderOK() bool { return b == OK || b == PastEnd || b == BadCRC }

// Length returns the payload length that header h records.
func (l *Layout) Length(h []byte) uint32 { return binary.LittleEndian.Uint32(h[l.LengthAt:]) }

// CheckHeader checks the header at the start of h (which holds at least
// the header when it can) of a frame with rem bytes left from its start,
// the header included. On OK and PastEnd, n is the payload length.
func (l *Layout) CheckHeader(h []byte, rem int64) (n uint32, bad Bad) {
	if m := len(l.Magic); m > 0 {
		k := min(len(h), m)
		if string(h[:k]) != l.Magic[:k] {
			return 0, BadMagic
		}
	}
	if len(h) < l.HeaderSize || rem < int64(l.HeaderSize) {
		return 0, Short
	}
	h = h[:l.HeaderSize]
	if c := l.HeaderCRC; c != nil && crc32.Checksum(h[c.From:c.To], castagnoli) != binary.LittleEndian.Uint32(h[c.At:]) {
		return 0, BadHeaderCRC
	}
	if l.Valid != nil && !l.Valid(h) {
		return 0, BadHeader
	}
	n = l.Length(h)
	if n < l.MinPayload || n > l.MaxPayload {
		return 0, BadLength
	}
	if int64(n) > rem-int64(l.HeaderSize) {
		return n, PastEnd
	}
	return n, OK
}

// CheckPayload reports whether the payload checksum in header h matches
// payload.
func (l *Layout) CheckPayload(h, payload []byte) bool {
	c := l.PayloadCRC
	sum := crc32.Update(crc32.Checksum(h[c.From:c.To], castagnoli), castagnoli, payload)
	return sum == binary.LittleEndian.Uint32(h[c.At:])
}

// Frame is a frame found in bytes read back. Header and Payload alias them.
type Frame struct {
	Header  []byte
	Payload []byte // nil unless the frame is whole (OK)
	Size    int64  // header and payload bytes, once the header is intact
}

// Parse checks the frame at the start of b, which holds every byte left.
// The header is returned whenever it is intact (Bad.HeaderOK), so that its
// fields may be used for a frame whose payload is cut or damaged.
func (l *Layout) Parse(b []byte) (Frame, Bad) {
	n, bad := l.CheckHeader(b, int64(len(b)))
	if bad != OK && bad != PastEnd {
		return Frame{}, bad
	}
	f := Frame{Header: b[:l.HeaderSize], Size: int64(l.HeaderSize) + int64(n)}
	if bad == PastEnd {
		return f, PastEnd
	}
	p := b[l.HeaderSize:f.Size]
	if !l.CheckPayload(f.Header, p) {
		return f, BadCRC
	}
	f.Payload = p
	return f, OK
}

// Seal puts the payload's length and the checksums into header h (its
// other fields already in place) of a frame of payload: the frame is then
// h followed by payload. The checksum whose range covers the other one's is
// computed last.
func (l *Layout) Seal(h, payload []byte) {
	h = h[:l.HeaderSize]
	binary.LittleEndian.PutUint32(h[l.LengthAt:], uint32(len(payload)))
	putPayload := func() {
		c := l.PayloadCRC
		binary.LittleEndian.PutUint32(h[c.At:], crc32.Update(crc32.Checksum(h[c.From:c.To], castagnoli), castagnoli, payload))
	}
	c := l.HeaderCRC
	if c == nil {
		putPayload()
		return
	}
	putHeader := func() { binary.LittleEndian.PutUint32(h[c.At:], crc32.Checksum(h[c.From:c.To], castagnoli)) }
	if c.covers(l.PayloadCRC.At) {
		putPayload()
		putHeader()
	} else {
		putHeader()
		putPayload()
	}
}

// AppendFrame appends a frame of payload to dst: the header bytes hdr
// (HeaderSize of them, the length and checksum slots zero or anything),
// sealed, then the payload.
func (l *Layout) AppendFrame(dst, hdr, payload []byte) []byte {
	s := len(dst)
	dst = append(dst, hdr[:l.HeaderSize]...)
	l.Seal(dst[s:], payload)
	return append(dst, payload...)
}

// Window reads a file (or bytes in memory) through a buffer reused from
// read to read; it never reads past Size and never grows its buffer past
// the bytes left.
type Window struct {
	r    io.ReaderAt // nil: buf holds every byte
	size int64
	buf  []byte // bytes [off, off+len(buf))
	off  int64
	// Path names the file in errors.
	Path string
}

// windowChunk is how much a Window reads at once.
const windowChunk = 256 << 10

// Reset points w at the size bytes of f, keeping its buffer.
func (w *Window) Reset(f vfs.File, path string, size int64) {
	w.r, w.size, w.buf, w.off, w.Path = f, size, w.buf[:0], 0, path
}

// Mem returns a Window over b.
func Mem(b []byte) *Window { return &Window{size: int64(len(b)), buf: b} }

// Size returns the bytes the window reads from.
func (w *Window) Size() int64 { return w.size }

// Bytes returns the n bytes at off; the caller has checked off+n <= Size.
// The slice is valid until the next call.
func (w *Window) Bytes(off int64, n int) ([]byte, error) {
	if off >= w.off && off+int64(n) <= w.off+int64(len(w.buf)) {
		s := off - w.off
		return w.buf[s : s+int64(n)], nil
	}
	if w.r == nil {
		return nil, fmt.Errorf("record: read %d bytes at %d past %d", n, off, w.size)
	}
	want := min(int64(max(n, windowChunk)), w.size-off)
	if int64(cap(w.buf)) < want {
		w.buf = make([]byte, want)
	}
	w.buf = w.buf[:want]
	m, err := w.r.ReadAt(w.buf, off)
	if int64(m) < want {
		w.buf = w.buf[:0]
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF // the file shrank under us
		}
		return nil, fmt.Errorf("read %s: %w", w.Path, err)
	}
	w.off = off
	return w.buf[:n], nil
}

// Read checks the frame at off in w. On OK the payload is valid until the
// next read of w; the header is returned whenever it is intact.
func (l *Layout) Read(w *Window, off int64) (Frame, Bad, error) {
	rem := w.size - off
	hn := int(min(int64(l.HeaderSize), max(rem, 0)))
	h, err := w.Bytes(off, hn)
	if err != nil {
		return Frame{}, OK, err
	}
	n, bad := l.CheckHeader(h, rem)
	if bad != OK && bad != PastEnd {
		return Frame{}, bad, nil
	}
	size := int64(l.HeaderSize) + int64(n)
	if bad == PastEnd {
		return Frame{Header: h, Size: size}, PastEnd, nil
	}
	b, err := w.Bytes(off, int(size))
	if err != nil {
		return Frame{}, OK, err
	}
	f := Frame{Header: b[:l.HeaderSize], Size: size}
	if !l.CheckPayload(f.Header, b[l.HeaderSize:]) {
		return f, BadCRC, nil
	}
	f.Payload = b[l.HeaderSize:]
	return f, OK, nil
}

// Scan returns the first offset at or after from where a whole frame
// checks, and false when there is none before the end of w. Each offset
// costs O(1) until a header passes its cheap checks (the magic, the
// length's bounds) and its checksum: only then is the payload read and
// checked.
func (l *Layout) Scan(w *Window, from int64) (int64, bool, error) {
	for p := max(from, 0); p+int64(l.HeaderSize) <= w.size; p++ {
		rem := w.size - p
		h, err := w.Bytes(p, l.HeaderSize)
		if err != nil {
			return 0, false, err
		}
		if l.Magic != "" && string(h[:len(l.Magic)]) != l.Magic {
			continue
		}
		if n := l.Length(h); n < l.MinPayload || n > l.MaxPayload || int64(n) > rem-int64(l.HeaderSize) {
			continue
		}
		if _, bad := l.CheckHeader(h, rem); bad != OK {
			continue
		}
		_, bad, err := l.Read(w, p)
		if err != nil {
			return 0, false, err
		}
		if bad == OK {
			return p, true, nil
		}
	}
	return 0, false, nil
}

// Write writes frame to f with one write call at f's offset; a short write
// without an error is io.ErrShortWrite.
func Write(f vfs.File, frame []byte) (int, error) {
	n, err := f.Write(frame)
	if err == nil && n != len(frame) {
		err = io.ErrShortWrite
	}
	return n, err
}

// WriteAt writes frame to f at off with one write call; a short write
// without an error is io.ErrShortWrite.
func WriteAt(f vfs.File, frame []byte, off int64) (int, error) {
	n, err := f.WriteAt(frame, off)
	if err == nil && n != len(frame) {
		err = io.ErrShortWrite
	}
	return n, err
}
