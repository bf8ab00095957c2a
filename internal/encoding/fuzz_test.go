package encoding

import (
	"encoding/binary"
	"slices"
	"testing"
)

// words reads data as little-endian 64-bit words (a short tail is dropped).
func words(data []byte) []uint64 {
	out := make([]uint64, len(data)/8)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(data[i*8:])
	}
	return out
}

// FuzzFloats round-trips arbitrary float bit patterns through the Gorilla
// and decimal codecs, and feeds the raw input to both decoders.
func FuzzFloats(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		vals := words(data)
		enc := AppendFloats(nil, vals)
		got, rest, err := DecodeFloats(nil, enc, len(vals))
		if err != nil || len(rest) != 0 || !slices.Equal(got, vals) {
			t.Fatalf("gorilla round trip: err %v, rest %d, equal %v", err, len(rest), slices.Equal(got, vals))
		}
		if dec, ok := AppendDecimal(nil, vals); ok {
			got, rest, err := DecodeDecimal(nil, dec, len(vals))
			if err != nil || len(rest) != 0 || !slices.Equal(got, vals) {
				t.Fatalf("decimal round trip: err %v, rest %d", err, len(rest))
			}
		}
		for _, n := range []int{1, 2, len(data), 8 * len(data)} {
			DecodeFloats(nil, data, n)
			DecodeDecimal(nil, data, n)
		}
	})
}

// FuzzTimestamps round-trips arbitrary int64s through the timestamp codec
// and feeds the raw input to the timestamp and integer decoders.
func FuzzTimestamps(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		vals := words(data)
		ts := make([]int64, len(vals))
		for i, v := range vals {
			ts[i] = int64(v)
		}
		enc := AppendTimestamps(nil, ts)
		got, rest, err := DecodeTimestamps(nil, enc, len(ts))
		if err != nil || len(rest) != 0 || !slices.Equal(got, ts) {
			t.Fatalf("timestamp round trip: err %v, rest %d", err, len(rest))
		}
		_, _, err = DecodeIncreasingTimestamps(nil, enc, len(ts))
		if increasing := isIncreasing(ts); (err == nil) != increasing {
			t.Fatalf("increasing %v, DecodeIncreasingTimestamps: %v", increasing, err)
		}
		slices.Sort(ts)
		ts = slices.Compact(ts)
		got, rest, err = DecodeIncreasingTimestamps([]int64{-1}, AppendTimestamps(nil, ts), len(ts))
		if err != nil || len(rest) != 0 || got[0] != -1 || !slices.Equal(got[1:], ts) {
			t.Fatalf("increasing round trip: err %v, rest %d", err, len(rest))
		}
		ienc := AppendInts(nil, vals)
		igot, rest, err := DecodeInts(nil, ienc, len(vals))
		if err != nil || len(rest) != 0 || !slices.Equal(igot, vals) {
			t.Fatalf("integer round trip: err %v, rest %d", err, len(rest))
		}
		for _, n := range []int{1, 2, 3, len(data), 128 * len(data)} {
			DecodeTimestamps(nil, data, n)
			DecodeIncreasingTimestamps(nil, data, n)
			DecodeInts(nil, data, n)
			DecodePacked(nil, data, n)
			DecodeBools(nil, data, n)
			DecodeStrings(nil, data, n)
		}
	})
}

// FuzzPacked round-trips values of one width (data[0] mod 65 bits, so
// that narrow widths, which unpack eight at a time, are as likely as wide
// ones) with a trailing byte after them.
func FuzzPacked(f *testing.F) {
	f.Add([]byte{6, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17})
	f.Add([]byte{8, 0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0xf8})
	f.Add([]byte{1, 0xaa, 0x55})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		w := uint(data[0]) % 65
		vals := words(data[1:])
		for i, b := range data[1:] { // short inputs still give values
			if i >= len(vals) {
				vals = append(vals, uint64(b)*0x0101010101010101)
			}
		}
		for i := range vals {
			if w == 0 {
				vals[i] = 0
			} else {
				vals[i] >>= 64 - w
			}
		}
		enc := append(AppendPacked(nil, vals), 0xa5)
		got, rest, err := DecodePacked(nil, enc, len(vals))
		if err != nil || len(rest) != 1 || rest[0] != 0xa5 || !slices.Equal(got, vals) {
			t.Fatalf("w=%d n=%d: err %v, rest %x, equal %v", w, len(vals), err, rest, slices.Equal(got, vals))
		}
	})
}

// isIncreasing reports whether every timestamp is after its predecessor.
func isIncreasing(ts []int64) bool {
	for i := 1; i < len(ts); i++ {
		if ts[i] <= ts[i-1] {
			return false
		}
	}
	return true
}
