package encoding

import (
	"fmt"
	"math"
)

// Timestamp format (delta of delta): for n timestamps t0..t(n-1)
//
//	+-----------------------+-------------------------------+--------------------------------+
//	| zigzag(t0) uvarint    | zigzag(t1-t0) uvarint (n>=2)  | packed zigzag(dod) (n>=3)      |
//	+-----------------------+-------------------------------+--------------------------------+
//
// where dod(i) = (t(i)-t(i-1)) - (t(i-1)-t(i-2)) for i >= 2, in wrapping
// 64-bit arithmetic (so any int64 timestamps round-trip), bit-packed in
// chunks (see AppendPacked). A regular series costs one byte per 128
// timestamps after the first two.

// AppendTimestamps appends ts in the timestamp format. It does not require
// any order; the segment writer passes strictly increasing times.
func AppendTimestamps(dst []byte, ts []int64) []byte {
	if len(ts) == 0 {
		return dst
	}
	dst = AppendVarint(dst, ts[0])
	if len(ts) == 1 {
		return dst
	}
	delta := ts[1] - ts[0]
	dst = AppendVarint(dst, delta)
	var chunk [PackedChunk]uint64
	prev := ts[1]
	rest := ts[2:]
	for len(rest) > 0 {
		c := min(len(rest), PackedChunk)
		for i, t := range rest[:c] {
			d := t - prev
			chunk[i] = Zigzag(d - delta)
			delta, prev = d, t
		}
		dst = appendChunk(dst, chunk[:c])
		rest = rest[c:]
	}
	return dst
}

// DecodeTimestamps appends n timestamps decoded from src to dst and returns
// the rest of src.
func DecodeTimestamps(dst []int64, src []byte, n int) ([]int64, []byte, error) {
	return decodeTimestamps(dst, src, n, false)
}

// DecodeIncreasingTimestamps is DecodeTimestamps for timestamps that must
// be strictly increasing, as a segment block's: it fails with ErrMalformed
// if one is not after its predecessor (in plain, not wrapping, order). The
// check rides on the decoding loop, which costs less than a second pass.
func DecodeIncreasingTimestamps(dst []int64, src []byte, n int) ([]int64, []byte, error) {
	return decodeTimestamps(dst, src, n, true)
}

func decodeTimestamps(dst []int64, src []byte, n int, increasing bool) ([]int64, []byte, error) {
	if n <= 0 {
		if n < 0 {
			return dst, nil, fmt.Errorf("%w: negative timestamp count", ErrMalformed)
		}
		return dst, src, nil
	}
	if n > 2 && packedMinBytes(n-2)+2 > len(src) {
		return dst, nil, fmt.Errorf("%w: %d timestamps in %d bytes", ErrMalformed, n, len(src))
	}
	t, src, err := Varint(src)
	if err != nil {
		return dst, nil, err
	}
	start := len(dst)
	dst = extend(dst, n)
	out := dst[start:]
	out[0] = t
	if n == 1 {
		return dst, src, nil
	}
	delta, src, err := Varint(src)
	if err != nil {
		return dst[:start], nil, err
	}
	prev := t
	t += delta
	out[1] = t
	unordered := t <= prev
	if n > 2 {
		rest := out[2:]
		var chunk [PackedChunk]uint64
		for len(rest) > 0 {
			c := min(len(rest), PackedChunk)
			if len(src) > 0 && src[0] == 0 && delta > 0 && uint64(delta) <= (math.MaxInt64-uint64(t))/uint64(c) {
				// A chunk of width 0 (a regular interval: every delta of
				// delta is 0) that stays increasing and within int64.
				// math.MaxInt64-uint64(t) is the room above t, exact
				// for a negative t too.
				src = src[1:]
				for i := range rest[:c] {
					t += delta
					rest[i] = t
				}
				rest = rest[c:]
				continue
			}
			src, err = unpackAll(chunk[:c], src)
			if err != nil {
				return dst[:start], nil, err
			}
			for i, u := range chunk[:c] {
				delta += Unzigzag(u)
				prev = t
				t += delta
				rest[i] = t
				if t <= prev {
					unordered = true
				}
			}
			rest = rest[c:]
		}
	}
	if increasing && unordered {
		for i := 1; i < len(out); i++ {
			if out[i] <= out[i-1] {
				err = fmt.Errorf("%w: timestamp %d at %d not after %d", ErrMalformed, i, out[i], out[i-1])
				break
			}
		}
		return dst[:start], nil, err
	}
	return dst, src, nil
}
