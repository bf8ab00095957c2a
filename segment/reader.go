package segment

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/klauspost/compress/zstd"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/vfs"
)

// Reader reads a segment. Open loads its index and bloom filter into
// memory; blocks are read on demand with positional reads. A Reader is safe
// for concurrent use by several goroutines.
type Reader struct {
	f      vfs.File
	path   string
	meta   Meta
	series []SeriesIndex
	bloom  *bloom.BloomFilter
	index  []byte // raw index; series keys point into it
}

// Open opens the segment at path and validates its header, footer, index
// and bloom filter. Damaged bytes give a *base.CorruptionError.
func Open(fs vfs.FS, path string) (*Reader, error) {
	if fs == nil {
		fs = vfs.Default
	}
	f, err := fs.Open(path)
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	r := &Reader{f: f, path: path}
	if err := r.load(); err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

func (r *Reader) corrupt(off int64, err error) error {
	return &base.CorruptionError{Path: r.path, Offset: off, Err: err}
}

// readAt reads len(p) bytes at off; a short read means the file is shorter
// than its metadata says.
func (r *Reader) readAt(p []byte, off int64) error {
	n, err := r.f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return r.corrupt(off, fmt.Errorf("read %d of %d bytes: %w", n, len(p), io.ErrUnexpectedEOF))
	}
	return fmt.Errorf("segment: read %s at %d: %w", r.path, off, err)
}

func (r *Reader) load() error {
	st, err := r.f.Stat()
	if err != nil {
		return fmt.Errorf("segment: stat %s: %w", r.path, err)
	}
	size := st.Size()
	if size < headerLen+footerLen {
		return r.corrupt(0, fmt.Errorf("file of %d bytes is too short", size))
	}
	var hdr [headerLen]byte
	if err := r.readAt(hdr[:], 0); err != nil {
		return err
	}
	if string(hdr[:4]) != magic {
		return r.corrupt(0, fmt.Errorf("header: %w: %q", ErrMagic, hdr[:4]))
	}
	if hdr[4] != formatVersion {
		return r.corrupt(4, fmt.Errorf("header: %w %d", ErrVersion, hdr[4]))
	}
	footOff := size - footerLen
	var fb [footerLen]byte
	if err := r.readAt(fb[:], footOff); err != nil {
		return err
	}
	ft, err := parseFooter(fb[:])
	if err != nil {
		return r.corrupt(footOff, err)
	}
	end := uint64(footOff)
	if ft.indexOff < headerLen || ft.indexOff > end || ft.indexLen > end-ft.indexOff ||
		ft.bloomOff != ft.indexOff+ft.indexLen || ft.bloomLen != end-ft.bloomOff {
		return r.corrupt(footOff, fmt.Errorf("footer: sections index %d+%d, bloom %d+%d do not tile %d..%d",
			ft.indexOff, ft.indexLen, ft.bloomOff, ft.bloomLen, headerLen, end))
	}
	indexOff := int64(ft.indexOff)
	sec := make([]byte, ft.indexLen+ft.bloomLen)
	if err := r.readAt(sec, indexOff); err != nil {
		return err
	}
	var sc blockScratch
	raw, err := unframe(sec[:ft.indexLen], maxSectionRaw, &sc)
	if err != nil {
		return r.corrupt(indexOff, fmt.Errorf("index: %w", err))
	}
	series, err := parseIndex(raw, headerLen, indexOff)
	if err != nil {
		return r.corrupt(indexOff, fmt.Errorf("index: %w", err))
	}
	bloomOff := int64(ft.bloomOff)
	bf, err := parseBloom(sec[ft.indexLen:])
	if err != nil {
		return r.corrupt(bloomOff, err)
	}
	for i := range series {
		if !bloomTest(bf, keyHash(series[i].Key)) {
			return r.corrupt(bloomOff, fmt.Errorf("bloom filter lacks series %q", series[i].Key))
		}
	}
	r.series, r.bloom, r.index = series, bf, raw
	r.meta = Meta{Path: r.path, Size: size, Series: len(series)}
	for i := range series {
		s := &series[i]
		if i == 0 {
			r.meta.MinTime, r.meta.MaxTime = s.MinTime(), s.MaxTime()
		}
		r.meta.MinTime = min(r.meta.MinTime, s.MinTime())
		r.meta.MaxTime = max(r.meta.MaxTime, s.MaxTime())
		r.meta.Samples += s.Samples()
	}
	if len(series) > 0 {
		r.meta.FirstKey = series[0].Key
		r.meta.LastKey = series[len(series)-1].Key
	}
	return nil
}

// Meta describes the segment. Its key slices belong to the Reader.
func (r *Reader) Meta() Meta { return r.meta }

// Close closes the file. Iterators and blocks must not be used afterwards.
func (r *Reader) Close() error { return r.f.Close() }

// NumSeries returns the number of series.
func (r *Reader) NumSeries() int { return len(r.series) }

// Series returns the i-th series in key order.
func (r *Reader) Series(i int) *SeriesIndex { return &r.series[i] }

// MayContain consults the bloom filter only: false means the segment
// certainly lacks key.
func (r *Reader) MayContain(key []byte) bool { return bloomTest(r.bloom, keyHash(key)) }

// Find returns the index entry of key, consulting the bloom filter and then
// binary searching the index. It does no I/O.
func (r *Reader) Find(key []byte) (*SeriesIndex, bool) {
	if !r.MayContain(key) {
		return nil, false
	}
	i, ok := slices.BinarySearchFunc(r.series, key, func(s SeriesIndex, k []byte) int {
		return compareBytes(s.Key, k)
	})
	if !ok {
		return nil, false
	}
	return &r.series[i], true
}

func compareBytes(a, b []byte) int {
	switch {
	case string(a) < string(b):
		return -1
	case string(a) > string(b):
		return 1
	}
	return 0
}

// scratchPool recycles decoding buffers across ReadBlock calls.
var scratchPool = sync.Pool{New: func() any { return new(blockScratch) }}

// maxPooledScratch keeps huge buffers (string blocks) out of the pool.
const maxPooledScratch = 4 << 20

// ReadBlock decodes block b of s, appending its samples to dst. String
// values of a block share one allocation.
func (r *Reader) ReadBlock(s *SeriesIndex, b int, dst []point.Sample) ([]point.Sample, error) {
	if b < 0 || b >= len(s.Blocks) {
		return dst, fmt.Errorf("%w: segment: %s: block %d of %d", base.ErrInvalid, r.path, b, len(s.Blocks))
	}
	bm := &s.Blocks[b]
	sc := scratchPool.Get().(*blockScratch)
	defer func() {
		if cap(sc.raw) <= maxPooledScratch && cap(sc.alt) <= maxPooledScratch {
			scratchPool.Put(sc)
		}
	}()
	stored := sc.alt[:0]
	if cap(stored) < int(bm.Length) {
		stored = make([]byte, bm.Length)
	}
	stored = stored[:bm.Length]
	sc.alt = stored
	if err := r.readAt(stored, bm.Offset); err != nil {
		return dst, err
	}
	raw, err := unframe(stored, maxBlockRaw(s.Kind, bm.Count), sc)
	if err != nil {
		return dst, r.corrupt(bm.Offset, fmt.Errorf("block %d of %q: %w", b, s.Key, err))
	}
	dst, err = decodeBlock(dst, raw, s.Kind, bm, sc)
	if err != nil {
		return dst, r.corrupt(bm.Offset, fmt.Errorf("block %d of %q: %w", b, s.Key, err))
	}
	return dst, nil
}

var decoderOnce = sync.OnceValues(func() (*zstd.Decoder, error) {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderMaxMemory(maxSectionRaw),
		zstd.WithDecoderMaxWindow(maxSectionRaw),
		zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		return nil, fmt.Errorf("segment: zstd decoder: %w", err)
	}
	return d, nil
})

// decoder returns the package's zstd decoder; DecodeAll is safe for
// concurrent use.
func decoder() (*zstd.Decoder, error) { return decoderOnce() }
