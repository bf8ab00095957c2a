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
	type chunk struct {
		out []Series
		err error
	}
	return inOrder(r, ctx, len(metas), func(w *seriesReader, lo, hi int) chunk {
		res := chunk{out: make([]Series, 0, hi-lo), err: w.ctx.Err()}
		for i := lo; i < hi && res.err == nil; i++ {
			w.slabRest = hi - i
			samples, err := w.read(ids[i], &metas[i], mint, maxt, q)
			if err != nil {
				res.err = err
				break
			}
			if len(samples) > 0 {
				res.out = append(res.out, seriesResult(&metas[i], samples))
			}
		}
		return res
	}, func(res chunk) (bool, error) {
		if res.err != nil {
			return false, res.err
		}
		for _, s := range res.out {
			if !emit(s) {
				return false, nil
			}
		}
		return true, nil
	})
}

// inOrder splits n series (sorted by key) into chunks of aggChunk, has
// produce read chunk [lo, hi) on up to min(GOMAXPROCS, aggMaxWorkers)
// goroutines, each with a seriesReader of its own over r's snapshot (with
// read-ahead), and passes the results to consume in chunk order on the
// caller's goroutine until it returns false or an error. At most two
// chunks per worker are produced beyond the one being consumed. The
// context produce sees (w.ctx) is cancelled once inOrder returns.
func inOrder[T any](r *seriesReader, ctx context.Context, n int, produce func(w *seriesReader, lo, hi int) T, consume func(T) (bool, error)) error {
	chunks := (n + aggChunk - 1) / aggChunk
	workers := min(runtime.GOMAXPROCS(0), aggMaxWorkers, chunks)
	results := make([]chan T, chunks)
	for i := range results {
		results[i] = make(chan T, 1)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	var next atomic.Int64
	slots := make(chan struct{}, 2*workers) // chunks claimed and not yet consumed
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
				if c >= chunks {
					return
				}
				results[c] <- produce(&w, c*aggChunk, min(n, (c+1)*aggChunk))
			}
		})
	}
	for c := range chunks {
		res := <-results[c]
		<-slots
		if more, err := consume(res); err != nil || !more {
			return err
		}
	}
	return nil
}
