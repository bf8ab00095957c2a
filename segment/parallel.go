package segment

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/xsum"
)

// Limits of a Parallel's batches (not part of the format). A batch is the
// unit handed to a worker: a few hundred short series, or one long one.
const (
	parBatchSeries  = 256
	parBatchSamples = 64 << 10
	// parWindowPerWorker batches per worker may be queued or encoded
	// ahead of the Writer at once: what bounds a Parallel's memory.
	parWindowPerWorker = 4
)

// Parallel encodes the blocks of whole series (timestamps, values, stats,
// exact sums and zstd) on several goroutines and hands them to its Writer
// in the order they were added, so the file is byte for byte the one the
// Writer's own Add would have written. At most a fixed window of batches
// of series is in flight: memory stays bounded whatever the segment's
// size. Add and Close run in the caller's goroutine, which alone touches
// the Writer; a Parallel is not safe for concurrent use.
type Parallel struct {
	w       *Writer
	work    chan *parBatch // batches for the workers
	pending []*parBatch    // batches handed out, in order, not yet written
	free    []*parBatch
	window  int
	cur     *parBatch // batch being filled
	last    []byte    // last key added
	haveKey bool
	closed  bool
	done    chan struct{} // closed when every worker has returned

	// The most series, key bytes and samples a batch held so far: a
	// new batch starts with room for them, so that each of the window's
	// batches is not grown step by step as the first one was.
	maxSeries, maxKeys, maxSamples int
}

// parBatch is a run of consecutive series: their samples in, their
// encoded blocks out.
type parBatch struct {
	series []parSeries
	keys   []byte
	times  []int64
	vals   []uint64
	strs   []string
	// Output: the blocks of every series in order, and their bytes (stored
	// blocks framed, inline candidates raw) and exact sums back to back.
	blocks   []parBlock
	out      []byte
	partials []byte
	err      error // of encoding
	ready    chan struct{}
	inline   int // WriterOptions.InlineBytes
	block    int // WriterOptions.BlockSamples
}

type parSeries struct {
	// Where the series' key, samples (times, and values or strings) and
	// blocks end in its batch.
	keyEnd, sampleEnd, valEnd, strEnd, blockEnd int
	kind                                        point.Kind
}

type parBlock struct {
	bm         BlockMeta // Offset and Partial are set by the Writer
	outEnd     int
	partialEnd int
	inline     bool // raw, small enough to be inline
}

// NewParallel returns a Parallel feeding w with workers encoding
// goroutines (workers <= 0: GOMAXPROCS). w must not be used until Close
// or Abort returns.
func NewParallel(w *Writer, workers int) *Parallel {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	p := &Parallel{
		w:      w,
		window: parWindowPerWorker * workers,
		done:   make(chan struct{}),
	}
	p.work = make(chan *parBatch, p.window)
	if w.have {
		p.last, p.haveKey = bytes.Clone(w.key), true
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var pw parWorker
			for b := range p.work {
				b.err = b.encode(&pw)
				close(b.ready)
			}
			if pw.enc != nil {
				putEncoder(pw.enc)
			}
		})
	}
	go func() {
		wg.Wait()
		close(p.done)
	}()
	return p
}

// Add appends the whole series key (every sample it will have) of the
// given kind. Keys must be strictly increasing, also across the series the
// Writer held before. The arguments are checked, and copied, before Add
// returns; errors are those of Writer.Add, and an I/O error of the Writer
// is returned by a later Add or by Close.
func (p *Parallel) Add(key []byte, kind point.Kind, samples []point.Sample) error {
	if p.closed {
		return errFinished
	}
	if p.w.err != nil {
		return p.w.err
	}
	if !kind.Valid() {
		return fmt.Errorf("%w: segment: add %q: kind %d", base.ErrInvalid, key, kind)
	}
	if len(key) == 0 {
		return fmt.Errorf("%w: segment: add: empty series key", base.ErrInvalid)
	}
	if p.haveKey && bytes.Compare(key, p.last) <= 0 {
		return fmt.Errorf("%w: segment: add: key %q not after %q", base.ErrInvalid, key, p.last)
	}
	if err := checkSamples(key, kind, samples, 0, false); err != nil {
		return err
	}
	if len(samples) == 0 {
		return nil
	}
	p.last, p.haveKey = append(p.last[:0], key...), true
	b := p.cur
	if b == nil {
		b = p.batch()
		p.cur = b
	}
	b.keys = append(b.keys, key...)
	if kind == point.KindString {
		for i := range samples {
			b.times = append(b.times, samples[i].Time)
			b.strs = append(b.strs, samples[i].Value.Str())
		}
	} else {
		n, m, c := len(b.times), len(b.vals), len(samples)
		b.times = slices.Grow(b.times, c)[:n+c]
		b.vals = slices.Grow(b.vals, c)[:m+c]
		times, vals := b.times[n:], b.vals[m:]
		for i := range times {
			times[i] = samples[i].Time
			vals[i] = samples[i].Value.Bits()
		}
	}
	b.series = append(b.series, parSeries{keyEnd: len(b.keys), sampleEnd: len(b.times), valEnd: len(b.vals), strEnd: len(b.strs), kind: kind})
	if len(b.series) >= parBatchSeries || len(b.times) >= parBatchSamples {
		return p.send()
	}
	return nil
}

// batch returns an empty batch, reused when one is free.
func (p *Parallel) batch() *parBatch {
	var b *parBatch
	if n := len(p.free); n > 0 {
		b, p.free = p.free[n-1], p.free[:n-1]
		b.series, b.keys, b.times, b.vals = b.series[:0], b.keys[:0], b.times[:0], b.vals[:0]
		clear(b.strs)
		b.strs = b.strs[:0]
		b.blocks, b.out, b.partials, b.err = b.blocks[:0], b.out[:0], b.partials[:0], nil
	} else {
		b = &parBatch{inline: p.w.opts.InlineBytes, block: p.w.opts.BlockSamples}
		if p.maxSeries > 0 {
			b.series = make([]parSeries, 0, p.maxSeries)
			b.keys = make([]byte, 0, p.maxKeys)
			b.times = make([]int64, 0, p.maxSamples)
			b.vals = make([]uint64, 0, p.maxSamples)
		}
	}
	b.ready = make(chan struct{})
	return b
}

// send hands the current batch to the workers, first writing out the
// oldest batches until the window has room.
func (p *Parallel) send() error {
	b := p.cur
	p.cur = nil
	p.maxSeries = max(p.maxSeries, len(b.series))
	p.maxKeys = max(p.maxKeys, len(b.keys))
	p.maxSamples = max(p.maxSamples, len(b.times), len(b.vals))
	for len(p.pending) >= p.window {
		if err := p.writeOldest(); err != nil {
			return err
		}
	}
	p.pending = append(p.pending, b)
	p.work <- b
	return nil
}

// writeOldest waits for the oldest batch in flight and adds its series to
// the Writer.
func (p *Parallel) writeOldest() error {
	b := p.pending[0]
	p.pending = p.pending[1:]
	<-b.ready
	err := b.err
	if err == nil {
		err = p.w.addBatch(b)
	}
	p.free = append(p.free, b)
	return err
}

// Close writes every series added to the Writer and stops the workers.
// The Writer is then the caller's again (Finish it, or Abort it on error).
func (p *Parallel) Close() error {
	if p.closed {
		return errFinished
	}
	var err error
	if p.cur != nil {
		err = p.send()
	}
	for err == nil && len(p.pending) > 0 {
		err = p.writeOldest()
	}
	p.stop()
	return err
}

// Abort stops the workers and drops the series not yet written. The
// Writer must then be aborted.
func (p *Parallel) Abort() {
	if !p.closed {
		p.stop()
	}
}

func (p *Parallel) stop() {
	p.closed = true
	close(p.work)
	<-p.done
	p.pending, p.free, p.cur = nil, nil, nil
}

// parWorker is what a worker keeps from batch to batch. Its zstd encoder
// is taken on first use: the blocks of a flush of short series are all
// inline, and need none.
type parWorker struct {
	sc  blockScratch
	enc *zstd.Encoder
}

// encode encodes the blocks of every series of b, cutting them as
// Writer.Add does.
func (b *parBatch) encode(pw *parWorker) error {
	b.blocks = slices.Grow(b.blocks, len(b.series)) // a block a series at least
	start, valStart, strStart := 0, 0, 0
	for i := range b.series {
		s := &b.series[i]
		times := b.times[start:s.sampleEnd]
		vals, strs := b.vals[valStart:s.valEnd], b.strs[strStart:s.strEnd]
		valStart, strStart = s.valEnd, s.strEnd
		for len(times) > 0 {
			n := min(len(times), b.block)
			if s.kind == point.KindString {
				size := 0
				for j := range n {
					size += len(strs[j])
					if size >= blockTargetBytes {
						n = j + 1
						break
					}
				}
				if err := b.encodeBlock(pw, s.kind, times[:n], nil, strs[:n]); err != nil {
					return err
				}
				strs = strs[n:]
			} else {
				if err := b.encodeBlock(pw, s.kind, times[:n], vals[:n], nil); err != nil {
					return err
				}
				vals = vals[n:]
			}
			times = times[n:]
		}
		s.blockEnd = len(b.blocks)
		start = s.sampleEnd
	}
	return nil
}

// encodeBlock is the share of Writer.flushBlock that does not depend on
// the Writer's state.
func (b *parBatch) encodeBlock(pw *parWorker, kind point.Kind, times []int64, vals []uint64, strs []string) error {
	n := len(times)
	pb := parBlock{bm: BlockMeta{MinTime: times[0], MaxTime: times[n-1], Count: n}}
	raw := appendRawBlock(&pw.sc, kind, times, vals, strs)
	if len(raw) <= b.inline {
		b.out = append(b.out, raw...)
		pb.inline = true
	} else {
		if pw.enc == nil {
			enc, err := getEncoder()
			if err != nil {
				return err
			}
			pw.enc = enc
		}
		b.out = appendFramed(b.out, pw.enc, raw)
	}
	pb.outEnd = len(b.out)
	pb.bm.Min, pb.bm.Max, pb.bm.Sum = blockStats(kind, vals)
	if kind == point.KindFloat {
		b.partials = xsum.AppendSum(b.partials, vals)
	}
	pb.partialEnd = len(b.partials)
	b.blocks = append(b.blocks, pb)
	return nil
}

// addBatch adds the series b encoded, as Add of each whole series would.
func (w *Writer) addBatch(b *parBatch) error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return errFinished
	}
	keyStart, blockStart, out, partial := 0, 0, 0, 0
	for i := range b.series {
		s := &b.series[i]
		if err := w.endSeries(); err != nil {
			return err
		}
		w.key = append(w.key[:0], b.keys[keyStart:s.keyEnd]...)
		w.kind = s.kind
		w.have = true
		keyStart = s.keyEnd
		for j := blockStart; j < s.blockEnd; j++ {
			pb := &b.blocks[j]
			bm := pb.bm
			bm.Offset = w.dataSize()
			enc := b.out[out:pb.outEnd]
			out = pb.outEnd
			switch {
			case pb.inline && w.indexLen() < inlineIndexLimit:
				w.inline = append(w.inline, enc...)
				w.inlineEnds = append(w.inlineEnds, len(w.inline))
				w.inlineTotal += int64(len(enc))
				bm.Length = uint32(len(enc))
			case pb.inline:
				// Past the index's inline limit: stored after all.
				start := len(w.buf)
				w.buf = appendFramed(w.buf, w.enc, enc)
				bm.Length = uint32(len(w.buf) - start)
				w.inlineEnds = append(w.inlineEnds, -1)
			default:
				w.buf = append(w.buf, enc...)
				bm.Length = uint32(len(enc))
				w.inlineEnds = append(w.inlineEnds, -1)
			}
			if s.kind == point.KindFloat {
				start := len(w.partials)
				w.partials = append(w.partials, b.partials[partial:pb.partialEnd]...)
				bm.Partial = w.partials[start:len(w.partials):len(w.partials)]
			}
			partial = pb.partialEnd
			w.blocks = append(w.blocks, bm)
			w.meta.Samples += int64(bm.Count)
			w.lastTime = bm.MaxTime
			if len(w.buf) >= writeBufferSize {
				if err := w.writeOut(); err != nil {
					return err
				}
			}
		}
		blockStart = s.blockEnd
	}
	return nil
}
