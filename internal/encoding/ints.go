package encoding

import (
	"fmt"
)

// Integer format (zigzag delta), for int64 and uint64 values given as their
// 64-bit two's complement patterns v0..v(n-1):
//
//	+----------------------------+-----------------------------------------+
//	| zigzag(int64(v0)) uvarint  | packed zigzag(int64(v(i)-v(i-1))), i>=1 |
//	+----------------------------+-----------------------------------------+
//
// Differences wrap in 64 bits, so every value round-trips, and a uint64
// counter that moves by small steps gets small codes as an int64 series does.

// AppendInts appends vals in the integer format.
func AppendInts(dst []byte, vals []uint64) []byte {
	if len(vals) == 0 {
		return dst
	}
	dst = AppendUvarint(dst, Zigzag(int64(vals[0])))
	if len(vals) == 1 {
		return dst // the chunk buffer below need not be zeroed
	}
	var chunk [PackedChunk]uint64
	prev := vals[0]
	rest := vals[1:]
	for len(rest) > 0 {
		c := min(len(rest), PackedChunk)
		for i, v := range rest[:c] {
			chunk[i] = Zigzag(int64(v - prev))
			prev = v
		}
		dst = appendChunk(dst, chunk[:c])
		rest = rest[c:]
	}
	return dst
}

// DecodeInts appends n values decoded from src to dst and returns the rest.
func DecodeInts(dst []uint64, src []byte, n int) ([]uint64, []byte, error) {
	if n <= 0 {
		if n < 0 {
			return dst, nil, fmt.Errorf("%w: negative integer count", ErrMalformed)
		}
		return dst, src, nil
	}
	if packedMinBytes(n-1)+1 > len(src) {
		return dst, nil, fmt.Errorf("%w: %d integers in %d bytes", ErrMalformed, n, len(src))
	}
	u, src, err := Uvarint(src)
	if err != nil {
		return dst, nil, err
	}
	start := len(dst)
	dst = extend(dst, n)
	out := dst[start:]
	src, err = unpackAll(out[1:], src)
	if err != nil {
		return dst[:start], nil, err
	}
	v := uint64(Unzigzag(u))
	out[0] = v
	for i := 1; i < len(out); i++ {
		v += uint64(Unzigzag(out[i]))
		out[i] = v
	}
	return dst, src, nil
}
