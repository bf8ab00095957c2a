// Package encoding holds the bit-level codecs of strata's segment columns:
// a bit writer and reader, zigzag and varint helpers, chunked fixed-width bit
// packing, delta-of-delta timestamps, Gorilla XOR floats, decimal-scaled
// floats, zigzag-delta integers, bit-packed booleans and length-prefixed
// strings.
//
// Every encoder appends to a dst slice and returns it; every decoder appends
// a known number of values n to a dst slice and returns it with the rest of
// src. The count n is not stored by these codecs: the caller (a segment
// block header) records it. Decoders never panic on malformed input; they
// return an error wrapping ErrMalformed, and they check n against the length
// of src before allocating, so a decoder never grows dst by more than a small
// multiple of len(src).
//
// The bit order is most significant bit first in every codec. The formats
// described in each file are part of strata's durable segment format and
// must not be changed.
package encoding

import (
	"encoding/binary"
	"errors"
)

// ErrMalformed is wrapped by every error a decoder returns for bad input.
var ErrMalformed = errors.New("encoding: malformed input")

// BitWriter appends bits, most significant first, to a byte slice.
// The zero value is ready to use and appends to a nil slice.
type BitWriter struct {
	buf []byte
	acc uint64 // pending bits, aligned to the low end
	n   uint   // number of pending bits in acc, 0..63
}

// NewBitWriter returns a BitWriter that appends to dst.
func NewBitWriter(dst []byte) BitWriter { return BitWriter{buf: dst} }

// WriteBits appends the low nb bits of v (nb <= 64), most significant first.
func (w *BitWriter) WriteBits(v uint64, nb uint) {
	if nb < 64 {
		v &= 1<<nb - 1
	}
	free := 64 - w.n // 1..64
	if nb < free {
		w.acc = w.acc<<nb | v
		w.n += nb
		return
	}
	rest := nb - free // 0..63
	w.acc = w.acc<<free | v>>rest
	w.buf = binary.BigEndian.AppendUint64(w.buf, w.acc)
	w.acc = v & (1<<rest - 1)
	w.n = rest
}

// WriteBit appends one bit: 1 when b is true.
func (w *BitWriter) WriteBit(b bool) {
	var v uint64
	if b {
		v = 1
	}
	w.WriteBits(v, 1)
}

// Len returns the number of bits written so far, counting those in dst
// before the writer was created.
func (w *BitWriter) Len() int { return len(w.buf)*8 + int(w.n) }

// Finish pads the last partial byte with zero bits and returns the slice.
// The writer is empty afterwards and may be reused with Reset.
func (w *BitWriter) Finish() []byte {
	if w.n > 0 {
		acc := w.acc << (64 - w.n)
		for nb := int(w.n); nb > 0; nb -= 8 {
			w.buf = append(w.buf, byte(acc>>56))
			acc <<= 8
		}
	}
	buf := w.buf
	*w = BitWriter{}
	return buf
}

// Reset makes the writer append to dst, dropping any pending bits.
func (w *BitWriter) Reset(dst []byte) { *w = BitWriter{buf: dst} }

// BitReader reads bits, most significant first, from a byte slice. Reading
// past the end yields zero bits and makes Err return an error, so decoders
// may read a whole value and check once at the end.
type BitReader struct {
	src  []byte
	pos  int    // next byte of src to load into acc
	acc  uint64 // the top n bits are the next bits of the stream
	n    uint
	over bool
}

// NewBitReader returns a reader over src.
func NewBitReader(src []byte) BitReader { return BitReader{src: src} }

// refill loads bytes into acc until it holds at least 56 bits or src is
// exhausted. Bits below the top n may already hold the following bits of the
// stream from an earlier refill; they are the same bits, so OR keeps them.
func (r *BitReader) refill() {
	if len(r.src)-r.pos >= 8 {
		w := binary.BigEndian.Uint64(r.src[r.pos:])
		r.acc |= w >> r.n
		k := (63 - r.n) >> 3
		r.pos += int(k)
		r.n += k << 3
		return
	}
	for r.n <= 56 && r.pos < len(r.src) {
		r.acc |= uint64(r.src[r.pos]) << (56 - r.n)
		r.pos++
		r.n += 8
	}
}

// ReadBits reads nb bits (nb <= 64) and returns them in the low end.
func (r *BitReader) ReadBits(nb uint) uint64 {
	if nb > 56 {
		hi := r.ReadBits(nb - 32)
		return hi<<32 | r.ReadBits(32)
	}
	if r.n < nb {
		r.refill()
		if r.n < nb {
			v := r.acc >> (64 - nb)
			r.acc, r.n, r.over = 0, 0, true
			return v
		}
	}
	v := r.acc >> (64 - nb) // nb == 0 gives 0
	r.acc <<= nb
	r.n -= nb
	return v
}

// ReadBit reads one bit.
func (r *BitReader) ReadBit() bool {
	if r.n == 0 {
		r.refill()
		if r.n == 0 {
			r.over = true
			return false
		}
	}
	b := r.acc>>63 != 0
	r.acc <<= 1
	r.n--
	return b
}

// Err reports whether a read went past the end of src.
func (r *BitReader) Err() error {
	if r.over {
		return errors.Join(ErrMalformed, errShortBits)
	}
	return nil
}

var errShortBits = errors.New("bit stream too short")

// Rest returns the bytes after the last bit read; the rest of a partly read
// byte is skipped.
func (r *BitReader) Rest() []byte {
	if r.over {
		return nil
	}
	consumed := r.pos*8 - int(r.n)
	return r.src[(consumed+7)/8:]
}
