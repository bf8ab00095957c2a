package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/cespare/xxhash/v2"

	"github.com/stratadb/strata/internal/decbuf"
	"github.com/stratadb/strata/internal/encoding"
	"github.com/stratadb/strata/internal/point"
)

// SeriesIndex is the index entry of one series: its key, kind and blocks in
// time order. It belongs to the Reader and must not be modified.
type SeriesIndex struct {
	Key    []byte
	Kind   point.Kind
	Blocks []BlockMeta
}

// MinTime returns the time of the series' first sample.
func (s *SeriesIndex) MinTime() int64 { return s.Blocks[0].MinTime }

// MaxTime returns the time of the series' last sample.
func (s *SeriesIndex) MaxTime() int64 { return s.Blocks[len(s.Blocks)-1].MaxTime }

// Samples returns the number of samples of the series.
func (s *SeriesIndex) Samples() int64 {
	var n int64
	for i := range s.Blocks {
		n += int64(s.Blocks[i].Count)
	}
	return n
}

// BlockMeta locates a block and carries its statistics, so aggregates over
// whole blocks need no decoding.
type BlockMeta struct {
	Offset           int64
	Length           uint32
	MinTime, MaxTime int64
	Count            int
	Min, Max, Sum    point.Value // same kind as the series for float/int/uint; zero Value for bool/string
}

// appendSeriesEntry appends the index entry of one series.
func appendSeriesEntry(dst, key []byte, kind point.Kind, blocks []BlockMeta) []byte {
	dst = encoding.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = append(dst, byte(kind))
	dst = encoding.AppendUvarint(dst, uint64(len(blocks)))
	for i := range blocks {
		b := &blocks[i]
		dst = encoding.AppendUvarint(dst, uint64(b.Length))
		if i == 0 {
			dst = encoding.AppendVarint(dst, b.MinTime)
		} else {
			dst = encoding.AppendUvarint(dst, uint64(b.MinTime-blocks[i-1].MaxTime))
		}
		dst = encoding.AppendUvarint(dst, uint64(b.MaxTime-b.MinTime))
		dst = encoding.AppendUvarint(dst, uint64(b.Count))
		switch kind {
		case point.KindFloat:
			dst = binary.LittleEndian.AppendUint64(dst, b.Min.Bits())
			dst = binary.LittleEndian.AppendUint64(dst, b.Max.Bits())
			dst = binary.LittleEndian.AppendUint64(dst, b.Sum.Bits())
		case point.KindInt:
			dst = encoding.AppendVarint(dst, b.Min.Int())
			dst = encoding.AppendVarint(dst, b.Max.Int())
			dst = encoding.AppendVarint(dst, b.Sum.Int())
		case point.KindUint:
			dst = encoding.AppendUvarint(dst, b.Min.Uint())
			dst = encoding.AppendUvarint(dst, b.Max.Uint())
			dst = encoding.AppendUvarint(dst, b.Sum.Uint())
		}
	}
	return dst
}

// Smallest encodings, used to bound counts before allocating.
const (
	minBlockEntry  = 4                             // length, minTime, span, count
	minSeriesEntry = 1 + 1 + 1 + 1 + minBlockEntry // keyLen, key byte, kind, nBlocks, a block
	minBlockLen    = 6                             // flags, rawLen, payload byte, crc32c
)

// parseIndex decodes the raw index. Block offsets are assigned from
// dataStart, and the blocks must end exactly at dataEnd.
func parseIndex(raw []byte, dataStart, dataEnd int64) ([]SeriesIndex, error) {
	c := decbuf.New(raw)
	n := c.Count("series count", minSeriesEntry)
	if c.Err() != nil {
		return nil, c.Err()
	}
	series := make([]SeriesIndex, n)
	var blocks []BlockMeta
	starts := make([]int, n)
	off := dataStart
	var prevKey []byte
	for i := range series {
		s := &series[i]
		s.Key = c.UvarintBytes("key")
		kb := c.Byte("kind")
		nb := c.Uvarint("block count")
		if c.Err() != nil {
			return nil, fmt.Errorf("series %d: %w", i, c.Err())
		}
		if len(s.Key) == 0 {
			return nil, fmt.Errorf("series %d: empty key", i)
		}
		if i > 0 && string(s.Key) <= string(prevKey) {
			return nil, fmt.Errorf("series %d: key %q not after %q", i, s.Key, prevKey)
		}
		prevKey = s.Key
		s.Kind = point.Kind(kb)
		if !s.Kind.Valid() {
			return nil, fmt.Errorf("series %q: kind %d", s.Key, kb)
		}
		if nb == 0 || nb > uint64(c.Len()/minBlockEntry) {
			return nil, fmt.Errorf("series %q: %d blocks in %d bytes", s.Key, nb, c.Len())
		}
		starts[i] = len(blocks)
		for j := range int(nb) {
			bm, err := parseBlockEntry(&c, s.Kind, j, blocks[starts[i]:])
			if err != nil {
				return nil, fmt.Errorf("series %q block %d: %w", s.Key, j, err)
			}
			if int64(bm.Length) > dataEnd-off {
				return nil, fmt.Errorf("series %q block %d: %d bytes at %d overrun the data ending at %d", s.Key, j, bm.Length, off, dataEnd)
			}
			bm.Offset = off
			off += int64(bm.Length)
			blocks = append(blocks, bm)
		}
	}
	if c.Len() != 0 {
		return nil, fmt.Errorf("%d bytes after the last series", c.Len())
	}
	if off != dataEnd {
		return nil, fmt.Errorf("blocks end at %d, data at %d", off, dataEnd)
	}
	for i := range series {
		end := len(blocks)
		if i+1 < len(series) {
			end = starts[i+1]
		}
		series[i].Blocks = blocks[starts[i]:end:end]
	}
	return series, nil
}

func parseBlockEntry(c *decbuf.Decbuf, kind point.Kind, j int, prev []BlockMeta) (BlockMeta, error) {
	var bm BlockMeta
	length := c.Uvarint("length")
	if j == 0 {
		bm.MinTime = c.Varint("min time")
	} else {
		gap := c.Uvarint("time gap")
		last := prev[j-1].MaxTime
		bm.MinTime = last + int64(gap)
		if c.Err() == nil && (gap == 0 || bm.MinTime <= last) {
			return bm, fmt.Errorf("starts at %d, not after %d", bm.MinTime, last)
		}
	}
	span := c.Uvarint("span")
	count := c.Uvarint("count")
	bm.MaxTime = bm.MinTime + int64(span)
	var mn, mx, sum uint64
	switch kind {
	case point.KindFloat:
		mn, mx, sum = c.Uint64("min"), c.Uint64("max"), c.Uint64("sum")
	case point.KindInt:
		mn, mx, sum = uint64(c.Varint("min")), uint64(c.Varint("max")), uint64(c.Varint("sum"))
	case point.KindUint:
		mn, mx, sum = c.Uvarint("min"), c.Uvarint("max"), c.Uvarint("sum")
	}
	if c.Err() != nil {
		return bm, c.Err()
	}
	switch {
	case length < minBlockLen || length > math.MaxUint32:
		return bm, fmt.Errorf("length %d", length)
	case count == 0 || count > MaxBlockSamples:
		return bm, fmt.Errorf("count %d", count)
	case bm.MaxTime < bm.MinTime || span < count-1:
		return bm, fmt.Errorf("span %d for %d samples from %d", span, count, bm.MinTime)
	}
	bm.Length = uint32(length)
	bm.Count = int(count)
	if kind.Numeric() {
		bm.Min, bm.Max, bm.Sum = point.FromBits(kind, mn), point.FromBits(kind, mx), point.FromBits(kind, sum)
	}
	return bm, nil
}

// bloomStep derives the probe stride from a key's hash (double hashing).
func bloomStep(h uint64) uint64 {
	h ^= h >> 31
	h *= 0x7fb5d329728ea185
	h ^= h >> 27
	return h | 1
}

// appendBloom appends the bloom section for keys with the given hashes.
func appendBloom(dst []byte, hashes []uint64) []byte {
	m, k := bloom.EstimateParameters(uint(max(len(hashes), 1)), bloomFPRate)
	k = min(max(k, 1), maxBloomK)
	m = min(max(m, 64), math.MaxUint32)
	f := bloom.New(m, k)
	bs := f.BitSet()
	for _, h := range hashes {
		g := bloomStep(h)
		for i := range uint64(k) {
			bs.Set(uint((h + i*g) % uint64(m)))
		}
	}
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(m))
	dst = append(dst, byte(k))
	words := bs.Words()
	for i := range (m + 63) / 64 {
		var w uint64
		if int(i) < len(words) {
			w = words[i]
		}
		dst = binary.LittleEndian.AppendUint64(dst, w)
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

var errBloomSize = errors.New("bloom filter size")

// parseBloom checks and decodes the bloom section. The sizes are validated
// against the section's length before anything is allocated.
func parseBloom(sec []byte) (*bloom.BloomFilter, error) {
	if len(sec) < 4+1+8+4 {
		return nil, fmt.Errorf("%w: section of %d bytes", errBloomSize, len(sec))
	}
	body := sec[:len(sec)-4]
	if want, got := binary.LittleEndian.Uint32(sec[len(body):]), crc32.Checksum(body, castagnoli); want != got {
		return nil, fmt.Errorf("bloom filter: %w: stored %08x, computed %08x", ErrChecksum, want, got)
	}
	m := uint64(binary.LittleEndian.Uint32(body))
	k := uint(body[4])
	if m == 0 || k == 0 || k > maxBloomK {
		return nil, fmt.Errorf("%w: m=%d k=%d", errBloomSize, m, k)
	}
	words := (m + 63) / 64
	if uint64(len(body)-5) != 8*words {
		return nil, fmt.Errorf("%w: %d bits in %d bytes", errBloomSize, m, len(body)-5)
	}
	data := make([]uint64, words)
	for i := range data {
		data[i] = binary.LittleEndian.Uint64(body[5+8*i:])
	}
	return bloom.FromWithM(data, uint(m), k), nil
}

// bloomTest reports whether the key with hash h may be in f.
func bloomTest(f *bloom.BloomFilter, h uint64) bool {
	var locs [maxBloomK]uint64
	k := f.K()
	g := bloomStep(h)
	for i := range uint64(k) {
		locs[i] = h + i*g
	}
	return f.TestLocations(locs[:k])
}

func keyHash(key []byte) uint64 { return xxhash.Sum64(key) }

// footer holds the section offsets recorded at the end of the file.
type footer struct {
	indexOff, indexLen, bloomOff, bloomLen uint64
}

func appendFooter(dst []byte, f footer) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint64(dst, f.indexOff)
	dst = binary.LittleEndian.AppendUint64(dst, f.indexLen)
	dst = binary.LittleEndian.AppendUint64(dst, f.bloomOff)
	dst = binary.LittleEndian.AppendUint64(dst, f.bloomLen)
	dst = append(dst, formatVersion)
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
	return append(dst, magic...)
}

// parseFooter checks magic, then version, then checksum. The returned error
// is the cause only; the caller adds the path and offset.
func parseFooter(b []byte) (footer, error) {
	if string(b[footerLen-4:]) != magic {
		return footer{}, fmt.Errorf("footer: %w: %q", ErrMagic, b[footerLen-4:])
	}
	if v := b[32]; v != formatVersion {
		return footer{}, fmt.Errorf("footer: %w %d", ErrVersion, v)
	}
	if want, got := binary.LittleEndian.Uint32(b[33:]), crc32.Checksum(b[:33], castagnoli); want != got {
		return footer{}, fmt.Errorf("footer: %w: stored %08x, computed %08x", ErrChecksum, want, got)
	}
	return footer{
		indexOff: binary.LittleEndian.Uint64(b[0:]),
		indexLen: binary.LittleEndian.Uint64(b[8:]),
		bloomOff: binary.LittleEndian.Uint64(b[16:]),
		bloomLen: binary.LittleEndian.Uint64(b[24:]),
	}, nil
}
