package compaction

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/vfs"
	"github.com/stratadb/strata/segment"
)

// checkContextEvery is how many series Merge writes between two polls of ctx.
const checkContextEvery = 128

// TimeRange is an inclusive range of timestamps.
type TimeRange struct{ Min, Max int64 }

// Input is one segment to merge. Inputs are ordered oldest to newest: on an
// equal (series key, time) the sample of the later input wins (last write
// wins).
type Input struct {
	Reader *segment.Reader
	// Drop returns the time ranges of series key to drop from THIS input
	// (tombstones newer than it); nil func or nil result = none. Called once
	// per series of the input. The result may overlap and be unsorted; Merge
	// neither modifies nor keeps it.
	Drop func(key []byte) []TimeRange
}

// MergeOptions configures Merge.
type MergeOptions struct {
	// MinTime is the retention cutoff: samples with Time < MinTime are
	// dropped; math.MinInt64 keeps all. The zero value 0 drops every sample
	// before the Unix epoch, so callers without retention pass math.MinInt64.
	MinTime int64
	// TargetSegmentBytes cuts a new output when the current one has passed
	// this size, at a series boundary; 0 = one output.
	TargetSegmentBytes int64
	// NewOutput creates the next output; the engine names it. Required.
	NewOutput func() (*segment.Writer, error)
	// BlockSamples sizes Merge's output buffer: samples are handed to the
	// writer at most this many at a time. 0 = segment.DefaultBlockSamples.
	BlockSamples int
	// FS is the filesystem NewOutput creates the outputs on. Required: when
	// Merge fails after finishing some outputs it removes them through FS,
	// and only them, so it must be the FS they were written with.
	FS vfs.FS
	// Rollup, when set, returns the rollup levels of a float, int or uint
	// series (rollup.go), by Every ascending and Before descending; nil
	// or none: the series' samples are kept as they are. Called once per
	// series.
	Rollup func(key []byte, kind point.Kind) []RollupLevel

	// Yield, when set, is called where Merge polls ctx between series
	// (every 128): it may block while more urgent work needs the cores (a
	// flush that writers wait for), and must return once ctx is done.
	Yield func()

	// onBlockRead, when a test sets it, runs after every block read.
	onBlockRead func()
}

// MergeStats describes one Merge.
type MergeStats struct {
	BytesRead      int64 // block bytes read from the inputs (skipped blocks are not read)
	BytesWritten   int64 // total size of the outputs
	SamplesIn      int64 // samples in the inputs' series, read or skipped
	SamplesOut     int64 // samples written
	SamplesDropped int64 // removed by MinTime or a Drop range

	SamplesOverwritten int64 // shadowed by a later input at the same (key, time)
	BlocksRead         int64 // blocks decoded
	BlocksSkipped      int64 // blocks dropped whole without reading
	BlocksCopied       int64 // blocks copied to an output as stored, not decoded
	SeriesIn           int64 // distinct series keys in the inputs
	SeriesOut          int64 // series written
	// MaxResidentSamples is the largest number of decoded samples Merge held
	// at once: the current block of every input of a series plus the output
	// buffer. It is bounded by (inputs+1) x the block size.
	MaxResidentSamples int64

	SamplesRolledUp int64 // samples folded into rollup buckets
	RollupsOut      int64 // rollup buckets written
	RollupsDropped  int64 // input buckets removed by MinTime or a Drop range
	// RollupsCascaded counts input buckets moved into a coarser level's
	// bucket (a cascade: 1m buckets older than the 1h rule's bound).
	RollupsCascaded int64
}

// errNoOutput and errNoFS are returned when MergeOptions.NewOutput or FS is nil.
var (
	errNoOutput = fmt.Errorf("%w: compaction: MergeOptions.NewOutput is nil", base.ErrInvalid)
	errNoFS     = fmt.Errorf("%w: compaction: MergeOptions.FS is nil", base.ErrInvalid)
)

// Merge is a streaming k-way merge over the inputs' series (in key order) and,
// within a series, over the inputs' samples in time order. Memory is bounded
// by one block per input per series (never a whole series or segment in
// memory); last write wins on equal (key, time); Drop ranges and MinTime are
// applied; each sample is decoded once. A series left with no samples is not
// written, and an input set that leaves nothing creates no output at all.
//
// Outputs are in key order and do not overlap. On error or ctx cancellation
// every output created so far is aborted or removed and nothing is returned
// except the error. Merge polls ctx every 128 series and before every block
// it reads or copies, so it stops within one block of a cancellation and
// returns ctx's error. The readers stay open;
// closing them is the caller's job.
func Merge(ctx context.Context, inputs []Input, opts MergeOptions) ([]segment.Meta, MergeStats, error) {
	if opts.NewOutput == nil {
		return nil, MergeStats{}, errNoOutput
	}
	if opts.FS == nil {
		return nil, MergeStats{}, errNoFS
	}
	if err := ctx.Err(); err != nil {
		return nil, MergeStats{}, err
	}
	for i, in := range inputs {
		if in.Reader == nil {
			return nil, MergeStats{}, fmt.Errorf("%w: compaction: input %d has a nil Reader", base.ErrInvalid, i)
		}
	}
	if opts.BlockSamples <= 0 {
		opts.BlockSamples = segment.DefaultBlockSamples
	}
	m, err := newMerger(inputs, opts)
	if err == nil {
		err = m.run(ctx)
	}
	m.closeInputs()
	if err != nil {
		m.cleanup()
		return nil, MergeStats{}, err
	}
	return m.outputs, m.stats, nil
}

// inputState walks the series of one input and, within the current series,
// its samples.
type inputState struct {
	idx  int // position in inputs: higher is newer
	r    *segment.Reader
	drop func(key []byte) []TimeRange
	path string
	it   *segment.Entries     // the input's series entries, in key order
	cur  *segment.SeriesIndex // current series

	// Cursor over cur, reset by startSeries.
	block   int                  // next block to load
	buf     []point.Sample       // the decoded current block; reused across series
	pos     int                  // next sample of buf
	ok      bool                 // buf[pos] is the next kept sample
	started bool                 // a block of cur was read or skipped
	lastT   int64                // last time seen in cur, for order checks
	ranges  []TimeRange          // normalized drop ranges, MinTime folded in
	rpos    int                  // first range that may still apply
	scratch []TimeRange          // copy of Drop's result, sorted here
	spare   *segment.SeriesIndex // the next series is decoded here, then swapped with cur
}

type merger struct {
	ctx     context.Context // polled before every block read or copied
	opts    MergeOptions
	ins     []*inputState
	heap    []*inputState // inputs with series left, by (key, idx)
	active  []*inputState // inputs that hold the current series, by idx
	out     []point.Sample
	w       *segment.Writer
	outputs []segment.Meta
	stats   MergeStats
	copied  bool // a block of the current series was copied
	roll    rollupState
}

// newMerger starts an iteration over every input's entries (streamed from
// the file when the input's index is not loaded) and places each input's
// first series on the heap.
func newMerger(inputs []Input, opts MergeOptions) (*merger, error) {
	m := &merger{opts: opts, out: make([]point.Sample, 0, opts.BlockSamples)}
	for i, in := range inputs {
		s := &inputState{idx: i, r: in.Reader, drop: in.Drop, path: in.Reader.Meta().Path}
		m.ins = append(m.ins, s)
		it, err := s.r.Entries()
		if err != nil {
			return m, err
		}
		s.it, s.cur, s.spare = it, new(segment.SeriesIndex), new(segment.SeriesIndex)
		ok, err := it.Next(s.cur)
		if err != nil {
			return m, err
		}
		if ok {
			m.heap = append(m.heap, s)
		}
	}
	m.heapInit()
	return m, nil
}

// closeInputs ends the inputs' iterations.
func (m *merger) closeInputs() {
	for _, s := range m.ins {
		if s.it != nil {
			s.it.Close()
		}
	}
}

func (m *merger) run(ctx context.Context) error {
	m.ctx = ctx
	for nseries := 0; len(m.heap) > 0; nseries++ {
		if nseries%checkContextEvery == 0 {
			if m.opts.Yield != nil {
				m.opts.Yield()
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		// Collect every input whose current series has the smallest key.
		m.active = m.active[:0]
		key := m.heap[0].cur.Key
		for len(m.heap) > 0 && bytes.Equal(m.heap[0].cur.Key, key) {
			m.active = append(m.active, m.heapPop())
		}
		// Equal keys pop in index order, so m.active is oldest first.
		if err := m.mergeSeries(key); err != nil {
			return err
		}
		// Move the inputs to their next series.
		for _, s := range m.active {
			// The entry Next decodes into spare leaves cur intact.
			ok, err := s.it.Next(s.spare)
			if err != nil {
				return err
			}
			if ok {
				if bytes.Compare(s.spare.Key, s.cur.Key) <= 0 {
					return base.Corruptf(s.path, 0, "series key %q not after %q", s.spare.Key, s.cur.Key)
				}
				s.cur, s.spare = s.spare, s.cur
				m.heapPush(s)
			}
		}
	}
	return m.finishOutput()
}

// mergeSeries merges the current series of m.active into the output.
func (m *merger) mergeSeries(key []byte) error {
	m.stats.SeriesIn++
	kind := m.active[0].cur.Kind
	for _, s := range m.active[1:] {
		if s.cur.Kind != kind {
			return fmt.Errorf("compaction: series %q is %s in %s but %s in %s: %w",
				key, kind, m.active[0].path, s.cur.Kind, s.path, base.ErrCorrupt)
		}
	}
	for _, s := range m.active {
		m.startSeries(s)
		if err := m.advance(s, nil); err != nil {
			return err
		}
	}
	m.out = m.out[:0]
	m.copied = false
	wrote := false
	if err := m.startRollups(key, kind); err != nil {
		return err
	}
	for {
		// The head with the smallest time wins; on equal times the newest
		// input (scanned last) wins.
		var best *inputState
		var bt int64
		for _, s := range m.active {
			if !s.ok {
				continue
			}
			if t := s.buf[s.pos].Time; best == nil || t <= bt {
				best, bt = s, t
			}
		}
		if best == nil {
			break
		}
		// Shadow older inputs' samples at bt and find how far best can run
		// before another input has a sample.
		limit, bounded := int64(0), false
		for _, s := range m.active {
			if s == best || !s.ok {
				continue
			}
			if s.buf[s.pos].Time == bt {
				m.stats.SamplesOverwritten++
				s.pos++
				if err := m.advance(s, nil); err != nil {
					return err
				}
				if !s.ok {
					continue
				}
			}
			if t := s.buf[s.pos].Time; !bounded || t < limit {
				limit, bounded = t, true
			}
		}
		for {
			if sm := best.buf[best.pos]; m.roll.on && sm.Time < m.roll.limit {
				m.roll.addSample(sm)
				m.stats.SamplesRolledUp++
				best.pos++
				if err := m.advance(best, key); err != nil {
					return err
				}
				if !best.ok || (bounded && best.buf[best.pos].Time >= limit) {
					break
				}
				continue
			} else if m.roll.on && !m.roll.emitted {
				did, err := m.emitRollups(key, kind)
				if err != nil {
					return err
				}
				wrote = wrote || did
			}
			m.out = append(m.out, best.buf[best.pos])
			if len(m.out) == cap(m.out) {
				if err := m.flushOut(key, kind); err != nil {
					return err
				}
				wrote = true
			}
			best.pos++
			if err := m.advance(best, key); err != nil {
				return err
			}
			if !best.ok || (bounded && best.buf[best.pos].Time >= limit) {
				break
			}
		}
	}
	if m.roll.on && !m.roll.emitted {
		did, err := m.emitRollups(key, kind)
		if err != nil {
			return err
		}
		wrote = wrote || did
	}
	if len(m.out) > 0 {
		if err := m.flushOut(key, kind); err != nil {
			return err
		}
		wrote = true
	}
	for _, s := range m.active {
		s.buf = s.buf[:0] // consumed; no longer resident
	}
	if !wrote && !m.copied {
		return nil
	}
	m.stats.SeriesOut++
	if m.opts.TargetSegmentBytes > 0 && m.w.Size() >= m.opts.TargetSegmentBytes {
		return m.finishOutput()
	}
	return nil
}

// startSeries resets s's cursor to the start of its current series.
func (m *merger) startSeries(s *inputState) {
	s.block = 0
	s.buf = s.buf[:0]
	s.pos = 0
	s.started = false
	s.ok = false
	s.ranges = s.ranges[:0]
	s.rpos = 0
	if m.opts.MinTime != math.MinInt64 {
		s.ranges = append(s.ranges, TimeRange{Min: math.MinInt64, Max: m.opts.MinTime - 1})
	}
	if s.drop != nil {
		s.scratch = append(s.scratch[:0], s.drop(s.cur.Key)...)
		s.ranges = appendNormalized(s.ranges, s.scratch)
	}
}

// appendNormalized sorts rs (in place), merges overlapping and adjacent
// ranges, drops empty ones and appends the result to dst, itself normalized
// and holding at most a range that starts at math.MinInt64.
func appendNormalized(dst, rs []TimeRange) []TimeRange {
	rs = slices.DeleteFunc(rs, func(r TimeRange) bool { return r.Min > r.Max })
	slices.SortFunc(rs, func(a, b TimeRange) int {
		switch {
		case a.Min < b.Min:
			return -1
		case a.Min > b.Min:
			return 1
		}
		return 0
	})
	for _, r := range rs {
		if n := len(dst); n > 0 && (dst[n-1].Max == math.MaxInt64 || r.Min <= dst[n-1].Max+1) {
			dst[n-1].Max = max(dst[n-1].Max, r.Max)
			continue
		}
		dst = append(dst, r)
	}
	return dst
}

// dropped reports whether t falls in one of s's drop ranges. Calls must come
// with non-decreasing t.
func (s *inputState) dropped(t int64) bool {
	for s.rpos < len(s.ranges) && s.ranges[s.rpos].Max < t {
		s.rpos++
	}
	return s.rpos < len(s.ranges) && s.ranges[s.rpos].Min <= t
}

// covered reports whether one drop range holds all of [lo, hi]. Calls must
// come with non-decreasing lo.
func (s *inputState) covered(lo, hi int64) bool {
	for s.rpos < len(s.ranges) && s.ranges[s.rpos].Max < lo {
		s.rpos++
	}
	return s.rpos < len(s.ranges) && s.ranges[s.rpos].Min <= lo && s.ranges[s.rpos].Max >= hi
}

// advance positions s on its next kept sample at or after buf[pos], loading
// and skipping blocks as needed; s.ok reports whether there is one. With a
// non-nil key (the series being merged), every sample merged so far is in
// m.out or written, and a block that nothing else touches is copied to the
// output as stored instead of being decoded (see copyable).
func (m *merger) advance(s *inputState, key []byte) error {
	for {
		for s.pos < len(s.buf) {
			if !s.dropped(s.buf[s.pos].Time) {
				s.ok = true
				return nil
			}
			m.stats.SamplesDropped++
			s.pos++
		}
		s.ok = false
		if s.block >= len(s.cur.Blocks) {
			return nil
		}
		if err := m.ctx.Err(); err != nil {
			return err
		}
		b := &s.cur.Blocks[s.block]
		if b.MinTime > b.MaxTime || (s.started && b.MinTime <= s.lastT) {
			return base.Corruptf(s.path, b.Offset, "series %q block %d times out of order", s.cur.Key, s.block)
		}
		if key != nil && m.copyable(s, b) {
			if err := m.copyBlock(s, key); err != nil {
				return err
			}
			continue
		}
		if s.covered(b.MinTime, b.MaxTime) {
			m.stats.BlocksSkipped++
			m.stats.SamplesIn += int64(b.Count)
			m.stats.SamplesDropped += int64(b.Count)
			s.started, s.lastT = true, b.MaxTime
			s.block++
			s.buf, s.pos = s.buf[:0], 0
			continue
		}
		buf, err := s.r.ReadBlock(s.cur, s.block, s.buf[:0])
		if err != nil {
			return fmt.Errorf("compaction: read %s series %q block %d: %w", s.path, s.cur.Key, s.block, err)
		}
		if len(buf) != b.Count {
			return base.Corruptf(s.path, b.Offset, "series %q block %d: %d samples, index says %d", s.cur.Key, s.block, len(buf), b.Count)
		}
		for i := range buf {
			t := buf[i].Time
			if (s.started && t <= s.lastT) || t < b.MinTime || t > b.MaxTime {
				return base.Corruptf(s.path, b.Offset, "series %q block %d: sample %d time %d out of order", s.cur.Key, s.block, i, t)
			}
			s.started, s.lastT = true, t
		}
		s.buf, s.pos = buf, 0
		s.block++
		m.stats.BlocksRead++
		m.stats.BytesRead += int64(b.Length)
		m.stats.SamplesIn += int64(len(buf))
		m.noteResident()
		if hook := m.opts.onBlockRead; hook != nil {
			hook()
		}
	}
}

// copyable reports whether s's next block b may be copied to the output as
// stored: a stored block of at least half the block size (smaller ones are
// better merged with their neighbours), no drop range or the retention
// cutoff touching it, and no other input of the series holding a sample in
// its time range (their heads are past it, or they are exhausted). The
// samples waiting in m.out are all older than b, since every input's
// samples are; they are written first, as a block of their own unless
// there are too few of them to be worth one.
func (m *merger) copyable(s *inputState, b *segment.BlockMeta) bool {
	if b.Inline() || b.Count < m.opts.BlockSamples/2 || (len(m.out) > 0 && len(m.out) < m.opts.BlockSamples/4) {
		return false
	}
	if s.touched(b.MinTime, b.MaxTime) || (m.roll.on && b.MinTime < m.roll.limit) {
		return false
	}
	for _, o := range m.active {
		if o != s && o.ok && o.buf[o.pos].Time <= b.MaxTime {
			return false
		}
	}
	return true
}

// copyBlock writes the samples waiting in m.out, then copies s's next
// block to the output.
func (m *merger) copyBlock(s *inputState, key []byte) error {
	b := &s.cur.Blocks[s.block]
	if m.roll.on && !m.roll.emitted {
		if did, err := m.emitRollups(key, s.cur.Kind); err != nil {
			return err
		} else if did {
			m.copied = true // the series is written
		}
	}
	if len(m.out) > 0 {
		if err := m.flushOut(key, s.cur.Kind); err != nil {
			return err
		}
	}
	if m.w == nil {
		if err := m.newOutput(); err != nil {
			return err
		}
	}
	if err := m.w.CopyBlock(key, s.cur.Kind, s.r, s.cur, s.block); err != nil {
		return fmt.Errorf("compaction: copy %s series %q block %d: %w", s.path, key, s.block, err)
	}
	s.started, s.lastT = true, b.MaxTime
	s.buf, s.pos = s.buf[:0], 0
	s.block++
	m.copied = true
	m.stats.BlocksCopied++
	m.stats.BytesRead += int64(b.Length)
	m.stats.SamplesIn += int64(b.Count)
	m.stats.SamplesOut += int64(b.Count)
	return nil
}

// touched reports whether a drop range of s overlaps [lo, hi]. Calls must
// come with non-decreasing lo.
func (s *inputState) touched(lo, hi int64) bool {
	for s.rpos < len(s.ranges) && s.ranges[s.rpos].Max < lo {
		s.rpos++
	}
	return s.rpos < len(s.ranges) && s.ranges[s.rpos].Min <= hi
}

// noteResident updates MaxResidentSamples after a block load.
func (m *merger) noteResident() {
	n := int64(cap(m.out))
	for _, s := range m.ins {
		n += int64(len(s.buf))
	}
	m.stats.MaxResidentSamples = max(m.stats.MaxResidentSamples, n)
}

// flushOut hands the output buffer to the current writer, creating one if
// needed.
func (m *merger) flushOut(key []byte, kind point.Kind) error {
	if m.w == nil {
		if err := m.newOutput(); err != nil {
			return err
		}
	}
	if err := m.w.Add(key, kind, m.out); err != nil {
		return fmt.Errorf("compaction: write series %q: %w", key, err)
	}
	m.stats.SamplesOut += int64(len(m.out))
	m.out = m.out[:0]
	return nil
}

// newOutput creates the next output writer.
func (m *merger) newOutput() error {
	w, err := m.opts.NewOutput()
	if err != nil {
		return fmt.Errorf("compaction: new output: %w", err)
	}
	if w == nil {
		return fmt.Errorf("%w: compaction: NewOutput returned a nil writer", base.ErrInvalid)
	}
	m.w = w
	return nil
}

// finishOutput finishes the current writer, if any.
func (m *merger) finishOutput() error {
	if m.w == nil {
		return nil
	}
	w := m.w
	m.w = nil
	meta, err := w.Finish()
	if err != nil {
		// Finish may have failed before or after publishing the file.
		err = fmt.Errorf("compaction: finish output: %w", err)
		if aerr := w.Abort(); aerr != nil {
			err = errors.Join(err, aerr)
		}
		return err
	}
	m.outputs = append(m.outputs, meta)
	m.stats.BytesWritten += meta.Size
	return nil
}

// cleanup aborts the writer in progress and removes finished outputs.
func (m *merger) cleanup() {
	if m.w != nil {
		m.w.Abort()
		m.w = nil
	}
	for _, o := range m.outputs {
		m.opts.FS.Remove(o.Path)
	}
	m.outputs = nil
}

// The heap orders inputs by their current series key, then by index.

func (m *merger) less(a, b *inputState) bool {
	if c := bytes.Compare(a.cur.Key, b.cur.Key); c != 0 {
		return c < 0
	}
	return a.idx < b.idx
}

func (m *merger) heapInit() {
	for i := len(m.heap)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
}

func (m *merger) heapPush(s *inputState) {
	m.heap = append(m.heap, s)
	i := len(m.heap) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !m.less(m.heap[i], m.heap[p]) {
			break
		}
		m.heap[i], m.heap[p] = m.heap[p], m.heap[i]
		i = p
	}
}

func (m *merger) heapPop() *inputState {
	top := m.heap[0]
	n := len(m.heap) - 1
	m.heap[0] = m.heap[n]
	m.heap[n] = nil
	m.heap = m.heap[:n]
	if n > 0 {
		m.down(0)
	}
	return top
}

func (m *merger) down(i int) {
	n := len(m.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && m.less(m.heap[r], m.heap[l]) {
			c = r
		}
		if !m.less(m.heap[c], m.heap[i]) {
			return
		}
		m.heap[i], m.heap[c] = m.heap[c], m.heap[i]
		i = c
	}
}
