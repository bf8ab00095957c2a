package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/stratadb/strata/internal/decbuf"
)

// streamBufLen is the starting size of each of the two buffers Entries
// decodes a streamed index into; they double for an entry that does not
// fit in half of one. A variable so that tests can cut entries across
// refills.
var streamBufLen = 256 << 10

// streamMinRaw is the smallest raw index Entries streams: a smaller one is
// decoded whole, into memory freed when the iteration ends. A variable for
// tests.
var streamMinRaw = 1 << 20

// Entries visits the series entries of a segment in key order, for a
// caller that reads every series once, as compaction does. Over a loaded
// index it decodes from the index in memory. Otherwise it reads the index
// section, checks its checksum, and decompresses it as it goes into two
// buffers of a few hundred kilobytes, so that a segment whose index runs
// to a hundred megabytes is read without holding it, and without loading
// it into the Reader. The entries are validated as Open validates them,
// and the whole index against the Reader's Meta when the last one is
// read.
//
// An entry that Next decodes, and the key, partial sums and inline blocks
// it points to, stay valid until the second call of Next after it: a
// caller may hold the current entry while it decodes the next one.
type Entries struct {
	r    *Reader
	n    int // series in the index
	i    int // entries returned
	err  error
	done bool

	// Over a table (loaded, or a small index decoded whole).
	t *indexTable

	// Streamed.
	dec      *zstd.Decoder
	src      io.Reader // dec, limited to one byte past rawLen
	rawLen   int64
	read     int64     // bytes of src consumed
	bufs     [2][]byte // the current one and the other
	cur      int
	pos, end int // unparsed bytes of bufs[cur]
	eof      bool
	off      int64 // where the next series' stored blocks start
	prevKey  []byte
	minTime  int64
	maxTime  int64
	samples  int64
	first    []byte
}

var streamDecoderPool sync.Pool

// streamDecoder returns a pooled zstd stream decoder reading payload.
// Return it to streamDecoderPool after Reset(nil).
func streamDecoder(payload []byte) (*zstd.Decoder, error) {
	dec, _ := streamDecoderPool.Get().(*zstd.Decoder)
	if dec == nil {
		var err error
		if dec, err = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(maxSectionRaw),
			zstd.WithDecoderMaxWindow(maxSectionRaw)); err != nil {
			return nil, fmt.Errorf("segment: zstd decoder: %w", err)
		}
	}
	if err := dec.Reset(bytes.NewReader(payload)); err != nil {
		streamDecoderPool.Put(dec)
		return nil, fmt.Errorf("zstd: %w", err)
	}
	return dec, nil
}

// unframeSection is unframe for the index section: a compressed one is
// decoded as a stream into a buffer of its raw length. DecodeAll copies
// the history window of a frame compressed as a stream (the Writer's
// 256 KiB) after every block: that copying was a third of loading the
// index of 200,000 series (BenchmarkIndex/Load).
func unframeSection(sec []byte) ([]byte, error) {
	flags, rawLen, payload, err := checkFrame(sec, maxSectionRaw)
	if err != nil {
		return nil, err
	}
	if flags&flagZstd == 0 {
		return payload, nil
	}
	dec, err := streamDecoder(payload)
	if err != nil {
		return nil, err
	}
	defer func() {
		dec.Reset(nil)
		streamDecoderPool.Put(dec)
	}()
	raw := make([]byte, rawLen+1) // one byte more: a longer stream is damage
	n, err := io.ReadFull(dec, raw)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
	case err != nil:
		return nil, fmt.Errorf("zstd: %w", err)
	}
	if uint64(n) != rawLen {
		return nil, fmt.Errorf("decompressed %d bytes, want %d", n, rawLen)
	}
	return raw[:n:n], nil
}

// Entries returns an iterator over the series entries. Close it when done.
func (r *Reader) Entries() (*Entries, error) {
	e := &Entries{r: r, n: r.meta.Series}
	if t := r.table.Load(); t != nil {
		e.t = t
		return e, nil
	}
	indexOff := int64(r.foot.indexOff)
	sec := make([]byte, r.foot.indexLen)
	if err := r.readAt(sec, indexOff); err != nil {
		return nil, err
	}
	flags, rawLen, payload, err := checkFrame(sec, maxSectionRaw)
	if err != nil {
		return nil, r.corrupt(indexOff, fmt.Errorf("index: %w", err))
	}
	if flags&flagZstd == 0 || rawLen < uint64(streamMinRaw) {
		// Decoded whole and parsed as Load does, without keeping it.
		t, err := r.parseSection(sec, r.bloom)
		if err == nil {
			err = r.checkMeta(t.len(), t.minTime, t.maxTime, t.samples, t.firstLast)
		}
		if err != nil {
			return nil, err
		}
		e.t = t
		return e, nil
	}
	dec, err := streamDecoder(payload)
	if err != nil {
		return nil, r.corrupt(indexOff, fmt.Errorf("index: %w", err))
	}
	e.dec, e.rawLen = dec, int64(rawLen)
	e.src = io.LimitReader(dec, e.rawLen+1)
	e.off = headerLen
	e.bufs[0] = make([]byte, streamBufLen)
	if err := e.refill(false); err != nil {
		e.Close()
		return nil, err
	}
	c := decbuf.New(e.bufs[e.cur][:e.end])
	n := c.Uvarint("series count")
	if c.Err() == nil && n != uint64(e.n) {
		err = fmt.Errorf("%d series, written as %d", n, e.n)
	}
	if err = errors.Join(c.Err(), err); err != nil {
		e.Close()
		return nil, r.corrupt(indexOff, fmt.Errorf("index: %w", err))
	}
	e.pos = c.Offset()
	return e, nil
}

// Next decodes the next entry into s, reusing the storage of s.Blocks,
// and reports whether there was one. After the last entry it checks the
// index as a whole; a damaged index gives a *base.CorruptionError.
func (e *Entries) Next(s *SeriesIndex) (bool, error) {
	if e.err != nil || e.done {
		return false, e.err
	}
	if e.i == e.n {
		e.done = true
		if e.t == nil {
			e.err = e.finish()
		}
		e.Close()
		return false, e.err
	}
	if e.t != nil {
		e.t.entryInto(e.i, s)
		e.i++
		return true, nil
	}
	if err := e.next(s); err != nil {
		e.err = e.r.corrupt(int64(e.r.foot.indexOff), fmt.Errorf("index: series %d: %w", e.i, err))
		e.Close()
		return false, e.err
	}
	e.i++
	return true, nil
}

// next decodes the next streamed entry, refilling the buffers as needed.
func (e *Entries) next(s *SeriesIndex) error {
	dataEnd := int64(e.r.foot.indexOff)
	refilled := false
	for {
		c := decbuf.New(e.bufs[e.cur][e.pos:e.end])
		next, err := parseEntry(&c, e.r.version, e.off, dataEnd, dataEnd, s, s.Blocks[:0])
		if err == nil {
			e.pos += c.Offset()
			return e.took(s, next)
		}
		if e.eof {
			return err
		}
		// The entry may run past what is decoded: decode more.
		if err := e.refill(refilled); err != nil {
			return err
		}
		refilled = true
	}
}

// took records entry s, whose stored blocks end at next.
func (e *Entries) took(s *SeriesIndex, next int64) error {
	if e.i > 0 && bytes.Compare(s.Key, e.prevKey) <= 0 {
		return fmt.Errorf("key %q not after %q", s.Key, e.prevKey)
	}
	first, last := s.MinTime(), s.MaxTime()
	if e.i == 0 {
		e.minTime, e.maxTime = first, last
		e.first = bytes.Clone(s.Key)
	}
	e.minTime, e.maxTime = min(e.minTime, first), max(e.maxTime, last)
	for j := range s.Blocks {
		e.samples += int64(s.Blocks[j].Count)
	}
	for j := range s.Rollups {
		e.samples += int64(s.Rollups[j].Count)
	}
	e.prevKey = s.Key // valid until the next refill but one
	e.off = next
	return nil
}

// refill moves the unparsed bytes to the front of a buffer and decodes
// more after them. The first refill of a call of Next uses the other
// buffer, so that the entry returned before stays intact; a later one in
// the same call (an entry larger than a buffer) grows the current buffer
// into a new array. A buffer doubles when the unparsed bytes fill half of
// it.
func (e *Entries) refill(again bool) error {
	tail := e.end - e.pos
	size := max(len(e.bufs[e.cur]), streamBufLen)
	if tail > size/2 {
		size *= 2
	}
	dst := e.cur
	if !again {
		dst = 1 - e.cur
	}
	buf := e.bufs[dst]
	if len(buf) < size || dst == e.cur {
		buf = make([]byte, size)
	}
	copy(buf, e.bufs[e.cur][e.pos:e.end])
	n, err := io.ReadFull(e.src, buf[tail:])
	e.read += int64(n)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		e.eof = true
	case err != nil:
		return fmt.Errorf("zstd: %w", err)
	}
	if e.read > e.rawLen {
		return fmt.Errorf("decompresses past its raw length %d", e.rawLen)
	}
	e.bufs[dst], e.cur, e.pos, e.end = buf, dst, 0, tail+n
	return nil
}

// finish checks a streamed index once every entry is read: nothing after
// them, its raw length, where the stored blocks end, and what the Reader's
// Meta says.
func (e *Entries) finish() error {
	r := e.r
	indexOff := int64(r.foot.indexOff)
	if e.pos != e.end {
		return r.corrupt(indexOff, fmt.Errorf("index: %d bytes after the last series", e.end-e.pos))
	}
	if !e.eof {
		var one [1]byte
		n, err := io.ReadFull(e.src, one[:])
		e.read += int64(n)
		if n > 0 || !errors.Is(err, io.EOF) {
			return r.corrupt(indexOff, fmt.Errorf("index: bytes after the last series (%v)", err))
		}
	}
	if e.read != e.rawLen {
		return r.corrupt(indexOff, fmt.Errorf("index: decompressed %d bytes, want %d", e.read, e.rawLen))
	}
	if e.off != indexOff {
		return r.corrupt(indexOff, fmt.Errorf("index: blocks end at %d, data at %d", e.off, indexOff))
	}
	if e.n == 0 {
		e.minTime, e.maxTime = 0, 0
	}
	var last []byte
	if e.n > 0 {
		last = e.prevKey
	}
	return r.checkMeta(e.n, e.minTime, e.maxTime, e.samples, func() ([]byte, []byte) { return e.first, last })
}

// Close releases the iterator's decoder. Entries decoded before stay valid.
func (e *Entries) Close() {
	if e.dec != nil {
		e.dec.Reset(nil)
		streamDecoderPool.Put(e.dec)
		e.dec, e.src = nil, nil
	}
	if e.err == nil && !e.done {
		e.err = errEntriesClosed
	}
}

var errEntriesClosed = errors.New("segment: entries closed")
