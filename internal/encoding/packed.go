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
	if w <= maxGroupWidth {
		unpackWidth(out, src, w)
		return
	}
	i := 0
	if w <= 56 {
		// One unaligned 8-byte load per value while 8 bytes remain after
		// the value's first byte.
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

// maxGroupWidth is the widest width with a loop of its own: eight values
// of w bits fill w whole bytes, and each width's loop reads a group of
// eight with every shift and offset a constant. A shift by a variable
// count costs several instructions on amd64 before BMI2 (the default
// GOAMD64=v1).
const maxGroupWidth = 32

// width lists the types whose length is a width with a loop of its own;
// only the length matters: each array type gets its own compiled copy of
// a generic function, in which len is a constant.
type width interface {
	[1]byte | [2]byte | [3]byte | [4]byte | [5]byte | [6]byte | [7]byte | [8]byte |
		[9]byte | [10]byte | [11]byte | [12]byte | [13]byte | [14]byte | [15]byte | [16]byte |
		[17]byte | [18]byte | [19]byte | [20]byte | [21]byte | [22]byte | [23]byte | [24]byte |
		[25]byte | [26]byte | [27]byte | [28]byte | [29]byte | [30]byte | [31]byte | [32]byte
}

// unpackWidth is unpackFixed for the width 1 <= w <= maxGroupWidth. The
// calls are direct, so that the caller's buffers can stay on its stack.
func unpackWidth(out []uint64, src []byte, w uint) {
	switch w {
	case 1:
		unpackFixed[[1]byte](out, src)
	case 2:
		unpackFixed[[2]byte](out, src)
	case 3:
		unpackFixed[[3]byte](out, src)
	case 4:
		unpackFixed[[4]byte](out, src)
	case 5:
		unpackFixed[[5]byte](out, src)
	case 6:
		unpackFixed[[6]byte](out, src)
	case 7:
		unpackFixed[[7]byte](out, src)
	case 8:
		unpackFixed[[8]byte](out, src)
	case 9:
		unpackFixed[[9]byte](out, src)
	case 10:
		unpackFixed[[10]byte](out, src)
	case 11:
		unpackFixed[[11]byte](out, src)
	case 12:
		unpackFixed[[12]byte](out, src)
	case 13:
		unpackFixed[[13]byte](out, src)
	case 14:
		unpackFixed[[14]byte](out, src)
	case 15:
		unpackFixed[[15]byte](out, src)
	case 16:
		unpackFixed[[16]byte](out, src)
	case 17:
		unpackFixed[[17]byte](out, src)
	case 18:
		unpackFixed[[18]byte](out, src)
	case 19:
		unpackFixed[[19]byte](out, src)
	case 20:
		unpackFixed[[20]byte](out, src)
	case 21:
		unpackFixed[[21]byte](out, src)
	case 22:
		unpackFixed[[22]byte](out, src)
	case 23:
		unpackFixed[[23]byte](out, src)
	case 24:
		unpackFixed[[24]byte](out, src)
	case 25:
		unpackFixed[[25]byte](out, src)
	case 26:
		unpackFixed[[26]byte](out, src)
	case 27:
		unpackFixed[[27]byte](out, src)
	case 28:
		unpackFixed[[28]byte](out, src)
	case 29:
		unpackFixed[[29]byte](out, src)
	case 30:
		unpackFixed[[30]byte](out, src)
	case 31:
		unpackFixed[[31]byte](out, src)
	default:
		unpackFixed[[32]byte](out, src)
	}
}

// unpackFixed fills out with values of len(G) bits from src, eight at a
// time. The groups whose loads would pass the end of src, and a last
// group of fewer than eight, are read from a copy padded with zeros.
func unpackFixed[G width](out []uint64, src []byte) {
	var g G
	w := len(g)
	i := unpackGroups[G](out, src)
	if i == len(out) {
		return
	}
	// A group's loads reach at most w+8 bytes past its start, so the
	// values left fit in fewer than w+8 bytes, and every group of them
	// starts there and loads within 2(w+8) bytes of the copy.
	var pad [2 * (maxGroupWidth + 8)]byte
	copy(pad[:2*(w+8)], src[i*w/8:])
	j := i + unpackGroups[G](out[i:], pad[:2*(w+8)])
	if j < len(out) {
		var last [8]uint64
		unpackGroups[G](last[:], pad[(j-i)*w/8:2*(w+8)])
		copy(out[j:], last[:])
	}
}

// unpackGroups fills out with values of w = len(G) bits from src, a group
// of eight at a time while the group's loads stay within src, and returns
// how many it filled (a multiple of 8). Up to 8 bits, one 8-byte load
// gives the eight values of a group; wider, value j starts at bit j*w, a
// constant, and one 8-byte load at its first byte holds it (its offset
// in that byte, below 8, plus w is at most 64).
func unpackGroups[G width](out []uint64, src []byte) int {
	var g G
	w := uint(len(g))
	i, b := 0, 0
	if w <= 8 {
		mask := uint64(1)<<w - 1
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
	// The last value's load ends 8 bytes after its first byte, 7w/8.
	span := int(7*w/8) + 8
	for ; i+8 <= len(out) && b+span <= len(src); i, b = i+8, b+int(w) {
		grp := src[b : b+span : b+span]
		o := out[i : i+8 : i+8]
		o[0] = binary.BigEndian.Uint64(grp[0:]) >> ((64 - w) & 63)
		o[1] = binary.BigEndian.Uint64(grp[(1*w)/8:]) << ((1 * w) & 7) >> ((64 - w) & 63)
		o[2] = binary.BigEndian.Uint64(grp[(2*w)/8:]) << ((2 * w) & 7) >> ((64 - w) & 63)
		o[3] = binary.BigEndian.Uint64(grp[(3*w)/8:]) << ((3 * w) & 7) >> ((64 - w) & 63)
		o[4] = binary.BigEndian.Uint64(grp[(4*w)/8:]) << ((4 * w) & 7) >> ((64 - w) & 63)
		o[5] = binary.BigEndian.Uint64(grp[(5*w)/8:]) << ((5 * w) & 7) >> ((64 - w) & 63)
		o[6] = binary.BigEndian.Uint64(grp[(6*w)/8:]) << ((6 * w) & 7) >> ((64 - w) & 63)
		o[7] = binary.BigEndian.Uint64(grp[(7*w)/8:]) << ((7 * w) & 7) >> ((64 - w) & 63)
	}
	return i
}
