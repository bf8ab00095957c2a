package encoding

import (
	"fmt"
	"slices"
)

// String format: each value as its length (uvarint) followed by its bytes.

// AppendStrings appends vals in the string format.
func AppendStrings(dst []byte, vals []string) []byte {
	for _, s := range vals {
		dst = AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	return dst
}

// DecodeStrings appends n strings decoded from src to dst and returns the
// rest of src. The strings share one allocation holding all their bytes.
func DecodeStrings(dst []string, src []byte, n int) ([]string, []byte, error) {
	if n < 0 || n > len(src) {
		return dst, nil, fmt.Errorf("%w: %d strings in %d bytes", ErrMalformed, n, len(src))
	}
	// First pass: validate the lengths and find the end.
	rest := src
	for range n {
		l, r, err := Uvarint(rest)
		if err != nil {
			return dst, nil, err
		}
		if l > uint64(len(r)) {
			return dst, nil, fmt.Errorf("%w: string of %d bytes in %d", ErrMalformed, l, len(r))
		}
		rest = r[l:]
	}
	all := string(src[:len(src)-len(rest)])
	dst = slices.Grow(dst, n)
	off := 0
	for range n {
		l, r, _ := Uvarint(src[off:])
		start := len(src) - len(r)
		dst = append(dst, all[start:start+int(l)])
		off = start + int(l)
	}
	return dst, rest, nil
}
