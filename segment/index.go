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
	"github.com/stratadb/strata/internal/xsum"
)

// SeriesIndex is the index entry of one series: its key, kind and blocks in
// time order. It belongs to the Reader and must not be modified.
type SeriesIndex struct {
	Key    []byte
	Kind   point.Kind
	Blocks []BlockMeta
	// Rollups are the series' rollup blocks (format 4), by bucket start.
	// A series may have rollups and no Blocks.
	Rollups []RollupMeta
}

// MinTime returns the time of the series' first sample or bucket start.
func (s *SeriesIndex) MinTime() int64 {
	if len(s.Rollups) > 0 && (len(s.Blocks) == 0 || s.Rollups[0].MinTime < s.Blocks[0].MinTime) {
		return s.Rollups[0].MinTime
	}
	return s.Blocks[0].MinTime
}

// MaxTime returns the time of the series' last sample (or a bucket's last
// sample).
func (s *SeriesIndex) MaxTime() int64 {
	t := int64(math.MinInt64)
	for i := range s.Rollups {
		t = max(t, s.Rollups[i].MaxTime)
	}
	if len(s.Blocks) > 0 {
		t = max(t, s.Blocks[len(s.Blocks)-1].MaxTime)
	}
	return t
}

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
	// Min and Max are of the series' kind for float, int and uint blocks;
	// zero Values for bool and string. Sum is the int or uint sum
	// (wrapped); for floats it is the zero Value, except in format 1 and 2
	// files, where it is the sum in time order and Partial is nil.
	Min, Max, Sum point.Value
	// Partial is the exact sum of a float block (format 3), encoded as
	// package internal/xsum does: DecodeAcc it and merge it with other
	// partial sums. It aliases the Reader's index; nil for other kinds.
	Partial []byte

	inline []byte // raw block held in the index (format 2)
}

// FloatSum returns the sum of a float block: the exact sum correctly
// rounded, or in a format 1 or 2 file the sum in time order.
func (b *BlockMeta) FloatSum() float64 {
	if b.Partial == nil {
		return b.Sum.Float()
	}
	a, _, err := xsum.DecodeAcc(b.Partial)
	if err != nil {
		return math.NaN() // validated when the index was read
	}
	return a.Float64()
}

// Inline reports whether the block is held in the index rather than stored
// on its own. An inline block's Offset is that of the index section and its
// Length that of its raw form; reading it does no I/O.
func (b *BlockMeta) Inline() bool { return b.inline != nil }

// appendSeriesEntry appends the index entry of one series.
func appendSeriesEntry(dst, key []byte, kind point.Kind, rollups []RollupMeta, blocks []BlockMeta) []byte {
	dst = encoding.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	if len(rollups) > 0 {
		kb := byte(kind) | kindHasRollups
		if rollups[0].Summary != nil {
			kb |= kindRollupSummaries
		}
		hours := hasHours(rollups)
		if hours {
			kb |= kindRollupHours
		}
		dst = append(dst, kb)
		dst = appendRollupEntries(dst, kind, rollups, hours)
	} else {
		dst = append(dst, byte(kind))
	}
	dst = encoding.AppendUvarint(dst, uint64(len(blocks)))
	for i := range blocks {
		b := &blocks[i]
		if b.inline != nil {
			dst = append(dst, 0)
		} else {
			dst = encoding.AppendUvarint(dst, uint64(b.Length))
		}
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
			dst = append(dst, b.Partial...)
		case point.KindInt:
			dst = encoding.AppendVarint(dst, b.Min.Int())
			dst = encoding.AppendVarint(dst, b.Max.Int())
			dst = encoding.AppendVarint(dst, b.Sum.Int())
		case point.KindUint:
			dst = encoding.AppendUvarint(dst, b.Min.Uint())
			dst = encoding.AppendUvarint(dst, b.Max.Uint())
			dst = encoding.AppendUvarint(dst, b.Sum.Uint())
		}
		if b.inline != nil {
			dst = encoding.AppendUvarint(dst, uint64(len(b.inline)))
			dst = append(dst, b.inline...)
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

// indexTable locates the series entries of a raw index without holding
// them decoded: a series costs 12 bytes here plus its entry in the raw
// index. Series are decoded on demand by entry.
type indexTable struct {
	raw     []byte
	version byte
	indexAt int64    // file offset of the index section, the Offset of inline blocks
	offs    []uint32 // start of series i's entry in raw
	data    []int64  // file offset of series i's first stored block

	minTime, maxTime int64 // over all series; 0 when there are none
	samples          int64
}

func (t *indexTable) len() int { return len(t.offs) }

// firstLast returns the first and the last key, nil when there are none.
func (t *indexTable) firstLast() (first, last []byte) {
	if n := t.len(); n > 0 {
		return t.key(0), t.key(n - 1)
	}
	return nil, nil
}

// key returns the key of series i without decoding the rest of its entry.
func (t *indexTable) key(i int) []byte {
	b := t.raw[t.offs[i]:]
	n, rest, _ := encoding.Uvarint(b) // validated by parseIndex
	return rest[:n:n]
}

// entry decodes series i into a fresh SeriesIndex.
func (t *indexTable) entry(i int) *SeriesIndex {
	// A series and its first block in one allocation: most series of a
	// high-cardinality segment have one block.
	e := new(struct {
		s     SeriesIndex
		first [1]BlockMeta
	})
	s := &e.s
	c := decbuf.New(t.raw[t.offs[i]:])
	// The entry was validated by parseIndex, so this cannot fail.
	if _, err := parseEntry(&c, t.version, t.data[i], math.MaxInt64, t.indexAt, s, e.first[:0]); err != nil {
		panic(fmt.Sprintf("segment: validated index entry %d: %v", i, err))
	}
	return s
}

// entryInto decodes series i into s, reusing the storage of s.Blocks.
func (t *indexTable) entryInto(i int, s *SeriesIndex) {
	c := decbuf.New(t.raw[t.offs[i]:])
	blocks := s.Blocks[:0]
	if blocks == nil {
		blocks = make([]BlockMeta, 0, 1)
	}
	// The entry was validated by parseIndex, so this cannot fail.
	if _, err := parseEntry(&c, t.version, t.data[i], math.MaxInt64, t.indexAt, s, blocks); err != nil {
		panic(fmt.Sprintf("segment: validated index entry %d: %v", i, err))
	}
}

// parseIndex validates the raw index of a file of the given format version
// and returns its table. Stored block offsets are assigned from dataStart,
// and the stored blocks must end exactly at dataEnd, where the index
// section starts.
func parseIndex(raw []byte, version byte, dataStart, dataEnd int64) (*indexTable, error) {
	if uint64(len(raw)) > math.MaxUint32 {
		return nil, fmt.Errorf("index of %d bytes", len(raw))
	}
	c := decbuf.New(raw)
	n := c.Count("series count", minSeriesEntry)
	if c.Err() != nil {
		return nil, c.Err()
	}
	t := &indexTable{raw: raw, version: version, indexAt: dataEnd, offs: make([]uint32, n), data: make([]int64, n)}
	off := dataStart
	var prevKey []byte
	var s SeriesIndex
	var scratch []BlockMeta
	for i := range t.offs {
		t.offs[i] = uint32(c.Offset())
		t.data[i] = off
		s.Blocks = scratch[:0]
		next, err := parseEntry(&c, version, off, dataEnd, dataEnd, &s, scratch[:0])
		if err != nil {
			if s.Key != nil {
				return nil, fmt.Errorf("series %q: %w", s.Key, err)
			}
			return nil, fmt.Errorf("series %d: %w", i, err)
		}
		scratch = s.Blocks
		first, last := s.MinTime(), s.MaxTime()
		if i == 0 {
			t.minTime, t.maxTime = first, last
		}
		t.minTime, t.maxTime = min(t.minTime, first), max(t.maxTime, last)
		for j := range s.Blocks {
			t.samples += int64(s.Blocks[j].Count)
		}
		for j := range s.Rollups {
			t.samples += int64(s.Rollups[j].Count)
		}
		if i > 0 && string(s.Key) <= string(prevKey) {
			return nil, fmt.Errorf("series %d: key %q not after %q", i, s.Key, prevKey)
		}
		prevKey = s.Key
		off = next
	}
	if c.Len() != 0 {
		return nil, fmt.Errorf("%d bytes after the last series", c.Len())
	}
	if off != dataEnd {
		return nil, fmt.Errorf("blocks end at %d, data at %d", off, dataEnd)
	}
	return t, nil
}

// parseEntry decodes one series entry into s, appending its blocks to
// blocks (a new slice when nil), and returns where the next series' stored
// blocks start. Stored blocks must not pass dataEnd; inline blocks get
// Offset inlineAt.
func parseEntry(c *decbuf.Decbuf, version byte, off, dataEnd, inlineAt int64, s *SeriesIndex, blocks []BlockMeta) (int64, error) {
	s.Key = c.UvarintBytes("key")
	kb := c.Byte("kind")
	if c.Err() != nil {
		return 0, c.Err()
	}
	if len(s.Key) == 0 {
		return 0, errors.New("empty key")
	}
	s.Rollups = s.Rollups[:0]
	hasRollups := version >= 4 && kb&kindHasRollups != 0
	summaries := hasRollups && kb&kindRollupSummaries != 0
	hours := summaries && kb&kindRollupHours != 0
	if hasRollups {
		kb &^= kindHasRollups | kindRollupSummaries
	}
	if hours {
		kb &^= kindRollupHours
	}
	s.Kind = point.Kind(kb)
	if !s.Kind.Valid() {
		return 0, fmt.Errorf("kind %d", kb)
	}
	if hasRollups {
		var err error
		if off, err = parseRollupEntries(c, s.Kind, summaries, hours, off, dataEnd, s); err != nil {
			return 0, err
		}
	}
	nb := c.Uvarint("block count")
	if c.Err() != nil {
		return 0, c.Err()
	}
	if (nb == 0 && !hasRollups) || nb > uint64(c.Len()/minBlockEntry) {
		return 0, fmt.Errorf("%d blocks in %d bytes", nb, c.Len())
	}
	if blocks == nil || (len(blocks) == 0 && uint64(cap(blocks)) < nb && cap(blocks) < 4) {
		blocks = make([]BlockMeta, 0, nb)
	}
	for j := range int(nb) {
		bm, err := parseBlockEntry(c, version, s.Kind, j, blocks)
		if err != nil {
			s.Blocks = blocks
			return 0, fmt.Errorf("block %d: %w", j, err)
		}
		if bm.inline != nil {
			bm.Offset = inlineAt
		} else {
			if int64(bm.Length) > dataEnd-off {
				s.Blocks = blocks
				return 0, fmt.Errorf("block %d: %d bytes at %d overrun the data ending at %d", j, bm.Length, off, dataEnd)
			}
			bm.Offset = off
			off += int64(bm.Length)
		}
		blocks = append(blocks, bm)
	}
	s.Blocks = blocks
	return off, nil
}

// parseBlockEntry decodes block entry j of a series whose earlier blocks
// are prev.
func parseBlockEntry(c *decbuf.Decbuf, version byte, kind point.Kind, j int, prev []BlockMeta) (BlockMeta, error) {
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
	inline := version >= 2 && length == 0
	var mn, mx, sum uint64
	switch kind {
	case point.KindFloat:
		mn, mx = c.Uint64("min"), c.Uint64("max")
		if version < exactSumVersion {
			sum = c.Uint64("sum")
		} else if c.Err() == nil {
			n, err := xsum.EncodedLen(c.Rest())
			if err != nil {
				return bm, fmt.Errorf("sum: %w", err)
			}
			bm.Partial = c.Bytes(uint64(n), "sum")
		}
	case point.KindInt:
		mn, mx, sum = uint64(c.Varint("min")), uint64(c.Varint("max")), uint64(c.Varint("sum"))
	case point.KindUint:
		mn, mx, sum = c.Uvarint("min"), c.Uvarint("max"), c.Uvarint("sum")
	}
	if inline {
		bm.inline = c.UvarintBytes("inline block")
	}
	if c.Err() != nil {
		return bm, c.Err()
	}
	switch {
	case !inline && (length < minBlockLen || length > math.MaxUint32):
		return bm, fmt.Errorf("length %d", length)
	case count == 0 || count > MaxBlockSamples:
		return bm, fmt.Errorf("count %d", count)
	case bm.MaxTime < bm.MinTime || span < count-1:
		return bm, fmt.Errorf("span %d for %d samples from %d", span, count, bm.MinTime)
	}
	bm.Length = uint32(length)
	bm.Count = int(count)
	if inline {
		// Checked like a stored block when it is read.
		bm.Length = uint32(len(bm.inline))
		if len(bm.inline) < 3 || len(bm.inline) > maxBlockRaw(kind, bm.Count) {
			return bm, fmt.Errorf("inline block of %d bytes for %d samples", len(bm.inline), count)
		}
	}
	if kind.Numeric() {
		bm.Min, bm.Max = point.FromBits(kind, mn), point.FromBits(kind, mx)
		if bm.Partial == nil {
			bm.Sum = point.FromBits(kind, sum)
		}
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

// appendBloom appends the bloom section for keys with the given hashes
// and returns it with the filter it holds, built as parseBloom builds it
// from the section.
func appendBloom(dst []byte, hashes []uint64) ([]byte, *bloom.BloomFilter) {
	m, k := bloomParams(len(hashes))
	words := make([]uint64, (m+63)/64)
	for _, h := range hashes {
		bloomSet(words, m, k, h)
	}
	return appendBloomWords(dst, words, m, k)
}

// bloomParams returns the bits and probes of the bloom filter of n keys.
func bloomParams(n int) (m, k uint) {
	m, k = bloom.EstimateParameters(uint(max(n, 1)), bloomFPRate)
	k = min(max(k, 1), maxBloomK)
	m = min(max(m, 64), math.MaxUint32)
	return m, k
}

// bloomSet sets the bits of the key hashed h in words, the (m+63)/64
// words of a filter of m bits and k probes.
func bloomSet(words []uint64, m, k uint, h uint64) {
	g := bloomStep(h)
	for i := range uint64(k) {
		j := (h + i*g) % uint64(m)
		words[j/64] |= 1 << (j % 64)
	}
}

// appendBloomWords appends the bloom section of the filter words of m
// bits and k probes, and returns it with the filter, which holds words.
func appendBloomWords(dst []byte, words []uint64, m, k uint) ([]byte, *bloom.BloomFilter) {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(m))
	dst = append(dst, byte(k))
	for _, w := range words {
		dst = binary.LittleEndian.AppendUint64(dst, w)
	}
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
	return dst, bloom.FromWithM(words, m, k)
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
func parseFooter(b []byte, version byte) (footer, error) {
	if string(b[footerLen-4:]) != magic {
		return footer{}, fmt.Errorf("footer: %w: %q", ErrMagic, b[footerLen-4:])
	}
	if v := b[32]; v != version {
		return footer{}, fmt.Errorf("footer: %w %d (header says %d)", ErrVersion, v, version)
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
