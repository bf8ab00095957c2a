package engine

import (
	"context"
	"iter"
	"runtime"
	"sync"
	"unsafe"

	"github.com/stratadb/strata/internal/catalog"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/segment"
)

// Columns is a run of raw samples of one series, column by column: what
// Scan yields. Times holds the sample times (Unix ns, ascending); the
// values are in the column of the series' Kind (Floats, Ints, Uints, Bools
// or Strings), the others nil. A Columns, its Tags and its columns belong
// to the scan: they are valid until the loop body returns and must not be
// modified; copy what you keep.
type Columns struct {
	Measurement string
	Tags        []Tag // sorted by key
	Field       string
	Kind        Kind
	Times       []int64
	Floats      []float64
	Ints        []int64
	Uints       []uint64
	Bools       []bool
	Strings     []string

	bools []bool // Bools' buffer, kept from run to run (and Tags')
}

// Len returns the number of samples in c.
func (c *Columns) Len() int { return len(c.Times) }

// Sample returns sample i of c.
func (c *Columns) Sample(i int) Sample {
	var v Value
	switch c.Kind {
	case KindFloat:
		v = Float(c.Floats[i])
	case KindInt:
		v = Int(c.Ints[i])
	case KindUint:
		v = Uint(c.Uints[i])
	case KindBool:
		v = Bool(c.Bools[i])
	case KindString:
		v = String(c.Strings[i])
	}
	return Sample{Time: c.Times[i], Value: v}
}

// set points c at the samples cols holds for series m. The numeric columns
// are cols.Bits seen as the kind's Go type: same size, and a value's bits
// are its IEEE-754 or two's complement encoding.
func (c *Columns) set(m *catalog.Series, cols *point.Columns) *Columns {
	*c = Columns{Measurement: m.Set.Measurement(), Tags: m.Set.AppendTags(c.Tags[:0]), Field: m.Field, Kind: m.Kind,
		Times: cols.Times, bools: c.bools}
	bits := cols.Bits
	switch m.Kind {
	case KindFloat:
		c.Floats = unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(bits))), len(bits))
	case KindInt:
		c.Ints = unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(bits))), len(bits))
	case KindUint:
		c.Uints = bits
	case KindBool:
		c.bools = c.bools[:0]
		for _, b := range bits {
			c.bools = append(c.bools, b != 0)
		}
		c.Bools = c.bools
	case KindString:
		c.Strings = cols.Strings
	}
	return c
}

// Scan streams the raw samples of the series s selects, exactly those that
// Query returns for it without aggregation, column by column instead of as
// Samples: the fastest way to read many samples, since nothing is
// allocated per sample or per series.
//
// It yields every series with samples in [s.Start, s.End) in Query's order
// (by canonical series key), each in one or more consecutive Columns: a
// series with more than PartSamples samples in range comes in parts, as
// QuerySeq yields it. An error is yielded once, last, with a nil Columns.
// The scan reads one consistent snapshot, held until the loop ends;
// breaking out of the loop releases it. Many series are decoded ahead on
// up to four goroutines, holding a bounded number of samples.
func (db *DB) Scan(ctx context.Context, s Selector) iter.Seq2[*Columns, error] {
	return func(yield func(*Columns, error) bool) {
		stopped := false
		err := db.scan(ctx, s, func(c *Columns) bool {
			if !yield(c, nil) {
				stopped = true
				return false
			}
			return true
		})
		if err != nil && !stopped {
			yield(nil, err)
		}
	}
}

// scan runs Scan, passing each run to emit until it returns false.
func (db *DB) scan(ctx context.Context, s Selector, emit func(*Columns) bool) error {
	sel, ok, err := db.selectRead(ctx, &Query{Selector: s})
	if !ok {
		return err
	}
	defer db.releaseSnapshot(sel.snap)
	metas, ids, mint, maxt := sel.metas, sel.ids, sel.mint, sel.maxt
	r := seriesReader{ctx: ctx, db: db, snap: sel.snap, cuts: sel.cuts}
	if len(metas) >= aggParallelMin && runtime.GOMAXPROCS(0) > 1 {
		// The series left to this goroutine come in key (file) order too.
		r.readAhead = map[*segHandle]*segment.BlockReader{}
		return r.scanParallel(ctx, metas, ids, mint, maxt, emit)
	}
	var cols point.Columns
	var out Columns
	for i := range metas {
		if i%checkContextEvery == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		more, _, err := r.scanSeries(ids[i], &metas[i], mint, maxt, &cols, false, func() bool {
			ok := emit(out.set(&metas[i], &cols))
			cols.Reset()
			return ok
		})
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// scanSeries appends the visible raw samples of one series in [mint, maxt]
// to cols window by window, as Query merges them, and calls emit after each
// window that added samples (the caller empties cols there or keeps
// appending). It returns false when emit asked to stop. With whole, a
// series of more than one window is left unread and reported as deferred.
func (r *seriesReader) scanSeries(id uint64, meta *catalog.Series, mint, maxt int64, cols *point.Columns, whole bool, emit func() bool) (more, deferred bool, err error) {
	if mint = r.seriesMin(id, mint); mint > maxt {
		return true, false, nil
	}
	srcs, tombs := r.sourcesAndTombs(id, meta, mint, maxt)
	if len(srcs) == 0 {
		return true, false, nil
	}
	r.ends = r.windowEnds(id, srcs, mint, maxt, r.db.partSamples)
	if whole && len(r.ends) > 1 {
		return true, true, nil
	}
	// One segment without tombstones or rollups: decode its blocks
	// straight into the columns. Otherwise merge as Query does.
	s := srcs[0]
	direct := len(srcs) == 1 && s.seg != nil && len(tombs) == 0 && len(s.idx.Rollups) == 0
	lo := mint
	for _, hi := range r.ends {
		n0 := cols.Len()
		if direct {
			src := r.blockSource(s.seg)
			err = segment.AppendColumnsInRange(s.idx, lo, hi, cols, func(b int, dst *point.Columns) error {
				return r.db.decodeColumns(r.ctx, src, s.idx, b, dst)
			})
		} else {
			var merged []point.Sample
			if merged, err = r.mergeSources(id, srcs, tombs, lo, hi); err == nil {
				cols.AppendSamples(meta.Kind, merged)
			}
		}
		if err == nil {
			err = r.ctx.Err()
		}
		if err != nil {
			return false, false, err
		}
		lo = hi + 1
		if cols.Len() > n0 && !emit() {
			return false, false, nil
		}
	}
	return true, false, nil
}

// scanChunkSamples bounds the samples one chunk of scanParallel holds
// (plus one window of its last series): series past it are left to the
// emitting goroutine.
const scanChunkSamples = 1 << 17

// scanRun is one run of samples a scanParallel worker decoded: samples
// [start, end) of metas[series] in its chunk's buffer for the kind, or, when deferred, a series the
// emitting goroutine reads itself.
type scanRun struct {
	series     int
	start, end int
	deferred   bool
}

// scanChunk holds the runs of one chunk: numeric and boolean series in
// num, string series in str, so that each buffer's columns stay aligned.
type scanChunk struct {
	num, str point.Columns
	runs     []scanRun
	err      error
}

// scanChunks recycles chunks, and their column buffers, across scans.
var scanChunks = sync.Pool{New: func() any { return new(scanChunk) }}

// putScanChunk returns ch to the pool unless its buffers grew past what a
// chunk normally holds.
func putScanChunk(ch *scanChunk) {
	if cap(ch.num.Times)+cap(ch.str.Times) <= 4*scanChunkSamples {
		ch.str.Reset()
		scanChunks.Put(ch)
	}
}

// of returns the buffer that holds series of kind k.
func (ch *scanChunk) of(k Kind) *point.Columns {
	if k == KindString {
		return &ch.str
	}
	return &ch.num
}

// scanParallel is scan's loop over metas on up to min(GOMAXPROCS,
// aggMaxWorkers) goroutines (inOrder): workers decode chunks of aggChunk
// series ahead into pooled column buffers, emitted in order. A series
// longer than one window, and every series of a chunk past scanChunkMax
// samples, is read by the emitting goroutine in windows instead, so that
// memory stays bounded.
func (r *seriesReader) scanParallel(ctx context.Context, metas []catalog.Series, ids []uint64, mint, maxt int64, emit func(*Columns) bool) error {
	var out Columns
	var cols point.Columns
	return inOrder(r, ctx, len(metas), func(w *seriesReader, lo, hi int) *scanChunk {
		ch := scanChunks.Get().(*scanChunk)
		ch.num.Reset()
		ch.str.Reset()
		ch.runs, ch.err = ch.runs[:0], w.ctx.Err()
		for i := lo; i < hi && ch.err == nil; i++ {
			if ch.num.Len()+ch.str.Len() >= r.db.scanChunkMax {
				ch.runs = append(ch.runs, scanRun{series: i, deferred: true})
				continue
			}
			cols := ch.of(metas[i].Kind)
			start := cols.Len()
			var deferred bool
			_, deferred, ch.err = w.scanSeries(ids[i], &metas[i], mint, maxt, cols, true, func() bool { return true })
			if deferred || cols.Len() > start {
				ch.runs = append(ch.runs, scanRun{series: i, start: start, end: cols.Len(), deferred: deferred})
			}
		}
		return ch
	}, func(ch *scanChunk) (bool, error) {
		defer putScanChunk(ch)
		if ch.err != nil {
			return false, ch.err
		}
		for _, run := range ch.runs {
			m := &metas[run.series]
			if run.deferred {
				more, _, err := r.scanSeries(ids[run.series], m, mint, maxt, &cols, false, func() bool {
					ok := emit(out.set(m, &cols))
					cols.Reset()
					return ok
				})
				if err != nil || !more {
					return false, err
				}
				continue
			}
			src := ch.of(m.Kind)
			view := point.Columns{Times: src.Times[run.start:run.end:run.end]}
			if m.Kind == KindString {
				view.Strings = src.Strings[run.start:run.end:run.end]
			} else {
				view.Bits = src.Bits[run.start:run.end:run.end]
			}
			if !emit(out.set(m, &view)) {
				return false, nil
			}
		}
		return true, nil
	})
}
