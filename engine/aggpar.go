package engine

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/stratadb/strata/internal/catalog"
	"github.com/stratadb/strata/segment"
)

// Per-series queries (Query without GroupBy: aggregates, and raw reads,
// whose results Query holds whole anyway) read their series on several
// goroutines: each series is read on its own, so chunks of series are
// handed to workers and their results emitted in order by the caller's
// goroutine. QuerySeq reads raw series one at a time, to hold one part.
const (
	// aggParallelMin is the fewest series worth spreading over workers.
	aggParallelMin = 256
	// aggChunk is the series a worker aggregates per task.
	aggChunk = 64
	// aggMaxWorkers bounds the workers of one query.
	aggMaxWorkers = 4
	// aggReadWindow is the read-ahead of a worker's block reads: a chunk
	// of series in key order reads its segments' blocks in file order.
	aggReadWindow = 256 << 10
)

// blockSource returns where r decodes h's blocks from: h's Reader, or a
// read-ahead BlockReader when r sweeps many series.
func (r *seriesReader) blockSource(h *segHandle) blockSource {
	if r.readAhead == nil {
		return h.Reader
	}
	br := r.readAhead[h]
	if br == nil {
		br = h.Reader.NewBlockReader(aggReadWindow)
		r.readAhead[h] = br
	}
	return br
}

// queryParallel reads metas (sorted by key) on up to
// min(GOMAXPROCS, aggMaxWorkers) goroutines and emits one result per series
// with samples, in order, until emit returns false. At most two chunks per
// worker are held beyond the one being emitted.
func (r *seriesReader) queryParallel(ctx context.Context, q *Query, metas []catalog.Series, ids []uint64, mint, maxt int64, emit func(Series) bool) error {
	n := (len(metas) + aggChunk - 1) / aggChunk
	workers := min(runtime.GOMAXPROCS(0), aggMaxWorkers, n)
	type chunk struct {
		out []Series
		err error
	}
	results := make([]chan chunk, n)
	for i := range results {
		results[i] = make(chan chunk, 1)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	var next atomic.Int64
	slots := make(chan struct{}, 2*workers) // chunks claimed and not yet emitted
	for range workers {
		wg.Go(func() {
			w := seriesReader{ctx: ctx, db: r.db, snap: r.snap, cuts: r.cuts, readAhead: map[*segHandle]*segment.BlockReader{}}
			for {
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return
				}
				c := int(next.Add(1) - 1)
				if c >= n {
					return
				}
				lo, hi := c*aggChunk, min(len(metas), (c+1)*aggChunk)
				res := chunk{out: make([]Series, 0, hi-lo)}
				if res.err = ctx.Err(); res.err == nil {
					for i := lo; i < hi; i++ {
						samples, err := w.read(ids[i], &metas[i], mint, maxt, q)
						if err != nil {
							res.err = err
							break
						}
						if len(samples) > 0 {
							res.out = append(res.out, seriesResult(&metas[i], samples))
						}
					}
				}
				results[c] <- res
			}
		})
	}
	for c := range n {
		res := <-results[c]
		<-slots
		if res.err != nil {
			return res.err
		}
		for _, s := range res.out {
			if !emit(s) {
				return nil
			}
		}
	}
	return nil
}
