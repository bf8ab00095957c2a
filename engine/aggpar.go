package engine

import (
	"context"
	"errors"
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
// goroutine. QuerySeq reads raw series ahead the same way within a sample
// budget per chunk (readPartsParallel), and reads a series of several
// parts on the caller's goroutine, one part at a time.
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

// errNeedsParts is readParts' answer, with whole set, for a series of
// more than one part.
var errNeedsParts = errors.New("series needs more than one part")

// readPartsParallel is QuerySeq's raw read of metas (sorted by key) with
// the series read ahead on up to min(GOMAXPROCS, aggMaxWorkers)
// goroutines, in chunks as queryParallel. Read ahead, a chunk stops at a
// series of more than one part, or once it holds part samples: the
// caller's goroutine reads the rest of that chunk itself, part by part,
// after emitting what the workers read. So no series sits in memory
// whole, and the results read ahead hold at most about 2*part samples
// for each of the 2*workers+1 chunks in flight. Each result is allocated
// on its own, as the sequential QuerySeq's.
func (r *seriesReader) readPartsParallel(metas []catalog.Series, ids []uint64, mint, maxt int64, part int, emit func(Series) bool) error {
	type chunk struct {
		out  []Series
		stop int // the first series the workers left to the caller
		hi   int
		err  error
	}
	return inOrder(r, r.ctx, len(metas), func(w *seriesReader, lo, hi int) chunk {
		res := chunk{stop: hi, hi: hi, err: w.ctx.Err()}
		held := 0
		for i := lo; i < hi && res.err == nil; i++ {
			if held >= part {
				res.stop = i
				break
			}
			_, err := w.readParts(ids[i], &metas[i], mint, maxt, part, true, func(s Series) bool {
				res.out = append(res.out, s)
				held += len(s.Samples)
				return true
			})
			if errors.Is(err, errNeedsParts) {
				res.stop = i
				break
			}
			res.err = err
		}
		if hook := w.db.testReadAhead; hook != nil {
			hook(held)
		}
		return res
	}, func(res chunk) (bool, error) {
		for _, s := range res.out {
			if err := r.ctx.Err(); err != nil {
				return false, err
			}
			if !emit(s) {
				return false, nil
			}
		}
		if res.err != nil {
			return false, res.err
		}
		for i := res.stop; i < res.hi; i++ {
			if err := r.ctx.Err(); err != nil {
				return false, err
			}
			if more, err := r.readParts(ids[i], &metas[i], mint, maxt, part, false, emit); err != nil || !more {
				return false, err
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
// context produce sees (w.ctx) is cancelled once inOrder returns. Once ctx
// is cancelled, workers stop claiming chunks, so inOrder returns ctx's
// error rather than wait for a chunk that no worker will produce.
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
			if hook := r.db.testInOrder; hook != nil {
				defer hook(false)
			}
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
				if hook := r.db.testInOrder; hook != nil {
					hook(true)
				}
			}
		})
	}
	for c := range chunks {
		var res T
		select {
		case res = <-results[c]:
		case <-ctx.Done():
			return ctx.Err()
		}
		<-slots
		if more, err := consume(res); err != nil || !more {
			return err
		}
	}
	return nil
}
