package catalog

import (
	"encoding/binary"
	"slices"
	"sync"
)

// catalogChunk is the most raw bytes of entries that a version 2 record
// compresses as one zstd frame, past one entry (a variable for tests). A
// larger record is compressed a chunk at a time into frames that follow
// one another, which a zstd decoder reads as one stream: so only the
// compressed form of a record is ever held whole. Built whole first, the
// entries of a flush of a million series were tens of megabytes held only
// to be compressed. A chunk is the encoder's window: a frame loses only
// the matches its first bytes would have found in the previous one.
var catalogChunk = 256 << 10

// catalogScratch holds the buffers chunks are encoded in.
var catalogScratch sync.Pool

// appendCatalogRecord appends the version 2 payload of series [from, to):
// compressed when that pays (codec 1), else raw (codec 0).
func (c *Catalog) appendCatalogRecord(dst []byte, from, to int) ([]byte, error) {
	c.mu.RLock()
	l := c.series // a snapshot: its first n series are read without the lock
	c.mu.RUnlock()
	rawLen := l.entriesLen(from, to)
	start := len(dst)
	if rawLen >= catalogMinCompress {
		enc, err := catalogEncoder()
		if err != nil {
			return nil, err
		}
		dst = append(dst, catalogZstd)
		dst = binary.AppendUvarint(dst, uint64(rawLen))
		body := len(dst)
		var chunk []byte
		if p, ok := catalogScratch.Get().(*[]byte); ok && cap(*p) >= min(rawLen, catalogChunk) {
			chunk = (*p)[:0]
		} else {
			// Room for a chunk and the entry that passes it.
			chunk = make([]byte, 0, min(rawLen, catalogChunk+catalogChunk/16))
		}
		chunk = binary.AppendUvarint(chunk, uint64(to-from))
		done := 0 // raw bytes compressed so far
		for id := from; id < to; id++ {
			chunk = l.appendEntry(chunk, id)
			if len(chunk) < catalogChunk && id < to-1 {
				continue
			}
			first := done == 0
			if first {
				// Keys compress several times over: room for a quarter
				// of the first chunk, grown by the encoder when short.
				dst = slices.Grow(dst, len(chunk)/4+64)
			}
			dst = enc.EncodeAll(chunk, dst)
			done += len(chunk)
			if first && done < rawLen {
				// Room for the rest at the first frame's ratio, and an
				// eighth more: the buffer is not grown step by step.
				// In 64 bits: the product passes 2^31 on 32-bit platforms.
				est := int(int64(len(dst)-body) * int64(rawLen-done) / int64(done))
				dst = slices.Grow(dst, est+est/8+64)
			}
			chunk = chunk[:0]
		}
		if cap(chunk) >= catalogChunk {
			catalogScratch.Put(&chunk)
		}
		if n := len(dst) - body; n < rawLen && uint64(rawLen) <= catalogMaxRatio*uint64(n) {
			return dst, nil
		}
		dst = dst[:start]
	}
	dst = slices.Grow(dst, 1+rawLen)
	dst = append(dst, catalogRaw)
	dst = binary.AppendUvarint(dst, uint64(to-from))
	for id := from; id < to; id++ {
		dst = l.appendEntry(dst, id)
	}
	return dst, nil
}
