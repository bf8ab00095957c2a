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
	raw, ok, err := br.rawBlock(s, b)
	if !ok {
		return br.r.ReadBlock(s, b, dst)
	}
	if err != nil {
		return dst, err
	}
	if dst, err = decodeBlock(dst, raw, s.Kind, &s.Blocks[b], &br.sc); err != nil {
		return dst, br.r.corrupt(s.Blocks[b].Offset, fmt.Errorf("block %d of %q: %w", b, s.Key, err))
	}
	return dst, nil
}

// ReadColumns decodes block b of s, appending its timestamps and values to
// dst's columns, as Reader.ReadColumns does.
func (br *BlockReader) ReadColumns(s *SeriesIndex, b int, dst *point.Columns) error {
	raw, ok, err := br.rawBlock(s, b)
	if !ok {
		return br.r.ReadColumns(s, b, dst)
	}
	if err != nil {
		return err
	}
	return br.r.decodeColumnsOf(s, b, raw, dst)
}

// rawBlock returns the raw bytes of block b of s from the window, reading
// the window at the block when it does not hold it. ok is false when the
// Reader should read the block itself: b out of range, a block larger than
// the window, or a short or failed read (which the Reader reports).
func (br *BlockReader) rawBlock(s *SeriesIndex, b int) (raw []byte, ok bool, err error) {
	if b < 0 || b >= len(s.Blocks) {
		return nil, false, nil
	}
	bm := &s.Blocks[b]
	if bm.inline != nil {
		// Held in the index (format 2): nothing to read.
		return bm.inline, true, nil
	}
	end := bm.Offset + int64(bm.Length)
	if int(bm.Length) > br.window {
		return nil, false, nil
	}
	if bm.Offset < br.off || end > br.off+int64(len(br.buf)) {
		if cap(br.buf) < br.window {
			br.buf = make([]byte, br.window)
		}
		n, err := br.r.f.ReadAt(br.buf[:br.window], bm.Offset)
		if err != nil && !errors.Is(err, io.EOF) {
			br.buf, br.off = br.buf[:0], 0
			return nil, false, nil
		}
		br.buf, br.off = br.buf[:n], bm.Offset
		if end > br.off+int64(n) {
			// Short file: let ReadBlock report it.
			return nil, false, nil
		}
	}
	stored := br.buf[bm.Offset-br.off : end-br.off]
	raw, err = unframe(stored, maxBlockRaw(s.Kind, bm.Count), &br.sc)
	if err != nil {
		return nil, true, br.r.corrupt(bm.Offset, fmt.Errorf("block %d of %q: %w", b, s.Key, err))
	}
	return raw, true, nil
}
