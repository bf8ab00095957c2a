// Package decbuf decodes the binary records strata reads from disk: the
// manifest, the segment index and the WAL payloads share it, so every
// bounds check on untrusted bytes lives in one fuzzed place.
//
// A Decbuf reads from the front of a byte slice. The first failure (a
// truncated or overlong varint, a length or count beyond the bytes left, a
// failed check of the caller's) sticks: every later read returns a zero
// value and Err returns that first failure, so a decoder reads a whole
// record and checks Err once. Lengths and counts read from the input are
// checked against the bytes left before they size anything, so damaged
// input never drives an allocation.
//
// Errors wrap ErrMalformed and say what was being read and at which offset
// of the buffer.
package decbuf

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrMalformed is wrapped by every decoding failure.
var ErrMalformed = errors.New("decbuf: malformed input")

// Decbuf is a read cursor over untrusted bytes with a sticky error. The zero
// value is an empty buffer.
type Decbuf struct {
	b    []byte
	size int // len of the input, so that the offset is size - len(b)
	err  error
}

// New returns a Decbuf reading b. It does not copy b.
func New(b []byte) Decbuf { return Decbuf{b: b, size: len(b)} }

// Reset makes d read b from the start, clearing any error.
func (d *Decbuf) Reset(b []byte) { *d = Decbuf{b: b, size: len(b)} }

// Err returns the first failure, or nil.
func (d *Decbuf) Err() error { return d.err }

// Len returns the number of bytes left.
func (d *Decbuf) Len() int { return len(d.b) }

// Offset returns the number of bytes consumed so far.
func (d *Decbuf) Offset() int { return d.size - len(d.b) }

// Rest returns the bytes left, without consuming them.
func (d *Decbuf) Rest() []byte { return d.b }

// Failf records a failure found by the caller (a value out of range, a
// wrong order) unless one is recorded already; later reads return zeros.
func (d *Decbuf) Failf(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at offset %d", ErrMalformed, fmt.Sprintf(format, args...), d.Offset())
	}
	// Keep the offset of the failure: drop the bytes left from the end.
	d.size -= len(d.b)
	d.b = d.b[:0]
}

func (d *Decbuf) advance(n int) { d.b = d.b[n:] }

// Uvarint reads an unsigned varint (encoding/binary's format).
func (d *Decbuf) Uvarint(what string) uint64 {
	// A failure empties b, so the fast path needs no error check.
	if len(d.b) > 0 && d.b[0] < 0x80 { // one byte: the common case
		v := d.b[0]
		d.b = d.b[1:]
		return uint64(v)
	}
	return d.uvarintSlow(what)
}

func (d *Decbuf) uvarintSlow(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		if n == 0 {
			d.Failf("%s: truncated varint", what)
		} else {
			d.Failf("%s: varint overflows 64 bits", what)
		}
		return 0
	}
	d.advance(n)
	return v
}

// Varint reads a signed varint (encoding/binary's zigzag format).
func (d *Decbuf) Varint(what string) int64 {
	u := d.Uvarint(what)
	return int64(u>>1) ^ -int64(u&1)
}

// Byte reads one byte.
func (d *Decbuf) Byte(what string) byte {
	if len(d.b) > 0 { // empty after a failure
		c := d.b[0]
		d.b = d.b[1:]
		return c
	}
	d.short(what, 1)
	return 0
}

// short records that n bytes were wanted with fewer left.
func (d *Decbuf) short(what string, n uint64) {
	if d.err == nil {
		d.Failf("%s: %d bytes, %d left", what, n, len(d.b))
	}
}

// Uint32 reads a little-endian uint32.
func (d *Decbuf) Uint32(what string) uint32 {
	b := d.Bytes(4, what)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

// Uint64 reads a little-endian uint64.
func (d *Decbuf) Uint64(what string) uint64 {
	b := d.Bytes(8, what)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

// Bytes returns the next n bytes, aliasing the input (capacity clipped, so
// an append to them never overwrites what follows). It fails when fewer
// than n bytes are left.
func (d *Decbuf) Bytes(n uint64, what string) []byte {
	if n > uint64(len(d.b)) || d.err != nil {
		d.short(what, n)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// UvarintBytes reads a uvarint length and that many bytes (aliasing the
// input).
func (d *Decbuf) UvarintBytes(what string) []byte {
	n := d.Uvarint(what)
	if d.err != nil {
		return nil
	}
	return d.Bytes(n, what)
}

// UvarintStr reads a uvarint length and that many bytes as a string (a
// copy).
func (d *Decbuf) UvarintStr(what string) string {
	return string(d.UvarintBytes(what))
}

// Count reads a uvarint element count and checks that the bytes left can
// hold that many elements of at least minSize bytes each, so the count can
// size an allocation.
func (d *Decbuf) Count(what string, minSize int) int {
	n := d.Uvarint(what)
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.b)/max(minSize, 1)) {
		d.Failf("%s: %d elements cannot fit in %d bytes", what, n, len(d.b))
		return 0
	}
	return int(n)
}

// End fails unless every byte has been read.
func (d *Decbuf) End(what string) {
	if d.err == nil && len(d.b) != 0 {
		d.Failf("%s: %d trailing bytes", what, len(d.b))
	}
}
