package segment

import (
	"encoding/binary"
	"fmt"

	"github.com/bits-and-blooms/bloom/v3"
)

// keptIndex is what a Writer with KeepIndex keeps for FinishReader, with
// the raw index the Writer keeps whole: the start of every series' entry
// in it and of its stored blocks in the file, then the Reader's index
// table and bloom filter. With it, the Reader of a segment just written
// costs no read of the file, no decompression and no parse of the index:
// in a flush of 200,000 series, reopening the segment took a sixth of the
// time Close waited for.
type keptIndex struct {
	hint int      // WriterOptions.Series
	offs []uint32 // start of series i's entry, among the entries until finish
	data []int64  // file offset of series i's first stored block
	end  int64    // where the stored blocks of the last series end

	t  *indexTable // set by finish
	bf *bloom.BloomFilter
}

func newKeptIndex(series int) *keptIndex {
	n := min(max(series, 0), maxSeriesHint)
	return &keptIndex{hint: n, end: headerLen, offs: make([]uint32, 0, n), data: make([]int64, 0, n)}
}

// series records the next series: its entry starts entryOff bytes into the
// entries and its stored blocks end at dataEnd (they start where those of
// the series before end).
func (k *keptIndex) series(entryOff, dataEnd int64) {
	k.offs = append(k.offs, uint32(entryOff)) // appendIndex bounds the index far below 4 GiB
	k.data = append(k.data, k.end)
	k.end = dataEnd
}

// size returns the bytes an index buffer holding n bytes, entries of the
// series recorded so far, needs for the entries of every series the hint
// announces at the same size, or 0 when the hint is no larger than the
// series so far.
func (k *keptIndex) size(n int) int {
	if s := len(k.offs); s > 0 && k.hint > s {
		return indexReserve + int(min(int64(n-indexReserve)*int64(k.hint)/int64(s), maxSectionRaw))
	}
	return 0
}

// finish builds the Reader's index table, as parseIndex would build it
// from the section at indexOff, from index (indexReserve bytes then every
// entry) and the Writer's Meta of n series, and keeps the bloom filter.
// The Reader holds the raw index for the segment's life: finish takes
// index, and reports it, when its capacity is at most 1/16 more than it
// holds; else it copies the entries to a buffer of their size.
func (k *keptIndex) finish(n int, index []byte, indexOff int64, m Meta, bf *bloom.BloomFilter) (took bool) {
	var count [binary.MaxVarintLen64]byte
	c := binary.PutUvarint(count[:], uint64(n))
	buf, entries := index, len(index)-indexReserve
	if cap(index)-len(index) > entries/16 {
		buf = make([]byte, len(index))
		copy(buf[indexReserve:], index[indexReserve:])
	} else {
		took = true
	}
	copy(buf[indexReserve-c:], count[:c])
	for i := range k.offs {
		k.offs[i] += uint32(c)
	}
	k.t = &indexTable{
		raw:     buf[indexReserve-c:],
		version: formatVersion,
		indexAt: indexOff,
		offs:    k.offs,
		data:    k.data,
		minTime: m.MinTime,
		maxTime: m.MaxTime,
		samples: m.Samples,
	}
	k.bf = bf
	return took
}

// FinishReader finishes the segment as Finish does, byte for byte, and
// returns a Reader of it. With WriterOptions.KeepIndex the Reader is built
// from what the Writer holds: the file is opened but neither its index nor
// its bloom filter is read back, and the Reader is the one Open would
// return. Without it, FinishReader is Finish then OpenLazy: the index is
// read back when it is first needed. An error from opening the published
// file leaves the file in place.
func (w *Writer) FinishReader() (*Reader, error) {
	meta, err := w.Finish()
	if err != nil {
		return nil, err
	}
	k := w.kept
	w.kept = nil
	if k == nil || k.t == nil {
		return OpenLazy(w.fs, w.path, meta)
	}
	f, err := w.fs.Open(w.path)
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	r := &Reader{f: f, path: w.path, bloom: k.bf, version: formatVersion}
	r.table.Store(k.t)
	r.meta = Meta{Path: w.path, Size: meta.Size, Series: k.t.len(), MinTime: meta.MinTime, MaxTime: meta.MaxTime, Samples: meta.Samples}
	r.meta.FirstKey, r.meta.LastKey = k.t.firstLast()
	return r, nil
}
