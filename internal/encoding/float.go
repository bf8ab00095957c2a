package encoding

import (
	"fmt"
	"math/bits"
)

// Float format (Gorilla XOR), over the IEEE-754 bit patterns v0..v(n-1):
//
//	v0: 64 bits
//	for i >= 1, x = v(i) XOR v(i-1):
//	  x == 0                        '0'
//	  x fits the previous window    '10' + (64-lead-trail) bits of x>>trail
//	  otherwise                     '11' + lead (5 bits) + (sig-1) (6 bits) + sig bits of x>>trail
//
// where lead is the number of leading zero bits of x (capped at 31), trail
// the number of trailing zero bits and sig = 64-lead-trail. A window is the
// (lead, trail) pair of the last '11' value; '10' may be used when x has at
// least as many leading and trailing zeros. The stream is padded with zero
// bits to a whole byte. Any bit pattern round-trips, NaN payloads included.

// AppendFloats appends the float bit patterns vals in the float format.
func AppendFloats(dst []byte, vals []uint64) []byte {
	if len(vals) == 0 {
		return dst
	}
	w := NewBitWriter(dst)
	w.WriteBits(vals[0], 64)
	prev := vals[0]
	lead, trail := uint(64), uint(0) // no window yet: 64 leading zeros never fit
	for _, v := range vals[1:] {
		x := v ^ prev
		prev = v
		if x == 0 {
			w.WriteBits(0, 1)
			continue
		}
		l := uint(bits.LeadingZeros64(x))
		t := uint(bits.TrailingZeros64(x))
		if l > 31 {
			l = 31
		}
		if l >= lead && t >= trail {
			sig := 64 - lead - trail
			w.WriteBits(0b10, 2)
			w.WriteBits(x>>trail, sig)
			continue
		}
		lead, trail = l, t
		sig := 64 - l - t
		w.WriteBits(0b11<<11|uint64(l)<<6|uint64(sig-1), 13)
		w.WriteBits(x>>t, sig)
	}
	return w.Finish()
}

// DecodeFloats appends n float bit patterns decoded from src to dst and
// returns the rest of src.
func DecodeFloats(dst []uint64, src []byte, n int) ([]uint64, []byte, error) {
	if n <= 0 {
		if n < 0 {
			return dst, nil, fmt.Errorf("%w: negative float count", ErrMalformed)
		}
		return dst, src, nil
	}
	// Every value after the first takes at least one bit.
	if len(src) < 8 || ceilDiv(n-1, 8) > len(src)-8 {
		return dst, nil, fmt.Errorf("%w: %d floats in %d bytes", ErrMalformed, n, len(src))
	}
	start := len(dst)
	dst = extend(dst, n)
	out := dst[start:]
	r := NewBitReader(src)
	v := r.ReadBits(64)
	out[0] = v
	haveWindow := false
	var lead, sig uint
	for i := 1; i < len(out); i++ {
		if !r.ReadBit() {
			out[i] = v
			continue
		}
		if r.ReadBit() {
			hdr := r.ReadBits(11)
			lead = uint(hdr >> 6)
			sig = uint(hdr&63) + 1
			if lead+sig > 64 {
				return dst[:start], nil, fmt.Errorf("%w: float window %d+%d bits", ErrMalformed, lead, sig)
			}
			haveWindow = true
		} else if !haveWindow {
			return dst[:start], nil, fmt.Errorf("%w: float reuses a window before any", ErrMalformed)
		}
		v ^= r.ReadBits(sig) << (64 - lead - sig)
		out[i] = v
		if r.over {
			break
		}
	}
	if err := r.Err(); err != nil {
		return dst[:start], nil, err
	}
	return dst, r.Rest(), nil
}

// FloatsMinBits returns a lower bound on the bits AppendFloats writes for
// vals, much cheaper to compute than the encoding: 64 for the first value,
// then 1 for a repeat and 2 plus the meaningful bits of the XOR otherwise.
// It stops counting once the bound exceeds limit, so a caller holding
// another encoding of limit bits learns cheaply that Gorilla cannot beat it.
func FloatsMinBits(vals []uint64, limit int) int {
	if len(vals) == 0 {
		return 0
	}
	total := 64
	prev := vals[0]
	for i, v := range vals[1:] {
		x := v ^ prev
		prev = v
		if x == 0 {
			total++
		} else {
			total += 2 + 64 - bits.LeadingZeros64(x) - bits.TrailingZeros64(x)
		}
		if i&15 == 15 && total > limit {
			break
		}
	}
	return total
}
