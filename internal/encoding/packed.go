package encoding

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
)

// Packed format: a sequence of unsigned integers cut into chunks of
// PackedChunk values (the last chunk may be shorter). Each chunk is
//
//	+-----------+----------------------------------------------+
//	| width (1) | ceil(c*width/8) bytes: c values, width bits  |
//	+-----------+----------------------------------------------+
//
// where width (0..64) is the bit length of the largest value of the chunk
// and c is the number of values in it. Values are written most significant
// bit first; the last byte is padded with zero bits. A chunk of zeros costs
// one byte. These constants are part of the durable format and must not be
// changed.
const PackedChunk = 128

// AppendPacked appends vals in the packed format.
func AppendPacked(dst []byte, vals []uint64) []byte {
	for len(vals) > 0 {
		c := min(len(vals), PackedChunk)
		dst = appendChunk(dst, vals[:c])
		vals = vals[c:]
	}
	return dst
}

func appendChunk(dst []byte, vals []uint64) []byte {
	var or uint64
	for _, v := range vals {
		or |= v
	}
	w := uint(bits.Len64(or))
	dst = append(dst, byte(w))
	if w == 0 {
		return dst
	}
	bw := NewBitWriter(dst)
	for _, v := range vals {
		bw.WriteBits(v, w)
	}
	return bw.Finish()
}

// packedMinBytes is the smallest encoding of n values: one byte per chunk.
func packedMinBytes(n int) int { return ceilDiv(n, PackedChunk) }

// ceilDiv returns ceil(n/d) for n >= 0 and d > 0 without the overflow of
// (n+d-1)/d: counts come from untrusted bytes and may be near MaxInt.
func ceilDiv(n, d int) int {
	q := n / d
	if n%d != 0 {
		q++
	}
	return q
}

// DecodePacked appends n values decoded from src to dst and returns the rest
// of src.
func DecodePacked(dst []uint64, src []byte, n int) ([]uint64, []byte, error) {
	if n < 0 || packedMinBytes(n) > len(src) {
		return dst, nil, fmt.Errorf("%w: %d packed values in %d bytes", ErrMalformed, n, len(src))
	}
	start := len(dst)
	dst = extend(dst, n)
	rest, err := unpackAll(dst[start:], src)
	if err != nil {
		return dst[:start], nil, err
	}
	return dst, rest, nil
}

// extend returns dst grown by n elements whose values are unspecified.
func extend[T any](dst []T, n int) []T {
	return slices.Grow(dst, n)[:len(dst)+n]
}

// unpackAll fills out with values decoded from src, chunk by chunk.
func unpackAll(out []uint64, src []byte) ([]byte, error) {
	for len(out) > 0 {
		c := min(len(out), PackedChunk)
		if len(src) == 0 {
			return nil, fmt.Errorf("%w: packed chunk missing", ErrMalformed)
		}
		w := uint(src[0])
		if w > 64 {
			return nil, fmt.Errorf("%w: packed width %d", ErrMalformed, w)
		}
		need := (c*int(w) + 7) / 8
		if len(src)-1 < need {
			return nil, fmt.Errorf("%w: packed chunk needs %d bytes, has %d", ErrMalformed, need, len(src)-1)
		}
		unpack(out[:c], src[1:], w)
		src = src[1+need:]
		out = out[c:]
	}
	return src, nil
}

// unpack fills out with values of w bits from src, which holds at least
// ceil(len(out)*w/8) bytes.
func unpack(out []uint64, src []byte, w uint) {
	if w == 0 {
		clear(out)
		return
	}
	if w <= 8 {
		unpackSmall(out, src, w)
		return
	}
	i := 0
	if w <= 56 {
		// Fast path: one unaligned 8-byte load per value while 8 bytes
		// remain after the value's first byte.
		shift := 64 - w
		for ; i < len(out); i++ {
			bit := uint(i) * w
			b := int(bit >> 3)
			if b+8 > len(src) {
				break
			}
			x := binary.BigEndian.Uint64(src[b:])
			out[i] = (x << (bit & 7)) >> shift
		}
		if i == len(out) {
			return
		}
	}
	r := NewBitReader(src)
	for skip := uint(i) * w; skip > 0; {
		k := min(skip, 56)
		r.ReadBits(k)
		skip -= k
	}
	for ; i < len(out); i++ {
		out[i] = r.ReadBits(w)
	}
}

// unpackSmall fills out with values of w <= 8 bits from src, eight at a
// time: eight such values fill w whole bytes, so one 8-byte load gives
// all eight. The groups that start within 8 bytes of the end of src, and
// a last group of fewer than eight, are read from a copy padded with
// zeros.
func unpackSmall(out []uint64, src []byte, w uint) {
	i := unpackGroups(out, src, w)
	if i == len(out) {
		return
	}
	// Fewer than 8 bytes hold the values left: the loop stopped with less
	// than 8 bytes at the next group, or fewer than eight values to fill.
	var pad [16]byte
	copy(pad[:], src[i*int(w)/8:])
	j := i + unpackGroups(out[i:], pad[:], w)
	if j < len(out) {
		var last [8]uint64
		unpackGroups(last[:], pad[(j-i)*int(w)/8:], w)
		copy(out[j:], last[:])
	}
}

// unpackGroups fills out with values of w <= 8 bits from src, a group of
// eight at a time while 8 bytes remain at the group, and returns how many
// it filled (a multiple of 8). Each width has its own copy of the loop, in
// which every shift is a constant: a shift by a variable count costs
// several instructions on amd64 before BMI2.
func unpackGroups(out []uint64, src []byte, w uint) int {
	switch w {
	case 1:
		return unpackNarrow[[1]byte](out, src)
	case 2:
		return unpackNarrow[[2]byte](out, src)
	case 3:
		return unpackNarrow[[3]byte](out, src)
	case 4:
		return unpackNarrow[[4]byte](out, src)
	case 5:
		return unpackNarrow[[5]byte](out, src)
	case 6:
		return unpackNarrow[[6]byte](out, src)
	case 7:
		return unpackNarrow[[7]byte](out, src)
	default:
		return unpackNarrow[[8]byte](out, src)
	}
}

// unpackNarrow is unpackGroups for the width len(G). The type parameter
// only carries the width; each array length has its own compiled copy, in
// which w is a constant.
func unpackNarrow[G [1]byte | [2]byte | [3]byte | [4]byte | [5]byte | [6]byte | [7]byte | [8]byte](out []uint64, src []byte) int {
	var g G
	w := uint(len(g))
	mask := uint64(1)<<w - 1
	i, b := 0, 0
	for ; i+8 <= len(out) && b+8 <= len(src); i, b = i+8, b+int(w) {
		x := binary.BigEndian.Uint64(src[b:])
		o := out[i : i+8 : i+8]
		o[0] = x >> ((64 - w) & 63) & mask
		o[1] = x >> ((64 - 2*w) & 63) & mask
		o[2] = x >> ((64 - 3*w) & 63) & mask
		o[3] = x >> ((64 - 4*w) & 63) & mask
		o[4] = x >> ((64 - 5*w) & 63) & mask
		o[5] = x >> ((64 - 6*w) & 63) & mask
		o[6] = x >> ((64 - 7*w) & 63) & mask
		o[7] = x >> ((64 - 8*w) & 63) & mask
	}
	return i
}
