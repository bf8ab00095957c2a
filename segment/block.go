package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/klauspost/compress/zstd"

	"github.com/stratadb/strata/internal/encoding"
	"github.com/stratadb/strata/internal/point"
)

// blockScratch holds buffers reused from block to block.
type blockScratch struct {
	raw  []byte   // raw block being encoded, or decoded from zstd
	alt  []byte   // second float encoding, compressed payload, file bytes
	ts   []int64  // decoded timestamps
	vals []uint64 // decoded values
	strs []string // decoded strings
}

// appendRawBlock encodes one raw block into sc.raw and returns it.
func appendRawBlock(sc *blockScratch, kind point.Kind, times []int64, vals []uint64, strs []string) []byte {
	n := len(times)
	raw := append(sc.raw[:0], byte(kind))
	raw = encoding.AppendUvarint(raw, uint64(n))
	ts := encoding.AppendTimestamps(sc.alt[:0], times)
	raw = encoding.AppendUvarint(raw, uint64(len(ts)))
	raw = append(raw, ts...)
	sc.alt = ts
	switch kind {
	case point.KindFloat:
		raw = appendFloatColumn(raw, vals, sc)
	case point.KindInt, point.KindUint:
		raw = encoding.AppendInts(raw, vals)
	case point.KindBool:
		raw = encoding.AppendBools(raw, vals)
	case point.KindString:
		raw = encoding.AppendStrings(raw, strs)
	}
	sc.raw = raw
	return raw
}

// appendFloatColumn appends the smaller of the decimal and Gorilla
// encodings of vals, after the codec byte saying which. Gorilla is skipped
// when a lower bound on its size already exceeds the decimal encoding.
func appendFloatColumn(dst []byte, vals []uint64, sc *blockScratch) []byte {
	start := len(dst)
	dec, ok := encoding.AppendDecimal(append(dst, floatDecimal), vals)
	decLen := len(dec) - start - 1
	if ok && 8*decLen <= encoding.FloatsMinBits(vals, 8*decLen) {
		return dec
	}
	gor := encoding.AppendFloats(sc.alt[:0], vals)
	sc.alt = gor
	if ok && decLen <= len(gor) {
		return dec
	}
	dst = append(dst[:start], floatGorilla)
	return append(dst, gor...)
}

// appendFramed appends raw in the stored framing: flags, rawLen, payload
// (zstd when that is smaller and within maxRatio), crc32c.
func appendFramed(dst []byte, enc *zstd.Encoder, raw []byte) []byte {
	start := len(dst)
	dst = append(dst, 0)
	dst = encoding.AppendUvarint(dst, uint64(len(raw)))
	body := len(dst)
	dst = enc.EncodeAll(raw, dst)
	if c := len(dst) - body; c < len(raw) && len(raw) <= maxRatio*c {
		dst[start] = flagZstd
	} else {
		dst = append(dst[:body], raw...)
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// decodeStream appends the bytes zstd frames payload decode to to dst,
// which must have room for all of them.
func decodeStream(payload, dst []byte) ([]byte, error) {
	dec, err := decoder()
	if err != nil {
		return nil, err
	}
	out, err := dec.DecodeAll(payload, dst)
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	return out, nil
}

var errShortFrame = errors.New("frame too short")

// checkFrame checks the checksum, flags and declared raw length of a stored
// block or section without decoding it, and returns its flags, raw length
// and payload.
func checkFrame(stored []byte, maxRaw int) (flags byte, rawLen uint64, payload []byte, err error) {
	if len(stored) < 6 {
		return 0, 0, nil, errShortFrame
	}
	body := stored[:len(stored)-4]
	if want, got := binary.LittleEndian.Uint32(stored[len(body):]), crc32.Checksum(body, castagnoli); want != got {
		return 0, 0, nil, fmt.Errorf("%w: stored %08x, computed %08x", ErrChecksum, want, got)
	}
	flags = body[0]
	if flags&^flagZstd != 0 {
		return 0, 0, nil, fmt.Errorf("unknown flags %#x", flags)
	}
	rawLen, payload, err = encoding.Uvarint(body[1:])
	if err != nil {
		return 0, 0, nil, fmt.Errorf("raw length: %w", err)
	}
	if rawLen > uint64(maxRaw) {
		return 0, 0, nil, fmt.Errorf("raw length %d exceeds %d", rawLen, maxRaw)
	}
	if flags&flagZstd == 0 && uint64(len(payload)) != rawLen {
		return 0, 0, nil, fmt.Errorf("raw length %d, payload %d", rawLen, len(payload))
	}
	if flags&flagZstd != 0 && rawLen > maxRatio*uint64(len(payload)) {
		return 0, 0, nil, fmt.Errorf("raw length %d from %d compressed bytes", rawLen, len(payload))
	}
	return flags, rawLen, payload, nil
}

// unframe checks the checksum and flags of a stored block or section and
// returns its raw bytes, decompressing into sc.raw when needed. maxRaw
// bounds the declared raw length.
func unframe(stored []byte, maxRaw int, sc *blockScratch) ([]byte, error) {
	flags, rawLen, payload, err := checkFrame(stored, maxRaw)
	if err != nil {
		return nil, err
	}
	if flags&flagZstd == 0 {
		return payload, nil
	}
	dec, err := decoder()
	if err != nil {
		return nil, err
	}
	if cap(sc.raw) < int(rawLen) {
		sc.raw = make([]byte, 0, rawLen)
	}
	// The decoder is limited to the capacity it is given (see decoder), so
	// it fills sc.raw's array and never allocates past rawLen.
	raw, err := dec.DecodeAll(payload, sc.raw[:0:rawLen])
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	if uint64(len(raw)) != rawLen {
		return nil, fmt.Errorf("decompressed %d bytes, want %d", len(raw), rawLen)
	}
	return raw, nil
}

// maxBlockRaw is the largest raw block of count samples of kind k.
func maxBlockRaw(k point.Kind, count int) int {
	if k == point.KindString {
		return MaxBlockRaw
	}
	return 64 + 20*count
}

// decodeBlock appends the samples of raw block raw to dst after checking it
// against its index entry.
func decodeBlock(dst []point.Sample, raw []byte, kind point.Kind, bm *BlockMeta, sc *blockScratch) ([]point.Sample, error) {
	ts, vals, strs, err := decodeColumns(sc.ts[:0], sc.vals[:0], sc.strs[:0], raw, kind, bm)
	sc.ts, sc.vals = ts[:0], vals[:0]
	defer func() {
		clear(strs)
		sc.strs = strs[:0]
	}()
	if err != nil {
		return dst, err
	}
	// Writing into a pre-sized slice is several times faster than
	// appending 40-byte samples one by one.
	n := len(ts)
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	out := dst[start:]
	if kind == point.KindString {
		for i, s := range strs[:len(out)] {
			out[i] = point.Sample{Time: ts[i], Value: point.String(s)}
		}
		return dst, nil
	}
	vals = vals[:len(out)]
	for i := range out {
		out[i].Time = ts[i]
		out[i].Value.SetBits(kind, vals[i])
	}
	return dst, nil
}

// decodeColumns appends the timestamps of raw block raw to ts and its
// values to vals (numbers and booleans, as point.Value.Bits) or strs
// (strings) after checking the block against its index entry and its
// timestamps for strict order. On error the slices hold what they held.
func decodeColumns(ts []int64, vals []uint64, strs []string, raw []byte, kind point.Kind, bm *BlockMeta) ([]int64, []uint64, []string, error) {
	ts0, vals0, strs0 := ts, vals, strs
	fail := func(err error) ([]int64, []uint64, []string, error) { return ts0, vals0, strs0, err }
	if len(raw) < 3 {
		return fail(errShortFrame)
	}
	if point.Kind(raw[0]) != kind {
		return fail(fmt.Errorf("block kind %d, series kind %d", raw[0], kind))
	}
	count, rest, err := encoding.Uvarint(raw[1:])
	if err != nil {
		return fail(fmt.Errorf("count: %w", err))
	}
	if count != uint64(bm.Count) {
		return fail(fmt.Errorf("block holds %d samples, index says %d", count, bm.Count))
	}
	n := int(count)
	tsLen, rest, err := encoding.Uvarint(rest)
	if err != nil {
		return fail(fmt.Errorf("timestamps length: %w", err))
	}
	if tsLen > uint64(len(rest)) {
		return fail(fmt.Errorf("timestamps length %d exceeds %d", tsLen, len(rest)))
	}
	at := len(ts)
	ts, tail, err := encoding.DecodeIncreasingTimestamps(ts, rest[:tsLen], n)
	if err != nil {
		return fail(fmt.Errorf("timestamps: %w", err))
	}
	if len(tail) != 0 {
		return fail(fmt.Errorf("%d bytes after timestamps", len(tail)))
	}
	if got := ts[at:]; got[0] != bm.MinTime || got[n-1] != bm.MaxTime {
		return fail(fmt.Errorf("block spans %d..%d, index says %d..%d", got[0], got[n-1], bm.MinTime, bm.MaxTime))
	}
	col := rest[tsLen:]
	switch kind {
	case point.KindFloat:
		if len(col) == 0 {
			return fail(errors.New("missing float codec"))
		}
		switch col[0] {
		case floatGorilla:
			vals, tail, err = encoding.DecodeFloats(vals, col[1:], n)
		case floatDecimal:
			vals, tail, err = encoding.DecodeDecimal(vals, col[1:], n)
		default:
			return fail(fmt.Errorf("unknown float codec %d", col[0]))
		}
	case point.KindInt, point.KindUint:
		vals, tail, err = encoding.DecodeInts(vals, col, n)
	case point.KindBool:
		vals, tail, err = encoding.DecodeBools(vals, col, n)
	case point.KindString:
		strs, tail, err = encoding.DecodeStrings(strs, col, n)
	}
	if err != nil {
		return fail(fmt.Errorf("%v values: %w", kind, err))
	}
	if len(tail) != 0 {
		return fail(fmt.Errorf("%d bytes after values", len(tail)))
	}
	return ts, vals, strs, nil
}
