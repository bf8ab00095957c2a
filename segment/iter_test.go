package segment

import (
	"sort"
	"sync"

	"github.com/stratadb/strata/internal/point"
)

// iterator walks the samples of one series within a time range, decoding
// only the blocks that overlap it:
//
//	it := r.iter(s, mint, maxt)
//	for it.Next() {
//		s := it.At()
//	}
//	if err := it.Close(); err != nil { ... }
//
// An iterator is not safe for concurrent use; several iterators over one
// Reader are.
type iterator struct {
	r          *Reader
	s          *SeriesIndex
	mint, maxt int64
	next       int // next block to decode
	buf        *[]point.Sample
	samples    []point.Sample // decoded samples of the current block
	pos        int            // samples[pos-1] is the current sample
	end        int            // samples[end:] are after maxt
	err        error
	done       bool
}

// sampleBufs recycles the decoding buffers of closed iterators.
var sampleBufs = sync.Pool{New: func() any { return new([]point.Sample) }}

// maxPooledSamples keeps buffers of unusually large blocks out of the pool.
const maxPooledSamples = 1 << 16

// iter returns the samples of s with mint <= Time <= maxt (both bounds
// inclusive). Close the iterator to recycle its buffer.
func (r *Reader) iter(s *SeriesIndex, mint, maxt int64) *iterator {
	it := &iterator{r: r, s: s, mint: mint, maxt: maxt, done: mint > maxt}
	it.next = sort.Search(len(s.Blocks), func(i int) bool { return s.Blocks[i].MaxTime >= mint })
	return it
}

// Next advances to the next sample and reports whether there is one.
func (it *iterator) Next() bool {
	if it.pos < it.end {
		it.pos++
		return true
	}
	return it.nextBlock()
}

// nextBlock decodes blocks until one has a sample in range.
func (it *iterator) nextBlock() bool {
	for !it.done {
		if it.next >= len(it.s.Blocks) || it.s.Blocks[it.next].MinTime > it.maxt {
			it.done = true
			break
		}
		if it.buf == nil {
			it.buf = sampleBufs.Get().(*[]point.Sample)
		}
		bm := &it.s.Blocks[it.next]
		samples, err := it.r.ReadBlock(it.s, it.next, (*it.buf)[:0])
		*it.buf = samples
		it.next++
		if err != nil {
			it.err = err
			it.done = true
			break
		}
		it.samples = samples
		it.pos, it.end = 0, len(samples)
		if bm.MinTime < it.mint {
			it.pos = sort.Search(len(samples), func(i int) bool { return samples[i].Time >= it.mint })
		}
		if bm.MaxTime > it.maxt {
			it.end = sort.Search(len(samples), func(i int) bool { return samples[i].Time > it.maxt })
			if it.end < len(samples) {
				it.done = true // later blocks start after maxt too
			}
		}
		if it.pos < it.end {
			it.pos++
			return true
		}
	}
	it.samples, it.pos, it.end = nil, 0, 0
	return false
}

// At returns the current sample. It is valid until the next call to Next.
func (it *iterator) At() point.Sample { return it.samples[it.pos-1] }

// Err returns the error that stopped the iteration, if any.
func (it *iterator) Err() error { return it.err }

// Close releases the iterator's buffer and returns Err. Next returns false
// after Close.
func (it *iterator) Close() error {
	it.done = true
	it.samples, it.pos, it.end = nil, 0, 0
	if it.buf != nil {
		if cap(*it.buf) <= maxPooledSamples {
			if it.s.Kind == point.KindString {
				clear((*it.buf)[:cap(*it.buf)]) // drop string references
			}
			*it.buf = (*it.buf)[:0]
			sampleBufs.Put(it.buf)
		}
		it.buf = nil
	}
	return it.err
}
