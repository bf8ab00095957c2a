package encoding

import "fmt"

// Boolean format: one bit per value (1 = true), most significant bit first,
// padded with zero bits to a whole byte: ceil(n/8) bytes.

// AppendBools appends vals, each 0 or 1 (any non-zero value is true), in the
// boolean format.
func AppendBools(dst []byte, vals []uint64) []byte {
	w := NewBitWriter(dst)
	for _, v := range vals {
		w.WriteBit(v != 0)
	}
	return w.Finish()
}

// DecodeBools appends n values (0 or 1) decoded from src to dst and returns
// the rest of src. The padding bits must be zero.
func DecodeBools(dst []uint64, src []byte, n int) ([]uint64, []byte, error) {
	if n < 0 {
		return dst, nil, fmt.Errorf("%w: negative bool count", ErrMalformed)
	}
	need := ceilDiv(n, 8)
	if need > len(src) {
		return dst, nil, fmt.Errorf("%w: %d bools in %d bytes", ErrMalformed, n, len(src))
	}
	if n&7 != 0 && src[need-1]&(0xff>>(n&7)) != 0 {
		return dst, nil, fmt.Errorf("%w: non-zero padding bits", ErrMalformed)
	}
	start := len(dst)
	dst = extend(dst, n)
	for i, out := 0, dst[start:]; i < len(out); i++ {
		out[i] = uint64(src[i>>3]>>(7-i&7)) & 1
	}
	return dst, src[need:], nil
}
