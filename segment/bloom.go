package segment

import (
	"encoding/binary"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/cespare/xxhash/v2"
)

// A Writer with KeepIndex and a Series hint (a flush, which knows how
// many series it writes) sets the bits of its bloom filter as each series
// ends, in a filter sized for the hint, instead of keeping a hash per key
// until Finish: for a flush of 440,000 series the hashes were 3.5 MB, the
// filter is half a megabyte and is allocated anyway. When the series
// written need another size of filter than the hint's (some series of the
// hint had nothing to write), Finish builds it again from the keys of the
// index the Writer keeps. Either way the section is the one appendBloom
// writes for the keys' hashes, byte for byte.

// startBloom starts the bloom filter of a Writer for n keys.
func (w *Writer) startBloom(n int) {
	w.bloomM, w.bloomK = bloomParams(n)
	w.bloomWords = make([]uint64, (w.bloomM+63)/64)
}

// appendBloom appends the Writer's bloom section and returns it with the
// filter.
func (w *Writer) appendBloom(dst []byte) ([]byte, *bloom.BloomFilter) {
	if w.bloomWords == nil {
		return appendBloom(dst, w.hashes)
	}
	if m, k := bloomParams(w.meta.Series); m == w.bloomM && k == w.bloomK {
		return appendBloomWords(dst, w.bloomWords, m, k)
	}
	// The kept index holds every entry, which starts with its key.
	hashes := make([]uint64, len(w.kept.offs))
	entries := w.index[indexReserve:]
	for i, off := range w.kept.offs {
		e := entries[off:]
		n, k := binary.Uvarint(e)
		hashes[i] = xxhash.Sum64(e[k : k+int(n)])
	}
	return appendBloom(dst, hashes)
}
