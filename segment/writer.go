// Package segment implements strata's immutable segment files: the on-disk
// home of samples once they are flushed from the memtable or produced by a
// compaction. A Writer streams series in key order into a new file and
// publishes it atomically; a Reader loads the index and bloom filter into
// memory, decodes a series' index entry when asked for it, and reads
// stored blocks on demand with positional reads (inline blocks, the short
// tails of series, are read from the index in memory).
//
// # File format
//
// All fixed-width integers are little-endian. uvarint is the varint of
// encoding/binary; varint is the zigzag varint (encoding.AppendVarint).
// crc32c is CRC-32 with the Castagnoli polynomial.
//
//	+------------------------------+
//	| header                       |  magic "STSG" (4) | version (1): 4
//	|                              |  (readers also read versions 1 to 3:
//	|                              |  version 3 is version 4 without
//	|                              |  rollup blocks, version 2 is version 3
//	|                              |  with a float block's sum as 8
//	|                              |  IEEE-754 bytes, version 1 is version
//	|                              |  2 without inline blocks)
//	+------------------------------+
//	| block                        |  the stored blocks of series 0 in time
//	| block                        |  order, then those of series 1, ...
//	| ...                          |  Stored blocks are contiguous: each
//	|                              |  starts where the previous one ends
//	+------------------------------+  (the first at byte 5)
//	| index section                |
//	+------------------------------+
//	| bloom section                |
//	+------------------------------+
//	| footer (41 bytes)            |
//	+------------------------------+
//
// Block, as stored (the index section uses the same framing):
//
//	+-----------+----------------+--------------------+------------+
//	| flags (1) | rawLen uvarint | payload            | crc32c (4) |
//	+-----------+----------------+--------------------+------------+
//
//	flags    bit 0 set: payload is zstd frames, one after the other, that
//	         decode to the rawLen bytes of the raw block (a block is one
//	         frame; a large index is the series count's frame, then the
//	         entries' frame, so that it can be compressed as it is written);
//	         clear: payload is the raw block itself and len(payload) ==
//	         rawLen. Other bits are zero.
//	rawLen   at most 256*len(payload) when compressed; for a block at most
//	         64+20*count bytes for numeric and bool kinds, MaxBlockRaw (64
//	         MiB) for strings; for the index at most 1 GiB.
//	crc32c   of flags, rawLen and payload.
//
// Raw block:
//
//	+----------+---------------+---------------+-------------------+--------+
//	| kind (1) | count uvarint | tsLen uvarint | timestamps (tsLen)| values |
//	+----------+---------------+---------------+-------------------+--------+
//
//	kind        point.Kind of the series (1 float .. 5 string)
//	count       number of samples, 1..MaxBlockSamples
//	timestamps  encoding.AppendTimestamps: delta of delta, bit-packed
//	values      the rest of the block, by kind:
//	              float   codec (1): 0 = Gorilla XOR (encoding.AppendFloats),
//	                      1 = decimal (encoding.AppendDecimal); then its bytes
//	              int     encoding.AppendInts (zigzag delta, bit-packed)
//	              uint    encoding.AppendInts on the uint64 values
//	              bool    encoding.AppendBools (one bit each)
//	              string  encoding.AppendStrings (uvarint length + bytes)
//
// Column codecs (package internal/encoding, whose files draw each in full;
// bits are written most significant first, zigzag maps 0,-1,1,-2 to 0,1,2,3,
// differences wrap in 64 bits):
//
//	packed      chunks of up to 128 values: | width (1) | ceil(c*width/8) bytes |,
//	            c values of width bits each, width = bit length of the largest
//	timestamps  | zigzag(t0) uvarint | zigzag(t1-t0) uvarint | packed zigzag(dod) |
//	            where dod(i) = (t(i)-t(i-1)) - (t(i-1)-t(i-2)), i >= 2
//	ints        | zigzag(v0) uvarint | packed zigzag(v(i)-v(i-1)) |
//	decimal     | scale (1) 0..6 | ints of k(i) | with v(i) = float64(k(i)) / 10^scale exactly
//	Gorilla     v0 in 64 bits; then per value x = v(i) XOR v(i-1): '0' if x == 0;
//	            '10' + bits of x in the previous window; or '11' + leading zeros
//	            (5 bits, capped at 31) + (significant bits - 1) (6 bits) + those
//	            bits; padded to a byte
//	bools       one bit per value, padded with zero bits to a byte
//	strings     per value: | len uvarint | bytes |
//
// Index section, raw form (framed and optionally zstd-compressed as a block):
//
//	+-----------------+-------------------------------------------------+
//	| nSeries uvarint | series entry x nSeries, keys strictly increasing |
//	+-----------------+-------------------------------------------------+
//
//	series entry (format 4 adds an optional rollup section: rollup.go
//	draws it, with the rollup block):
//	+----------------+-----+----------+-----------------+-----------------------+
//	| keyLen uvarint | key | kind (1) | nBlocks uvarint | block entry x nBlocks |
//	+----------------+-----+----------+-----------------+-----------------------+
//
//	block entry, stored (its offset is implied: stored blocks are contiguous):
//	+----------------+---------+---------------+----------------+-------+
//	| length uvarint | minTime | span uvarint  | count uvarint  | stats |
//	+----------------+---------+---------------+----------------+-------+
//
//	block entry, inline (version 2): the raw block itself follows, unframed
//	(the index's checksum covers it); rawLen is at least 3
//	+-------+---------+--------------+---------------+-------+----------------+-----+
//	| 0 (1) | minTime | span uvarint | count uvarint | stats | rawLen uvarint | raw |
//	+-------+---------+--------------+---------------+-------+----------------+-----+
//
//	length   bytes of the stored block, crc32c included (at least 6)
//	minTime  first block of a series: varint; later blocks: uvarint gap
//	         from the previous block's MaxTime (at least 1)
//	span     MaxTime - MinTime
//	stats    float: Min, Max as IEEE-754 bits (8 bytes each), then the
//	         exact sum of the block's values in the encoding of package
//	         internal/xsum (version, flags, offset, length, magnitude:
//	         about 12 bytes), from which any grouping of blocks and
//	         samples gives the same correctly rounded sum;
//	         int: varint Min, Max, Sum; uint: uvarint Min, Max, Sum;
//	         bool, string: nothing. Min and Max follow Go's builtin min
//	         and max (-0 is below +0, a NaN wins); integer sums wrap. A
//	         NaN Min or Max is stored as math.NaN(). (Version 1 and 2:
//	         float Sum as IEEE-754 bits, added in time order.)
//
// Bloom section, over the series keys (about 1% false positives):
//
//	+---------+-------+-----------------------------+------------+
//	| m (u32) | k (1) | ceil(m/64) words (u64 each) | crc32c (4) |
//	+---------+-------+-----------------------------+------------+
//
//	m bits (at least 64), k probes (1..30). A key sets bits (h + i*g) mod m
//	for i in 0..k-1 (64-bit wrapping arithmetic), where h = xxhash64(key)
//	and g = bloomStep(h): x = h ^ h>>31; x *= 0x7fb5d329728ea185;
//	x ^= x>>27; g = x | 1. Bit j is bit j%64 of word j/64 (the layout of
//	bits-and-blooms/bitset).
//
// Footer:
//
//	+---------------+---------------+---------------+---------------+-------------+------------+-----------+
//	| indexOff (8)  | indexLen (8)  | bloomOff (8)  | bloomLen (8)  | version (1) | crc32c (4) | magic (4) |
//	+---------------+---------------+---------------+---------------+-------------+------------+-----------+
//
//	indexOff is where the blocks end, bloomOff = indexOff+indexLen and the
//	footer starts at bloomOff+bloomLen. crc32c covers the 33 bytes before it.
//
// Readers check the header's magic and version, then the footer's magic,
// version (equal to the header's) and checksum, in that order, each failure with its own error (ErrMagic, ErrVersion,
// ErrChecksum), all wrapped in a *base.CorruptionError naming the file and
// offset, which matches base.ErrCorrupt.
//
// # Compatibility
//
// This package is a building block of package engine, public so that the
// layout of the storage engine can be read and tested piece by piece. Its
// API has no compatibility promise and its signatures use types internal to
// strata (vfs.FS, point.Kind, ...): programs use package engine. What is
// stable is the durable format it documents.
package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"path/filepath"
	"slices"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/vfs"
	"github.com/stratadb/strata/internal/xsum"
)

// These constants are part of the durable format and must not be changed.
const (
	magic         = "STSG"
	formatVersion = 4
	// minReadVersion is the oldest format a Reader reads. Format 1 has no
	// inline blocks; formats 1 and 2 have no exact float sums; formats 1
	// to 3 have no rollup blocks (rollup.go).
	minReadVersion = 1
	// exactSumVersion is the first format whose float blocks carry exact
	// sums.
	exactSumVersion = 3
	headerLen       = 5
	footerLen       = 41

	flagZstd = 1 << 0

	floatGorilla = 0
	floatDecimal = 1

	// MaxBlockSamples is the most samples a block may hold.
	MaxBlockSamples = 1 << 16
	// MaxBlockRaw is the most bytes a raw block may hold.
	MaxBlockRaw = 64 << 20
	// maxRatio bounds rawLen against the stored payload of a compressed
	// block or index, so a small file cannot make a reader allocate much.
	maxRatio = 256
	// maxSectionRaw bounds the raw index section.
	maxSectionRaw = 1 << 30
	maxBloomK     = 30
)

// Writer defaults and limits (not part of the format).
const (
	// DefaultBlockSamples is the default of WriterOptions.BlockSamples.
	DefaultBlockSamples = 1000
	// MaxStringLen is the longest string value a Writer accepts.
	MaxStringLen = 32 << 20
	// blockTargetBytes cuts a string block early once its values hold this
	// many bytes.
	blockTargetBytes = 1 << 20
	// defaultInlineBytes is the default of WriterOptions.InlineBytes.
	defaultInlineBytes = 128
	// inlineIndexLimit stops inlining once the raw index of a segment
	// holds this many bytes, keeping the index well below maxSectionRaw.
	inlineIndexLimit = 256 << 20
	// writeBufferSize is how much output the Writer buffers between writes.
	writeBufferSize = 1 << 20
	bloomFPRate     = 0.01
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Causes of corruption errors, wrapped in a *base.CorruptionError.
var (
	ErrMagic    = errors.New("bad magic")
	ErrVersion  = errors.New("unsupported format version")
	ErrChecksum = errors.New("checksum mismatch")
)

// errFinished is returned by a Writer used after Finish or Abort.
var errFinished = fmt.Errorf("%w: segment: writer finished", base.ErrClosed)

// WriterOptions configures a Writer. The zero value is valid.
type WriterOptions struct {
	FS           vfs.FS // nil = vfs.Default
	BlockSamples int    // most samples per block; default 1000, at most MaxBlockSamples
	// InlineBytes: a block whose raw form takes at most this many bytes is
	// kept in the index instead of being stored on its own, which saves
	// its framing and lets it compress with its neighbours (the
	// short series of a high-cardinality flush). 0 means 128; negative
	// means never.
	InlineBytes int
	// Series, when known, is about how many series the segment will hold:
	// the buffers that grow with them (the key hashes of the bloom filter,
	// the index entries gathered before they are compressed) start at
	// their size instead of doubling their way there, which in a flush of
	// a million series copied hundreds of megabytes. 0 means unknown.
	Series int
}

// Meta describes a finished segment.
type Meta struct {
	Path              string
	Size              int64 // bytes of the file
	MinTime, MaxTime  int64 // over all samples; 0 when there are none
	Series            int
	Samples           int64
	FirstKey, LastKey []byte // nil when there are no series
}

// Writer streams series, in strictly increasing key order, into a new
// segment file. It is not safe for concurrent use.
type Writer struct {
	fs      vfs.FS
	path    string
	tmp     string
	f       vfs.File
	opts    WriterOptions
	enc     *zstd.Encoder
	buf     []byte // output not yet written to f
	flushed int64  // bytes already written to f
	err     error  // sticky I/O error
	done    bool

	// The series being written.
	key      []byte
	kind     point.Kind
	have     bool
	lastTime int64
	times    []int64
	vals     []uint64
	strs     []string
	strBytes int
	blocks   []BlockMeta
	partials []byte // the encoded exact sums of the series' float blocks
	// The series' rollup blocks (rollup.go), and its last bucket's start
	// and last time.
	rollups                      []RollupMeta
	rollupLastStart, rollupLastT int64
	// Raw bytes of the series' inline blocks, and for each block where its
	// bytes end in inline (-1 for a stored block).
	inline      []byte
	inlineEnds  []int
	inlineTotal int64 // raw bytes of every inline block so far

	index    []byte        // raw index entries of finished series, from indexReserve
	indexRaw int64         // raw bytes of the entries already streamed
	zindex   *zstd.Encoder // compresses the entries once they pass indexStreamAt
	zout     *sectionBuf   // what zindex wrote
	hashes   []uint64      // xxhash of every key, for the bloom filter
	meta     Meta
	scratch  blockScratch
	copyBuf  []byte // a block CopyBlock read, before it joins buf
}

// Create starts a segment that will be published at path. It writes to
// path+".tmp"; Finish fsyncs it, renames it to path and fsyncs the directory.
func Create(path string, opts WriterOptions) (*Writer, error) {
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	switch {
	case opts.BlockSamples == 0:
		opts.BlockSamples = DefaultBlockSamples
	case opts.BlockSamples < 0 || opts.BlockSamples > MaxBlockSamples:
		return nil, fmt.Errorf("%w: segment: block size %d not in 1..%d", base.ErrInvalid, opts.BlockSamples, MaxBlockSamples)
	}
	if opts.InlineBytes == 0 {
		opts.InlineBytes = defaultInlineBytes
	}
	enc, err := getEncoder()
	if err != nil {
		return nil, err
	}
	tmp := path + ".tmp"
	f, err := opts.FS.Create(tmp)
	if err != nil {
		putEncoder(enc)
		return nil, fmt.Errorf("segment: %w", err)
	}
	w := &Writer{fs: opts.FS, path: path, tmp: tmp, f: f, opts: opts, enc: enc, index: getIndexBuf()}
	if want := indexReserve + min(opts.Series*64, indexStreamAt) + 64<<10; opts.Series > 0 && cap(w.index) < want {
		w.index = make([]byte, indexReserve, want)
	}
	if opts.Series > 0 {
		w.hashes = make([]uint64, 0, min(opts.Series, maxSeriesHint))
	}
	w.meta.Path = path
	// Room for a full write buffer and the block that passes it: zstd
	// writes each block straight into buf, so a smaller start would be
	// grown by doubling, several times over, in every Writer.
	w.buf = append(make([]byte, 0, writeBufferSize+64<<10), magic...)
	w.buf = append(w.buf, formatVersion)
	return w, nil
}

// Size returns the number of bytes written so far, buffered ones included,
// plus the raw bytes of the inline blocks, which Finish writes with the
// index (compressed: the file may end up smaller). Compaction uses it to
// cut its outputs.
func (w *Writer) Size() int64 { return w.dataSize() + w.inlineTotal }

// indexLen returns the raw bytes of the index entries so far.
func (w *Writer) indexLen() int64 { return w.indexRaw + int64(len(w.index)-indexReserve) }

// dataSize returns the bytes written so far, buffered ones included: the
// offset of the next block.
func (w *Writer) dataSize() int64 { return w.flushed + int64(len(w.buf)) }

// Add appends samples of the series key of the given kind. Keys must be
// strictly increasing across series (bytes.Compare); consecutive calls with
// the same key continue that series, and times must stay strictly
// increasing across them. Every sample must be of kind kind. Add copies what
// it needs. An error for bad arguments wraps base.ErrInvalid and leaves the
// writer as it was; an I/O error is returned by every later call.
func (w *Writer) Add(key []byte, kind point.Kind, samples []point.Sample) error {
	if err := w.check(key, kind, samples); err != nil {
		return err
	}
	if len(samples) == 0 {
		return nil
	}
	if !w.have || !bytes.Equal(key, w.key) {
		if err := w.endSeries(); err != nil {
			return err
		}
		w.key = append(w.key[:0], key...)
		w.kind = kind
		w.have = true
	}
	last := samples[len(samples)-1].Time
	if kind == point.KindString {
		// String blocks are also cut by size, so take samples one by one.
		for i := range samples {
			str := samples[i].Value.Str()
			w.times = append(w.times, samples[i].Time)
			w.strs = append(w.strs, str)
			w.strBytes += len(str)
			if len(w.times) >= w.opts.BlockSamples || w.strBytes >= blockTargetBytes {
				if err := w.flushBlock(); err != nil {
					return err
				}
			}
		}
	} else {
		for len(samples) > 0 {
			c := min(len(samples), w.opts.BlockSamples-len(w.times))
			n := len(w.times)
			w.times = slices.Grow(w.times, c)[:n+c]
			w.vals = slices.Grow(w.vals, c)[:n+c]
			times, vals := w.times[n:], w.vals[n:]
			for i := range times {
				times[i] = samples[i].Time
				vals[i] = samples[i].Value.Bits()
			}
			samples = samples[c:]
			if len(w.times) >= w.opts.BlockSamples {
				if err := w.flushBlock(); err != nil {
					return err
				}
			}
		}
	}
	w.lastTime = last
	return nil
}

// CopyBlock appends block b of series s of segment src to the series key,
// as stored: its bytes are copied, not decoded and encoded again, after
// their checksum is verified. This is how compaction moves a block whose
// samples no other input touches. Block b must be a stored block (not
// Inline) and its samples must all come after those added to key so far;
// samples added before and not yet cut into a block become a block of
// their own first. The same rules as Add apply to key and kind.
func (w *Writer) CopyBlock(key []byte, kind point.Kind, src *Reader, s *SeriesIndex, b int) error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return errFinished
	}
	if b < 0 || b >= len(s.Blocks) || s.Blocks[b].Inline() {
		return fmt.Errorf("%w: segment: copy block %d of %q: not a stored block", base.ErrInvalid, b, s.Key)
	}
	if s.Kind != kind {
		return fmt.Errorf("%w: segment: copy block of %q: kind %v, series has %v", base.ErrInvalid, s.Key, s.Kind, kind)
	}
	if err := w.check(key, kind, nil); err != nil {
		return err
	}
	bm := s.Blocks[b]
	same := w.have && bytes.Equal(key, w.key)
	if same && bm.MinTime <= w.lastTime {
		return fmt.Errorf("%w: segment: copy block of %q from %d: not after %d", base.ErrInvalid, key, bm.MinTime, w.lastTime)
	}
	w.copyBuf = slices.Grow(w.copyBuf[:0], int(bm.Length))[:bm.Length]
	if err := src.readAt(w.copyBuf, bm.Offset); err != nil {
		return err
	}
	if _, _, _, err := checkFrame(w.copyBuf, maxBlockRaw(kind, bm.Count)); err != nil {
		return src.corrupt(bm.Offset, fmt.Errorf("block %d of %q: %w", b, s.Key, err))
	}
	// Only now start or continue the series: a failure above left the
	// writer as it was.
	if !same {
		if err := w.endSeries(); err != nil {
			return err
		}
		w.key = append(w.key[:0], key...)
		w.kind = kind
		w.have = true
	} else if err := w.flushBlock(); err != nil {
		return err
	}
	if kind == point.KindFloat && bm.Partial == nil {
		// A block of an older format has no exact sum: decode it once.
		samples, err := src.ReadBlock(s, b, nil)
		if err != nil {
			return err
		}
		vals := make([]uint64, len(samples))
		for i := range samples {
			vals[i] = samples[i].Value.Bits()
		}
		bm.Partial = w.appendPartial(vals)
		bm.Sum = point.Value{}
	}
	bm.Offset = w.dataSize()
	bm.inline = nil
	w.buf = append(w.buf, w.copyBuf...)
	w.blocks = append(w.blocks, bm)
	w.inlineEnds = append(w.inlineEnds, -1)
	w.meta.Samples += int64(bm.Count)
	w.lastTime = bm.MaxTime
	if len(w.buf) >= writeBufferSize {
		return w.writeOut()
	}
	return nil
}

// check returns the writer's error, if it has failed or finished, or
// validates the arguments of Add without changing the writer.
func (w *Writer) check(key []byte, kind point.Kind, samples []point.Sample) error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return errFinished
	}
	if !kind.Valid() {
		return fmt.Errorf("%w: segment: add %q: kind %d", base.ErrInvalid, key, kind)
	}
	if len(key) == 0 {
		return fmt.Errorf("%w: segment: add: empty series key", base.ErrInvalid)
	}
	same := false
	if w.have {
		switch c := bytes.Compare(key, w.key); {
		case c < 0:
			return fmt.Errorf("%w: segment: add: key %q after %q", base.ErrInvalid, key, w.key)
		case c == 0:
			same = true
			if kind != w.kind {
				return fmt.Errorf("%w: segment: add %q: kind %v, series has %v", base.ErrInvalid, key, kind, w.kind)
			}
		}
	}
	return checkSamples(key, kind, samples, w.lastTime, same)
}

// checkSamples checks that samples are all of kind kind, in strictly
// increasing time order (after prev when havePrev), with strings no longer
// than MaxStringLen.
func checkSamples(key []byte, kind point.Kind, samples []point.Sample, prev int64, havePrev bool) error {
	for i := range samples {
		s := &samples[i]
		if s.Value.Kind() != kind {
			return fmt.Errorf("%w: segment: add %q: sample %d is %v, series is %v", base.ErrInvalid, key, i, s.Value.Kind(), kind)
		}
		if havePrev && s.Time <= prev {
			return fmt.Errorf("%w: segment: add %q: sample %d at %d not after %d", base.ErrInvalid, key, i, s.Time, prev)
		}
		prev, havePrev = s.Time, true
	}
	if kind == point.KindString {
		for i := range samples {
			if l := len(samples[i].Value.Str()); l > MaxStringLen {
				return fmt.Errorf("%w: segment: add %q: sample %d: string of %d bytes exceeds %d", base.ErrInvalid, key, i, l, MaxStringLen)
			}
		}
	}
	return nil
}

// flushBlock encodes the pending samples of the current series as a block.
func (w *Writer) flushBlock() error {
	n := len(w.times)
	if n == 0 {
		return nil
	}
	bm := BlockMeta{
		Offset:  w.dataSize(),
		MinTime: w.times[0],
		MaxTime: w.times[n-1],
		Count:   n,
	}
	raw := appendRawBlock(&w.scratch, w.kind, w.times, w.vals, w.strs)
	if len(raw) <= w.opts.InlineBytes && w.indexLen() < inlineIndexLimit {
		// A small block lives in the index: no framing of its own, and
		// compressed together with its neighbours.
		w.inline = append(w.inline, raw...)
		w.inlineEnds = append(w.inlineEnds, len(w.inline))
		w.inlineTotal += int64(len(raw))
		bm.Length = uint32(len(raw))
	} else {
		start := len(w.buf)
		w.buf = appendFramed(w.buf, w.enc, raw)
		bm.Length = uint32(len(w.buf) - start)
		w.inlineEnds = append(w.inlineEnds, -1)
	}
	bm.Min, bm.Max, bm.Sum = blockStats(w.kind, w.vals)
	if w.kind == point.KindFloat {
		bm.Partial = w.appendPartial(w.vals)
	}
	w.blocks = append(w.blocks, bm)
	w.meta.Samples += int64(n)
	w.times = w.times[:0]
	w.vals = w.vals[:0]
	clear(w.strs)
	w.strs = w.strs[:0]
	w.strBytes = 0
	if len(w.buf) >= writeBufferSize {
		return w.writeOut()
	}
	return nil
}

// endSeries flushes the last block of the current series and records its
// index entry.
func (w *Writer) endSeries() error {
	if !w.have {
		return nil
	}
	if err := w.flushBlock(); err != nil {
		return err
	}
	if len(w.blocks) == 0 && len(w.rollups) == 0 {
		w.have = false
		return nil
	}
	start := 0
	for j, end := range w.inlineEnds {
		if end >= 0 {
			w.blocks[j].inline = w.inline[start:end]
			start = end
		}
	}
	w.index = appendSeriesEntry(w.index, w.key, w.kind, w.rollups, w.blocks)
	if len(w.index)-indexReserve >= indexStreamAt {
		if err := w.streamIndex(); err != nil {
			return err
		}
	}
	w.inline = w.inline[:0]
	w.inlineEnds = w.inlineEnds[:0]
	w.partials = w.partials[:0]
	w.hashes = append(w.hashes, xxhash.Sum64(w.key))
	si := SeriesIndex{Blocks: w.blocks, Rollups: w.rollups}
	first, last := si.MinTime(), si.MaxTime()
	if w.meta.Series == 0 {
		w.meta.MinTime, w.meta.MaxTime = first, last
		w.meta.FirstKey = bytes.Clone(w.key)
	} else {
		w.meta.MinTime = min(w.meta.MinTime, first)
		w.meta.MaxTime = max(w.meta.MaxTime, last)
	}
	w.meta.LastKey = append(w.meta.LastKey[:0], w.key...)
	w.meta.Series++
	w.blocks = w.blocks[:0]
	w.rollups = w.rollups[:0]
	w.have = false
	return nil
}

func (w *Writer) writeOut() error {
	if len(w.buf) == 0 {
		return nil
	}
	if err := w.write(w.buf); err != nil {
		return err
	}
	w.buf = w.buf[:0]
	return nil
}

// write writes b to the file after everything before it.
func (w *Writer) write(b []byte) error {
	n, err := w.f.Write(b)
	w.flushed += int64(n)
	if err != nil {
		w.err = fmt.Errorf("segment: write %s: %w", w.tmp, err)
		return w.err
	}
	return nil
}

// streamIndex hands the index entries gathered so far to the index's
// stream compressor, starting it on first use. A high-cardinality segment's
// raw index runs to hundreds of megabytes; held whole until Finish, it was
// the largest allocation of a flush or compaction of a million series.
// Streamed, only its compressed form (about a tenth) is held.
func (w *Writer) streamIndex() error {
	if w.zindex == nil {
		enc, err := getStreamEncoder()
		if err != nil {
			return err
		}
		w.zout = getSectionBuf()
		enc.Reset(w.zout)
		w.zindex = enc
	}
	entries := w.index[indexReserve:]
	if _, err := w.zindex.Write(entries); err != nil {
		return fmt.Errorf("segment: compress index of %s: %w", w.path, err)
	}
	w.indexRaw += int64(len(entries))
	w.index = w.index[:indexReserve]
	return nil
}

// appendIndex writes the framed index section after the blocks: the
// series count and every entry. A small index is compressed as one frame.
// A streamed one is the count's own frame followed by the entries' frame
// (a zstd decoder reads concatenated frames as one stream), or, when
// compression does not pay or passes the ratio readers accept, the raw
// entries recovered from the stream.
func (w *Writer) appendIndex() error {
	var count [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(count[:], uint64(w.meta.Series))
	rawLen := int64(n) + w.indexLen()
	if rawLen > maxSectionRaw {
		return fmt.Errorf("%w: segment: %s: index of %d bytes exceeds %d", base.ErrInvalid, w.path, rawLen, maxSectionRaw)
	}
	if w.zindex == nil {
		// The series count goes into the room reserved before the entries.
		raw := w.index[indexReserve-n:]
		copy(raw, count[:n])
		w.buf = appendFramed(w.buf, w.enc, raw)
		return nil
	}
	if err := w.streamIndex(); err != nil {
		return err
	}
	if err := w.zindex.Close(); err != nil {
		return fmt.Errorf("segment: compress index of %s: %w", w.path, err)
	}
	head := w.enc.EncodeAll(count[:n], nil)
	c := int64(len(head) + w.zout.n)
	if c >= rawLen || rawLen > maxRatio*c {
		raw := append(make([]byte, 0, rawLen), count[:n]...)
		raw, err := decodeStream(w.zout.bytes(), raw)
		if err != nil {
			return fmt.Errorf("segment: recover index of %s: %w", w.path, err)
		}
		w.buf = appendFramed(w.buf, w.enc, raw)
		return nil
	}
	// The compressed entries go to the file as they are, not through buf.
	start := len(w.buf)
	w.buf = append(w.buf, flagZstd)
	w.buf = binary.AppendUvarint(w.buf, uint64(rawLen))
	w.buf = append(w.buf, head...)
	crc := w.zout.crc(crc32.Checksum(w.buf[start:], castagnoli))
	if err := w.writeOut(); err != nil {
		return err
	}
	for _, chunk := range w.zout.chunks[:w.zout.used] {
		if err := w.write(chunk); err != nil {
			return err
		}
	}
	w.buf = binary.LittleEndian.AppendUint32(w.buf, crc)
	return nil
}

// releaseIndex returns the index buffers and the stream compressor.
func (w *Writer) releaseIndex() {
	putIndexBuf(w.index)
	w.index, w.indexRaw = nil, 0
	if w.zindex != nil {
		w.zindex.Reset(nil)
		streamEncoderPool.Put(w.zindex)
		w.zindex = nil
	}
	if w.zout != nil {
		putSectionBuf(w.zout)
		w.zout = nil
	}
}

// Finish writes the index, bloom filter and footer, fsyncs the file,
// renames it to its final path and fsyncs the directory. On error the
// temporary file is removed.
func (w *Writer) Finish() (Meta, error) {
	if w.err != nil {
		w.Abort()
		return Meta{}, w.err
	}
	if w.done {
		return Meta{}, errFinished
	}
	if err := w.finish(); err != nil {
		w.err = err
		w.Abort()
		return Meta{}, err
	}
	return w.meta, nil
}

func (w *Writer) finish() error {
	if err := w.endSeries(); err != nil {
		return err
	}
	indexOff := w.dataSize()
	if err := w.appendIndex(); err != nil {
		return err
	}
	indexLen := w.dataSize() - indexOff
	bloomOff := indexOff + indexLen
	start := len(w.buf)
	w.buf, _ = appendBloom(w.buf, w.hashes)
	bloomLen := int64(len(w.buf) - start)
	w.buf = appendFooter(w.buf, footer{uint64(indexOff), uint64(indexLen), uint64(bloomOff), uint64(bloomLen)})
	w.releaseIndex()
	w.hashes, w.inlineTotal = nil, 0
	w.meta.Size = w.Size()
	if err := w.writeOut(); err != nil {
		return err
	}
	putEncoder(w.enc)
	w.enc = nil
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("segment: sync %s: %w", w.tmp, err)
	}
	err := w.f.Close()
	w.f = nil
	if err != nil {
		return fmt.Errorf("segment: close %s: %w", w.tmp, err)
	}
	if err := w.fs.Rename(w.tmp, w.path); err != nil {
		return fmt.Errorf("segment: publish %s: %w", w.path, err)
	}
	w.done = true
	if err := w.fs.SyncDir(filepath.Dir(w.path)); err != nil {
		// Not durably published: take it back so no caller relies on it.
		w.fs.Remove(w.path)
		return fmt.Errorf("segment: sync directory of %s: %w", w.path, err)
	}
	return nil
}

// FinishReader finishes the segment as Finish does and returns a Reader of
// it from OpenLazy: the index is read back when a read first needs it. An
// error from opening the published file leaves the file in place.
func (w *Writer) FinishReader() (*Reader, error) {
	meta, err := w.Finish()
	if err != nil {
		return nil, err
	}
	return OpenLazy(w.fs, w.path, meta)
}

// Abort closes and removes the temporary file. It is a no-op after a
// successful Finish.
func (w *Writer) Abort() error {
	if w.enc != nil {
		putEncoder(w.enc)
		w.enc = nil
	}
	if w.done {
		return nil
	}
	w.done = true
	w.releaseIndex()
	if w.err == nil {
		w.err = errFinished
	}
	var err error
	if w.f != nil {
		err = w.f.Close()
		w.f = nil
	}
	if rerr := w.fs.Remove(w.tmp); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("segment: abort %s: %w", w.tmp, err)
	}
	return nil
}

// appendPartial appends the encoded exact sum of float values (as bits) to
// the series' partials and returns it.
func (w *Writer) appendPartial(vals []uint64) []byte {
	start := len(w.partials)
	w.partials = xsum.AppendSum(w.partials, vals)
	// Full slice expression: a later append never writes into it.
	return w.partials[start:len(w.partials):len(w.partials)]
}

// blockStats returns Min, Max and Sum of numeric values of kind k, or zero
// Values for bool and string. The Sum of floats is left zero: their exact
// sum is the block's Partial (appendPartial).
func blockStats(k point.Kind, vals []uint64) (mn, mx, sum point.Value) {
	switch k {
	case point.KindFloat:
		// Two min/max accumulators halve the dependency chains; builtin
		// min and max give the same result in any order.
		lo0 := math.Float64frombits(vals[0])
		lo1, hi0, hi1 := lo0, lo0, lo0
		rest := vals[1:]
		for len(rest) >= 2 {
			a, b := math.Float64frombits(rest[0]), math.Float64frombits(rest[1])
			lo0, lo1 = min(lo0, a), min(lo1, b)
			hi0, hi1 = max(hi0, a), max(hi1, b)
			rest = rest[2:]
		}
		if len(rest) == 1 {
			a := math.Float64frombits(rest[0])
			lo0, hi0 = min(lo0, a), max(hi0, a)
		}
		lo, hi := min(lo0, lo1), max(hi0, hi1)
		// Which NaN payload survives depends on the order of operands,
		// which the compiler may swap: store the canonical NaN.
		if lo != lo {
			lo, hi = math.NaN(), math.NaN()
		}
		return point.Float(lo), point.Float(hi), point.Value{}
	case point.KindInt:
		lo := int64(vals[0])
		hi, s := lo, lo
		for _, b := range vals[1:] {
			v := int64(b)
			lo = min(lo, v)
			hi = max(hi, v)
			s += v
		}
		return point.Int(lo), point.Int(hi), point.Int(s)
	case point.KindUint:
		lo := vals[0]
		hi, s := lo, lo
		for _, v := range vals[1:] {
			lo = min(lo, v)
			hi = max(hi, v)
			s += v
		}
		return point.Uint(lo), point.Uint(hi), point.Uint(s)
	}
	return point.Value{}, point.Value{}, point.Value{}
}

// zstd encoders are expensive to set up, so Writers share them.
var encoderPool sync.Pool

// indexReserve bytes at the start of a Writer's index buffer hold room for
// the series count, written at Finish.
const indexReserve = binary.MaxVarintLen64

// indexBufs recycles index buffers: a high-cardinality flush builds an
// index of tens of megabytes, and growing it anew for every segment
// dominated the allocations of such ingests.
var indexBufs sync.Pool

// maxPooledIndex keeps the buffers of huge indexes out of the pool.
const maxPooledIndex = 64 << 20

// maxSeriesHint bounds what WriterOptions.Series reserves.
const maxSeriesHint = 16 << 20

// indexStreamAt is how many bytes of raw index entries a Writer gathers
// before it hands them to the index's stream compressor (a variable for
// tests).
var indexStreamAt = 1 << 20

// sectionBuf collects what a stream compressor writes, in chunks of
// sectionChunkLen bytes that are filled in place and never copied: the
// compressed index of a large flush is megabytes, and a buffer grown by
// doubling allocated about twice that on the way (a Writer's first one
// finds none to reuse in the pool). Every chunk but the last in use is
// full; chunks past used are spares from an earlier Writer.
type sectionBuf struct {
	chunks [][]byte
	used   int // chunks holding bytes
	n      int // bytes held
}

// sectionChunkLen is the size of a sectionBuf's chunks (a variable for
// tests).
var sectionChunkLen = 64 << 10

func (s *sectionBuf) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if s.used == 0 || len(s.chunks[s.used-1]) == cap(s.chunks[s.used-1]) {
			if s.used == len(s.chunks) {
				s.chunks = append(s.chunks, make([]byte, 0, sectionChunkLen))
			}
			s.used++
		}
		c := &s.chunks[s.used-1]
		m := copy((*c)[len(*c):cap(*c)], p)
		*c = (*c)[:len(*c)+m]
		p = p[m:]
	}
	s.n += n
	return n, nil
}

// crc extends crc with the bytes held.
func (s *sectionBuf) crc(crc uint32) uint32 {
	for _, c := range s.chunks[:s.used] {
		crc = crc32.Update(crc, castagnoli, c)
	}
	return crc
}

// bytes returns the bytes held as one slice (a copy when they fill more
// than one chunk).
func (s *sectionBuf) bytes() []byte {
	if s.used == 1 {
		return s.chunks[0]
	}
	b := make([]byte, 0, s.n)
	for _, c := range s.chunks[:s.used] {
		b = append(b, c...)
	}
	return b
}

func (s *sectionBuf) reset() {
	for i := range s.chunks[:s.used] {
		s.chunks[i] = s.chunks[i][:0]
	}
	s.used, s.n = 0, 0
}

var sectionBufs sync.Pool

func getSectionBuf() *sectionBuf {
	// (Tests change the chunk size: a buffer of another one is dropped.)
	if s, ok := sectionBufs.Get().(*sectionBuf); ok && (len(s.chunks) == 0 || cap(s.chunks[0]) == sectionChunkLen) {
		s.reset()
		return s
	}
	return &sectionBuf{}
}

func putSectionBuf(s *sectionBuf) {
	if len(s.chunks)*sectionChunkLen <= maxPooledIndex {
		sectionBufs.Put(s)
	}
}

func getIndexBuf() []byte {
	if b, ok := indexBufs.Get().(*[]byte); ok {
		return (*b)[:indexReserve]
	}
	return make([]byte, indexReserve, 4<<10)
}

func putIndexBuf(b []byte) {
	if b != nil && cap(b) <= maxPooledIndex {
		indexBufs.Put(&b)
	}
}

func getEncoder() (*zstd.Encoder, error) { return pooledEncoder(&encoderPool, 1) }

func putEncoder(e *zstd.Encoder) { encoderPool.Put(e) }

// streamEncoderPool holds the encoders of streamed indexes. They compress
// on a goroutine of their own, so that a large flush (the one Close
// waits for, with the other core idle) compresses its index while it
// encodes the next blocks.
var streamEncoderPool sync.Pool

func getStreamEncoder() (*zstd.Encoder, error) { return pooledEncoder(&streamEncoderPool, 2) }

// pooledEncoder returns an encoder from pool, or a new one compressing on
// concurrency goroutines (1: in the caller's).
func pooledEncoder(pool *sync.Pool, concurrency int) (*zstd.Encoder, error) {
	if e, ok := pool.Get().(*zstd.Encoder); ok {
		return e, nil
	}
	e, err := zstd.NewWriter(nil,
		zstd.WithEncoderConcurrency(concurrency),
		zstd.WithEncoderCRC(false), // blocks carry their own CRC-32C
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		// Blocks are compressed one by one and the index against its
		// neighbouring entries: a small window compresses them as well as
		// the default and keeps each encoder's history to 384 KiB.
		zstd.WithWindowSize(256<<10),
		zstd.WithLowerEncoderMem(true))
	if err != nil {
		return nil, fmt.Errorf("segment: zstd encoder: %w", err)
	}
	return e, nil
}
