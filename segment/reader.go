package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/klauspost/compress/zstd"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/vfs"
)

// Reader reads a segment. Open loads its index and bloom filter into
// memory; OpenLazy loads the bloom filter only, and the index when it is
// first needed (Load). Blocks are read on demand with positional reads. A
// Reader is safe for concurrent use by several goroutines.
type Reader struct {
	f       vfs.File
	path    string
	meta    Meta
	bloom   *bloom.BloomFilter
	version byte
	foot    footer

	// table is the parsed index, nil until it is loaded. loadMu
	// serialises loads; loadErr is the error of a failed one, returned by
	// every later Load.
	table   atomic.Pointer[indexTable]
	loadMu  sync.Mutex
	loadErr error

	nextFind atomic.Int64 // series after the one Find found last: a hint
}

// Open opens the segment at path and validates its header, footer, index
// and bloom filter. Damaged bytes give a *base.CorruptionError.
func Open(fs vfs.FS, path string) (*Reader, error) {
	r, err := openFile(fs, path)
	if err != nil {
		return nil, err
	}
	if err := r.loadAll(); err != nil {
		r.f.Close()
		return nil, err
	}
	return r, nil
}

// OpenLazy opens the segment at path, whose Writer returned m, and reads
// its header, footer and bloom filter; its index is read, validated and
// checked against m when it is first needed. A flush or compaction opens
// its outputs this way: a segment of a million series has an index of
// about a hundred megabytes, which nothing may read before the segment is
// compacted away (Entries streams it). Load reports an index that cannot
// be read; the methods that need the index and cannot return an error
// load it themselves and panic if that fails, so callers that may meet a
// damaged file call Load first.
func OpenLazy(fs vfs.FS, path string, m Meta) (*Reader, error) {
	r, err := openFile(fs, path)
	if err != nil {
		return nil, err
	}
	if m.Size != r.meta.Size {
		r.f.Close()
		return nil, r.corrupt(0, fmt.Errorf("file of %d bytes, written as %d", r.meta.Size, m.Size))
	}
	sec := make([]byte, r.foot.bloomLen)
	if err := r.readAt(sec, int64(r.foot.bloomOff)); err != nil {
		r.f.Close()
		return nil, err
	}
	bf, err := parseBloom(sec)
	if err != nil {
		r.f.Close()
		return nil, r.corrupt(int64(r.foot.bloomOff), err)
	}
	r.bloom = bf
	m.Path = r.path
	r.meta = m
	return r, nil
}

// openFile opens the file and checks its header and footer.
func openFile(fs vfs.FS, path string) (*Reader, error) {
	if fs == nil {
		fs = vfs.Default
	}
	f, err := fs.Open(path)
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	r := &Reader{f: f, path: path}
	if err := r.readFooter(); err != nil {
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

// readFooter checks the header and the footer and records the file's
// size, format version and sections.
func (r *Reader) readFooter() error {
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
	version := hdr[4]
	if version < minReadVersion || version > formatVersion {
		return r.corrupt(4, fmt.Errorf("header: %w %d", ErrVersion, version))
	}
	footOff := size - footerLen
	var fb [footerLen]byte
	if err := r.readAt(fb[:], footOff); err != nil {
		return err
	}
	ft, err := parseFooter(fb[:], version)
	if err != nil {
		return r.corrupt(footOff, err)
	}
	end := uint64(footOff)
	if ft.indexOff < headerLen || ft.indexOff > end || ft.indexLen > end-ft.indexOff ||
		ft.bloomOff != ft.indexOff+ft.indexLen || ft.bloomLen != end-ft.bloomOff {
		return r.corrupt(footOff, fmt.Errorf("footer: sections index %d+%d, bloom %d+%d do not tile %d..%d",
			ft.indexOff, ft.indexLen, ft.bloomOff, ft.bloomLen, headerLen, end))
	}
	r.version, r.foot = version, ft
	r.meta = Meta{Path: r.path, Size: size}
	return nil
}

// loadAll reads and validates the index and the bloom filter, and derives
// the Meta from them.
func (r *Reader) loadAll() error {
	indexOff := int64(r.foot.indexOff)
	sec := make([]byte, r.foot.indexLen+r.foot.bloomLen)
	if err := r.readAt(sec, indexOff); err != nil {
		return err
	}
	bloomOff := int64(r.foot.bloomOff)
	bf, err := parseBloom(sec[r.foot.indexLen:])
	if err != nil {
		return r.corrupt(bloomOff, err)
	}
	table, err := r.parseSection(sec[:r.foot.indexLen], bf)
	if err != nil {
		return err
	}
	r.meta.Series = table.len()
	r.meta.MinTime, r.meta.MaxTime, r.meta.Samples = table.minTime, table.maxTime, table.samples
	if n := table.len(); n > 0 {
		r.meta.FirstKey = table.key(0)
		r.meta.LastKey = table.key(n - 1)
	}
	r.bloom = bf
	r.table.Store(table)
	return nil
}

// parseSection unframes and parses the index section sec and checks that
// bloom filter bf holds every key.
func (r *Reader) parseSection(sec []byte, bf *bloom.BloomFilter) (*indexTable, error) {
	indexOff := int64(r.foot.indexOff)
	raw, err := unframeSection(sec)
	if err != nil {
		return nil, r.corrupt(indexOff, fmt.Errorf("index: %w", err))
	}
	table, err := parseIndex(raw, r.version, headerLen, indexOff)
	if err != nil {
		return nil, r.corrupt(indexOff, fmt.Errorf("index: %w", err))
	}
	for i := range table.len() {
		key := table.key(i)
		if !bloomTest(bf, keyHash(key)) {
			return nil, r.corrupt(int64(r.foot.bloomOff), fmt.Errorf("bloom filter lacks series %q", key))
		}
	}
	return table, nil
}

// Load reads and validates the index of a Reader from OpenLazy, if it is
// not loaded yet, and checks it against the Meta its Writer returned. It is
// a no-op for a Reader from Open. A failed Load fails every later one the
// same way.
func (r *Reader) Load() error {
	if r.table.Load() != nil {
		return nil
	}
	r.loadMu.Lock()
	defer r.loadMu.Unlock()
	if r.table.Load() != nil || r.loadErr != nil {
		return r.loadErr
	}
	sec := make([]byte, r.foot.indexLen)
	if err := r.readAt(sec, int64(r.foot.indexOff)); err != nil {
		return err // an I/O error may pass: not sticky
	}
	table, err := r.parseSection(sec, r.bloom)
	if err == nil {
		err = r.checkMeta(table.len(), table.minTime, table.maxTime, table.samples, table.firstLast)
	}
	if err != nil {
		r.loadErr = err
		return err
	}
	r.table.Store(table)
	return nil
}

// checkMeta checks what an index holds against the Meta the Reader was
// opened with.
func (r *Reader) checkMeta(series int, minTime, maxTime, samples int64, firstLast func() ([]byte, []byte)) error {
	m := r.meta
	first, last := firstLast()
	if series != m.Series || samples != m.Samples || minTime != m.MinTime || maxTime != m.MaxTime ||
		!bytes.Equal(first, m.FirstKey) || !bytes.Equal(last, m.LastKey) {
		return r.corrupt(int64(r.foot.indexOff), fmt.Errorf("index of %d series, %d samples in %d..%d, keys %q..%q; written as %d, %d in %d..%d, %q..%q",
			series, samples, minTime, maxTime, first, last, m.Series, m.Samples, m.MinTime, m.MaxTime, m.FirstKey, m.LastKey))
	}
	return nil
}

// tab returns the index table, loading it if needed. A caller that may
// meet a damaged file calls Load first: tab panics if the load fails.
func (r *Reader) tab() *indexTable {
	if t := r.table.Load(); t != nil {
		return t
	}
	if err := r.Load(); err != nil {
		panic(fmt.Sprintf("segment: the index of %s is used without a successful Load: %v", r.path, err))
	}
	return r.table.Load()
}

// Loaded reports whether the index is in memory.
func (r *Reader) Loaded() bool { return r.table.Load() != nil }

// Meta describes the segment. Its key slices belong to the Reader.
func (r *Reader) Meta() Meta { return r.meta }

// Close closes the file. Blocks read from it must not be used afterwards.
func (r *Reader) Close() error { return r.f.Close() }

// NumSeries returns the number of series. It needs no index.
func (r *Reader) NumSeries() int { return r.meta.Series }

// Series returns the i-th series in key order, decoded from the index into
// a new SeriesIndex on every call.
func (r *Reader) Series(i int) *SeriesIndex { return r.tab().entry(i) }

// SeriesInto decodes the index entry of series i into s, reusing the
// storage of s.Blocks, and returns s. A caller that visits many series and
// keeps none of them decodes them all without allocating; what s held
// before is overwritten.
func (r *Reader) SeriesInto(i int, s *SeriesIndex) *SeriesIndex {
	r.tab().entryInto(i, s)
	return s
}

// Key returns the key of series i (in key order) without decoding the rest
// of its entry. The bytes belong to the reader: do not modify them.
func (r *Reader) Key(i int) []byte { return r.tab().key(i) }

// MayContain consults the bloom filter only: false means the segment
// certainly lacks key.
func (r *Reader) MayContain(key []byte) bool { return bloomTest(r.bloom, keyHash(key)) }

// Find returns the index entry of key, consulting the bloom filter and then
// binary searching the index. It does no I/O once the index is loaded.
// Lookups in increasing key order (a query's series) are cheap: Find first
// tries the series after the one it found last.
func (r *Reader) Find(key []byte) (*SeriesIndex, bool) {
	i, ok := r.search(key)
	if !ok {
		return nil, false
	}
	return r.tab().entry(i), true
}

// FindInto is Find decoding into s, reusing the storage of s.Blocks (see
// SeriesInto). It returns false, leaving s as it was, when the segment
// lacks key.
func (r *Reader) FindInto(key []byte, s *SeriesIndex) bool {
	i, ok := r.search(key)
	if ok {
		r.tab().entryInto(i, s)
	}
	return ok
}

// search returns the position of key.
func (r *Reader) search(key []byte) (int, bool) {
	n := r.meta.Series
	if n == 0 {
		return 0, false
	}
	if !r.Loaded() && !r.MayContain(key) {
		return 0, false // no load for a key the segment lacks
	}
	t := r.tab()
	next := int(r.nextFind.Load()) // a hint only: any value in 0..n is fine
	if next < n && string(t.key(next)) == string(key) {
		r.nextFind.Store(int64(next + 1))
		return next, true
	}
	if !r.MayContain(key) {
		return 0, false
	}
	lo, hi := 0, n
	if next > 0 && next <= n && string(t.key(next-1)) < string(key) {
		lo = next // after the last hit: search only what follows it
	}
	i := lo + sort.Search(hi-lo, func(i int) bool { return string(t.key(lo+i)) >= string(key) })
	if i == n || string(t.key(i)) != string(key) {
		return 0, false
	}
	r.nextFind.Store(int64(i + 1))
	return i, true
}

// AppendRange appends the samples of s with mint <= Time <= maxt to dst,
// decoding only the blocks that overlap the range, for a caller that
// wants the samples in a slice.
func (r *Reader) AppendRange(s *SeriesIndex, mint, maxt int64, dst []point.Sample) ([]point.Sample, error) {
	return AppendBlocksInRange(s, mint, maxt, dst, func(b int, dst []point.Sample) ([]point.Sample, error) {
		return r.ReadBlock(s, b, dst)
	})
}

// AppendBlocksInRange appends to dst the samples of s with mint <= t <=
// maxt, reading only the blocks that overlap the range, each with read (for
// example ReadBlock behind a context check), and trimming the first and the
// last to the range.
func AppendBlocksInRange(s *SeriesIndex, mint, maxt int64, dst []point.Sample, read func(b int, dst []point.Sample) ([]point.Sample, error)) ([]point.Sample, error) {
	bs := s.Blocks
	for b := sort.Search(len(bs), func(i int) bool { return bs[i].MaxTime >= mint }); b < len(bs) && bs[b].MinTime <= maxt; b++ {
		n0 := len(dst)
		var err error
		if dst, err = read(b, dst); err != nil {
			return dst, err
		}
		if bs[b].MinTime < mint {
			got := dst[n0:]
			i := sort.Search(len(got), func(i int) bool { return got[i].Time >= mint })
			dst = append(dst[:n0], got[i:]...)
		}
		if bs[b].MaxTime > maxt {
			got := dst[n0:]
			j := sort.Search(len(got), func(i int) bool { return got[i].Time > maxt })
			dst = dst[:n0+j]
		}
	}
	return dst, nil
}

// AppendColumnsInRange appends to dst's columns the samples of s with
// mint <= t <= maxt, as AppendBlocksInRange appends samples: only the
// blocks that overlap the range are read, each with read, and the first
// and the last are trimmed to the range.
func AppendColumnsInRange(s *SeriesIndex, mint, maxt int64, dst *point.Columns, read func(b int, dst *point.Columns) error) error {
	bs := s.Blocks
	for b := sort.Search(len(bs), func(i int) bool { return bs[i].MaxTime >= mint }); b < len(bs) && bs[b].MinTime <= maxt; b++ {
		n0 := len(dst.Times)
		if err := read(b, dst); err != nil {
			return err
		}
		if bs[b].MinTime < mint {
			got := dst.Times[n0:]
			dst.Cut(n0, n0+sort.Search(len(got), func(i int) bool { return got[i] >= mint }))
		}
		if bs[b].MaxTime > maxt {
			got := dst.Times[n0:]
			dst.Truncate(n0 + sort.Search(len(got), func(i int) bool { return got[i] > maxt }))
		}
	}
	return nil
}

// scratchPool recycles decoding buffers across ReadBlock calls.
var scratchPool = sync.Pool{New: func() any { return new(blockScratch) }}

// maxPooledScratch keeps huge buffers (string blocks) out of the pool.
const maxPooledScratch = 4 << 20

// ReadBlock decodes block b of s, appending its samples to dst. String
// values of a block share one allocation.
func (r *Reader) ReadBlock(s *SeriesIndex, b int, dst []point.Sample) ([]point.Sample, error) {
	sc := scratchPool.Get().(*blockScratch)
	defer putScratch(sc)
	raw, err := r.rawBlock(s, b, sc)
	if err != nil {
		return dst, err
	}
	if dst, err = decodeBlock(dst, raw, s.Kind, &s.Blocks[b], sc); err != nil {
		return dst, r.corrupt(s.Blocks[b].Offset, fmt.Errorf("block %d of %q: %w", b, s.Key, err))
	}
	return dst, nil
}

// ReadColumns decodes block b of s, appending its timestamps and values to
// dst's columns. On error dst is as it was.
func (r *Reader) ReadColumns(s *SeriesIndex, b int, dst *point.Columns) error {
	sc := scratchPool.Get().(*blockScratch)
	defer putScratch(sc)
	raw, err := r.rawBlock(s, b, sc)
	if err != nil {
		return err
	}
	return r.decodeColumnsOf(s, b, raw, dst)
}

// decodeColumnsOf appends the raw block b of s to dst.
func (r *Reader) decodeColumnsOf(s *SeriesIndex, b int, raw []byte, dst *point.Columns) error {
	ts, vals, strs, err := decodeColumns(dst.Times, dst.Bits, dst.Strings, raw, s.Kind, &s.Blocks[b])
	dst.Times, dst.Bits, dst.Strings = ts, vals, strs
	if err != nil {
		return r.corrupt(s.Blocks[b].Offset, fmt.Errorf("block %d of %q: %w", b, s.Key, err))
	}
	return nil
}

// rawBlock returns the raw bytes of block b of s, read and unframed into
// sc's buffers (or held inline in the index).
func (r *Reader) rawBlock(s *SeriesIndex, b int, sc *blockScratch) ([]byte, error) {
	if b < 0 || b >= len(s.Blocks) {
		return nil, fmt.Errorf("%w: segment: %s: block %d of %d", base.ErrInvalid, r.path, b, len(s.Blocks))
	}
	bm := &s.Blocks[b]
	if bm.inline != nil {
		return bm.inline, nil
	}
	stored := sc.alt[:0]
	if cap(stored) < int(bm.Length) {
		stored = make([]byte, bm.Length)
	}
	stored = stored[:bm.Length]
	sc.alt = stored
	if err := r.readAt(stored, bm.Offset); err != nil {
		return nil, err
	}
	raw, err := unframe(stored, maxBlockRaw(s.Kind, bm.Count), sc)
	if err != nil {
		return nil, r.corrupt(bm.Offset, fmt.Errorf("block %d of %q: %w", b, s.Key, err))
	}
	return raw, nil
}

// putScratch returns sc to the pool unless it grew huge.
func putScratch(sc *blockScratch) {
	if cap(sc.raw) <= maxPooledScratch && cap(sc.alt) <= maxPooledScratch {
		scratchPool.Put(sc)
	}
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
