package segment

import (
	"errors"
	"fmt"
	"io"

	"github.com/stratadb/strata/internal/point"
)

// BlockReader reads blocks of one Reader through a read-ahead window: a
// caller that reads one block of each of many series in file (key) order
// pays for a few large reads instead of one read per block. Blocks are
// checked and decoded exactly as by Reader.ReadBlock; blocks kept inline in
// the index are decoded from there. A BlockReader is not
// safe for concurrent use.
type BlockReader struct {
	r      *Reader
	window int
	buf    []byte
	off    int64 // file offset of buf[0]
	sc     blockScratch
}

// NewBlockReader returns a BlockReader with a window of window bytes.
func (r *Reader) NewBlockReader(window int) *BlockReader {
	return &BlockReader{r: r, window: window}
}

// ReadBlock decodes block b of s, appending its samples to dst.
func (br *BlockReader) ReadBlock(s *SeriesIndex, b int, dst []point.Sample) ([]point.Sample, error) {
	if b < 0 || b >= len(s.Blocks) {
		return br.r.ReadBlock(s, b, dst)
	}
	bm := &s.Blocks[b]
	if bm.inline != nil {
		// Held in the index (format 2): nothing to read.
		dst, err := decodeBlock(dst, bm.inline, s.Kind, bm, &br.sc)
		if err != nil {
			return dst, br.r.corrupt(bm.Offset, fmt.Errorf("block %d of %q: %w", b, s.Key, err))
		}
		return dst, nil
	}
	end := bm.Offset + int64(bm.Length)
	if int(bm.Length) > br.window {
		return br.r.ReadBlock(s, b, dst)
	}
	if bm.Offset < br.off || end > br.off+int64(len(br.buf)) {
		if cap(br.buf) < br.window {
			br.buf = make([]byte, br.window)
		}
		n, err := br.r.f.ReadAt(br.buf[:br.window], bm.Offset)
		if err != nil && !errors.Is(err, io.EOF) {
			br.buf, br.off = br.buf[:0], 0
			return br.r.ReadBlock(s, b, dst)
		}
		br.buf, br.off = br.buf[:n], bm.Offset
		if end > br.off+int64(n) {
			// Short file: let ReadBlock report it.
			return br.r.ReadBlock(s, b, dst)
		}
	}
	stored := br.buf[bm.Offset-br.off : end-br.off]
	raw, err := unframe(stored, maxBlockRaw(s.Kind, bm.Count), &br.sc)
	if err != nil {
		return dst, br.r.corrupt(bm.Offset, fmt.Errorf("block %d of %q: %w", b, s.Key, err))
	}
	dst, err = decodeBlock(dst, raw, s.Kind, bm, &br.sc)
	if err != nil {
		return dst, br.r.corrupt(bm.Offset, fmt.Errorf("block %d of %q: %w", b, s.Key, err))
	}
	return dst, nil
}
