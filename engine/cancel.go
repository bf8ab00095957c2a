package engine

import (
	"context"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/segment"
)

// Cancellation. Every read (Query, QuerySeq, Last, the metadata calls,
// Verify) polls its context before each segment block it decodes, between
// the windows of samples it merges (at most PartSamples segment samples
// each) and every checkContextEvery series, so that it stops within one
// block's or one window's work of a cancellation and returns the context's
// error (errors.Is(err, context.Canceled) or context.DeadlineExceeded).
// QuerySeq yields that error as its last element: a caller tells a
// cancelled result from a complete one by it. Compaction polls its context
// before every block too (see compaction.Merge); Close cancels it.

// blockSource decodes segment blocks: a *segment.Reader or a
// *segment.BlockReader.
type blockSource interface {
	ReadBlock(s *segment.SeriesIndex, b int, dst []point.Sample) ([]point.Sample, error)
	ReadColumns(s *segment.SeriesIndex, b int, dst *point.Columns) error
}

// decodeBlock appends the samples of block b of si to dst, after checking
// ctx: every read path decodes its blocks through it.
func (db *DB) decodeBlock(ctx context.Context, src blockSource, si *segment.SeriesIndex, b int, dst []point.Sample) ([]point.Sample, error) {
	if err := ctx.Err(); err != nil {
		return dst, err
	}
	if hook := db.testOnBlockDecode; hook != nil {
		hook()
	}
	return src.ReadBlock(si, b, dst)
}

// decodeColumns appends the columns of block b of si to dst, after
// checking ctx, as decodeBlock appends samples.
func (db *DB) decodeColumns(ctx context.Context, src blockSource, si *segment.SeriesIndex, b int, dst *point.Columns) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if hook := db.testOnBlockDecode; hook != nil {
		hook()
	}
	return src.ReadColumns(si, b, dst)
}

// appendRange appends the samples of si with mint <= Time <= maxt to dst,
// decoding only the blocks that overlap the range, each through
// decodeBlock.
func (db *DB) appendRange(ctx context.Context, r blockSource, si *segment.SeriesIndex, mint, maxt int64, dst []point.Sample) ([]point.Sample, error) {
	return segment.AppendBlocksInRange(si, mint, maxt, dst, func(b int, dst []point.Sample) ([]point.Sample, error) {
		return db.decodeBlock(ctx, r, si, b, dst)
	})
}
