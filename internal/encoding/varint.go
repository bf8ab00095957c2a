package encoding

import (
	"encoding/binary"
	"fmt"
)

// Zigzag maps a signed integer to an unsigned one so that values of small
// magnitude, negative or positive, get small codes: 0, -1, 1, -2 -> 0, 1, 2, 3.
func Zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// Unzigzag inverts Zigzag.
func Unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// AppendUvarint appends v in the varint format of encoding/binary.
func AppendUvarint(dst []byte, v uint64) []byte { return binary.AppendUvarint(dst, v) }

// AppendVarint appends the zigzag varint of v.
func AppendVarint(dst []byte, v int64) []byte { return binary.AppendUvarint(dst, Zigzag(v)) }

// Uvarint decodes a varint from src and returns it with the rest of src.
func Uvarint(src []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(src)
	if n <= 0 {
		if n == 0 {
			return 0, nil, fmt.Errorf("%w: truncated varint", ErrMalformed)
		}
		return 0, nil, fmt.Errorf("%w: varint overflows 64 bits", ErrMalformed)
	}
	return v, src[n:], nil
}

// Varint decodes a zigzag varint written by AppendVarint.
func Varint(src []byte) (int64, []byte, error) {
	u, rest, err := Uvarint(src)
	return Unzigzag(u), rest, err
}
