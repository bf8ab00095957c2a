package memtable

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"unsafe"

	"github.com/stratadb/strata/internal/point"
)

// Chunk capacities, in samples: chunk k of a series holds
// min(minChunk<<k, maxChunk). Small series stay small; large ones waste at
// most one partly filled chunk of maxChunk samples.
const (
	minChunk      = 8
	maxChunk      = 256
	maxChunkShift = 5 // minChunk << maxChunkShift == maxChunk
)

func chunkCap(k int) int {
	if k >= maxChunkShift {
		return maxChunk
	}
	return minChunk << k
}

// chunk is a run of consecutive samples of one series, in columns of equal
// length: times, values, sequence numbers (offsets from the table's base)
// and strings. strs is nil unless the series holds strings (vals then holds
// zeros). Depending on context a chunk value is either the whole allocation
// (len == cap, as kept in memSeries.chunks) or the used part of it (as
// returned by memSeries.used).
type chunk struct {
	times []int64
	vals  []uint64
	seqs  []uint32
	strs  []string
}

// heapBytes returns the memory the arrays of c hold: their capacity and the
// bytes of the strings within c's length.
func (c *chunk) heapBytes() int64 {
	n := int64(cap(c.times))*8 + int64(cap(c.vals))*8 + int64(cap(c.seqs))*4 + int64(cap(c.strs))*int64(unsafe.Sizeof(""))
	for _, s := range c.strs {
		n += int64(len(s))
	}
	return n
}

// span returns the index range [i, j) of c's samples with mint <= time <=
// maxt. c must be sorted (times may repeat) and not empty.
func (c *chunk) span(mint, maxt int64) (i, j int) {
	i, j = 0, len(c.times)
	if c.times[0] < mint {
		i, _ = slices.BinarySearch(c.times, mint)
	}
	if c.times[j-1] > maxt {
		j = i + sort.Search(j-i, func(k int) bool { return c.times[i+k] > maxt })
	}
	return i, j
}

// memSeries holds the samples of one series. The zero memSeries is empty.
//
// chunks holds every chunk's whole allocation. Every chunk but the last is
// full; the used part of the last one is the tail: tailT and tailV, kept in
// the series itself so that an append of a number touches no chunk header,
// and the strings of chunks[len(chunks)-1] up to the same length. String
// slots past the tail are "".
//
// The tail's sequence offsets are the first len(tailT) of the last chunk's
// seqs, whose first element tailSeq points at (a pointer, not a slice, so
// that an append touches one cache line).
//
// Other invariants: no chunk is empty, so the series is empty exactly when
// the tail is, and the tail is never empty in a non-empty series, so its
// last element is the time appended last (in storage order); storage order
// is sequence order until a sort; top is the largest sequence offset
// held (or an upper bound of it after a removal); when unsorted is false the
// times are increasing across the chunks, strictly unless dups is set
// (versions of one timestamp kept for older readers, in sequence order), so
// the first and last samples bound them, and when it is true minT and maxT
// bound them.
//
// An in-order append touches only the fields of the first cache line;
// padding makes the size 128 bytes so that a series spans exactly two lines.
type memSeries struct {
	tailT    []int64
	tailV    []uint64
	tailSeq  unsafe.Pointer // *uint32: the last chunk's seqs
	kind     point.Kind
	unsorted bool
	dups     bool
	_        [1]byte
	top      uint32

	minT   int64 // valid while unsorted
	maxT   int64 // valid while unsorted
	chunks []chunk
	_      [24]byte
}

// tailSeqs returns the sequence offsets of the tail, with the tail's
// capacity.
func (s *memSeries) tailSeqs() []uint32 {
	return unsafe.Slice((*uint32)(s.tailSeq), cap(s.tailT))[:len(s.tailT)]
}

// last returns the time appended last; s must not be empty.
func (s *memSeries) last() int64 { return s.tailT[len(s.tailT)-1] }

// empty reports whether s holds no sample.
func (s *memSeries) empty() bool { return len(s.tailT) == 0 }

// len returns the number of samples s holds.
func (s *memSeries) len() int {
	full := len(s.chunks) - 1
	if full < 0 {
		return 0
	}
	n := len(s.tailT)
	if full <= maxChunkShift {
		return n + minChunk*(1<<full-1)
	}
	return n + minChunk*(1<<maxChunkShift-1) + maxChunk*(full-maxChunkShift)
}

// bounds returns the smallest and largest times of s, which must not be
// empty.
func (s *memSeries) bounds() (mint, maxt int64) {
	if s.unsorted {
		return s.minT, s.maxT
	}
	return s.chunks[0].times[0], s.last()
}

// used returns the used part of chunk k.
func (s *memSeries) used(k int) chunk {
	if k == len(s.chunks)-1 {
		c := chunk{times: s.tailT, vals: s.tailV, seqs: s.tailSeqs()}
		if strs := s.chunks[k].strs; strs != nil {
			c.strs = strs[:len(s.tailT)]
		}
		return c
	}
	return s.chunks[k]
}

// append adds one sample, applied with sequence offset rel (not below any
// held), at the end of s and returns the bytes newly allocated for it.
func (s *memSeries) append(t int64, v point.Value, rel uint32) (grown int64) {
	switch {
	case len(s.tailT) == 0:
		s.kind = v.Kind()
		s.unsorted, s.dups = false, false
	case t <= s.last():
		if !s.unsorted {
			s.minT, s.maxT = s.bounds()
			s.unsorted = true
		}
		s.minT = min(s.minT, t)
	case s.unsorted:
		s.maxT = max(s.maxT, t)
	}
	if len(s.tailT) == cap(s.tailT) {
		grown = s.addChunk()
	}
	n := len(s.tailT)
	s.tailT = append(s.tailT, t)
	s.tailV = append(s.tailV, v.Bits())
	*(*uint32)(unsafe.Add(s.tailSeq, 4*n)) = rel // n < cap(tailT), the seqs' length
	s.top = rel
	if s.kind == point.KindString {
		str := v.Str()
		s.chunks[len(s.chunks)-1].strs[len(s.tailT)-1] = str
		grown += int64(len(str))
	}
	return grown
}

// addChunk starts a new, empty tail chunk of the next capacity and returns
// the bytes allocated for it.
func (s *memSeries) addChunk() int64 {
	n := chunkCap(len(s.chunks))
	c := chunk{times: make([]int64, n), vals: make([]uint64, n), seqs: make([]uint32, n)}
	if s.kind == point.KindString {
		c.strs = make([]string, n)
	}
	old := cap(s.chunks)
	s.chunks = append(s.chunks, c)
	s.setTail(len(s.chunks)-1, 0)
	return c.heapBytes() + int64(cap(s.chunks)-old)*int64(unsafe.Sizeof(chunk{}))
}

// setTail makes the first n samples of chunk k the tail.
func (s *memSeries) setTail(k, n int) {
	c := &s.chunks[k]
	s.tailT, s.tailV, s.tailSeq = c.times[:n], c.vals[:n], unsafe.Pointer(unsafe.SliceData(c.seqs))
}

// firstChunk returns the index of the first chunk whose last time is >= mint.
// s must be sorted.
func (s *memSeries) firstChunk(mint int64) int {
	return sort.Search(len(s.chunks), func(k int) bool {
		times := s.used(k).times
		return times[len(times)-1] >= mint
	})
}

// simple reports whether a read through rv may copy the samples of s in
// [mint, maxt] as they are: one version per time, all visible, no mask.
func (s *memSeries) simple(rv *relView) bool {
	return !s.dups && s.top <= rv.asOf && len(rv.masks) == 0
}

// appendSamples appends the samples with mint <= Time <= maxt that rv sees
// to dst. s must be sorted.
func (s *memSeries) appendSamples(dst []point.Sample, mint, maxt int64, rv *relView) []point.Sample {
	if lo, hi := s.bounds(); maxt < lo || mint > hi {
		return dst
	}
	kind := s.kind
	if !s.simple(rv) {
		s.visit(mint, maxt, rv, func(c *chunk, x int) {
			if kind == point.KindString {
				dst = append(dst, point.Sample{Time: c.times[x], Value: point.String(c.strs[x])})
			} else {
				dst = append(dst, point.Sample{Time: c.times[x], Value: point.FromBits(kind, c.vals[x])})
			}
		})
		return dst
	}
	for k := s.firstChunk(mint); k < len(s.chunks); k++ {
		c := s.used(k)
		if c.times[0] > maxt {
			break
		}
		i, j := c.span(mint, maxt)
		if kind == point.KindString {
			for x := i; x < j; x++ {
				dst = append(dst, point.Sample{Time: c.times[x], Value: point.String(c.strs[x])})
			}
			continue
		}
		for x := i; x < j; x++ {
			dst = append(dst, point.Sample{Time: c.times[x], Value: point.FromBits(kind, c.vals[x])})
		}
	}
	return dst
}

// visit calls emit, in time order, for each sample in [mint, maxt] that rv
// sees: per timestamp the newest version at or below rv.asOf, unless a mask
// hides it. s must be sorted.
func (s *memSeries) visit(mint, maxt int64, rv *relView, emit func(c *chunk, x int)) {
	var cand chunk // the chunk holding the candidate
	candX, has := 0, false
	flush := func() {
		if has && !rv.hidden(cand.times[candX], cand.seqs[candX]) {
			emit(&cand, candX)
		}
		has = false
	}
	for k := s.firstChunk(mint); k < len(s.chunks); k++ {
		c := s.used(k)
		if c.times[0] > maxt {
			break
		}
		i, j := c.span(mint, maxt)
		for x := i; x < j; x++ {
			if c.seqs[x] > rv.asOf {
				continue
			}
			if has && cand.times[candX] != c.times[x] {
				flush()
			}
			cand, candX, has = c, x, true // a later version replaces an earlier one
		}
	}
	flush()
}

// appendColumns is appendSamples in columnar form; see Table.Columns.
func (s *memSeries) appendColumns(times []int64, vals []uint64, strs []string, mint, maxt int64, rv *relView) ([]int64, []uint64, []string) {
	if lo, hi := s.bounds(); maxt < lo || mint > hi {
		return times, vals, strs
	}
	if !s.simple(rv) {
		s.visit(mint, maxt, rv, func(c *chunk, x int) {
			times = append(times, c.times[x])
			if s.kind == point.KindString {
				strs = append(strs, c.strs[x])
			} else {
				vals = append(vals, c.vals[x])
			}
		})
		return times, vals, strs
	}
	for k := s.firstChunk(mint); k < len(s.chunks); k++ {
		c := s.used(k)
		if c.times[0] > maxt {
			break
		}
		i, j := c.span(mint, maxt)
		times = append(times, c.times[i:j]...)
		if s.kind == point.KindString {
			strs = append(strs, c.strs[i:j]...)
		} else {
			vals = append(vals, c.vals[i:j]...)
		}
	}
	return times, vals, strs
}

// removeIf removes the samples for which drop(time, sequence offset) is
// true, keeping the order of the rest, and returns how many it removed and
// the bytes released.
func (s *memSeries) removeIf(drop func(int64, uint32) bool) (removed int, freed int64) {
	w, wi := 0, 0 // write position: chunk, index
	kept, n := 0, s.len()
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64) // bounds of the kept samples
	for r := range s.chunks {
		rc := s.used(r)
		for ri, t := range rc.times {
			if drop(t, rc.seqs[ri]) {
				if rc.strs != nil {
					freed += int64(len(rc.strs[ri]))
				}
				continue
			}
			// The write position never passes the read position, so it
			// only overwrites samples already read.
			wc := &s.chunks[w]
			wc.times[wi] = t
			wc.vals[wi] = rc.vals[ri]
			wc.seqs[wi] = rc.seqs[ri]
			if wc.strs != nil {
				wc.strs[wi] = rc.strs[ri]
			}
			if wi++; wi == len(wc.times) {
				w, wi = w+1, 0
			}
			lo, hi = min(lo, t), max(hi, t)
			kept++
		}
	}
	removed = n - kept
	if removed == 0 {
		return 0, 0
	}
	freed += s.truncate(w, wi)
	s.minT, s.maxT = lo, hi
	return removed, freed
}

// truncate cuts s after wi samples of chunk w (all earlier chunks being
// full), releases the chunks that follow and returns the bytes they held
// beyond their strings. String slots past the new end are cleared so that
// the strings can be collected; their bytes are accounted for by the caller.
func (s *memSeries) truncate(w, wi int) (freed int64) {
	end := w
	if wi > 0 {
		end = w + 1
	}
	for k := end; k < len(s.chunks); k++ {
		c := &s.chunks[k]
		clear(c.strs)
		freed += c.heapBytes()
		*c = chunk{}
	}
	s.chunks = s.chunks[:end]
	if end == 0 {
		s.tailT, s.tailV, s.tailSeq = nil, nil, nil
		s.dups, s.top = false, 0
		return freed
	}
	n := wi
	if wi == 0 {
		n = len(s.chunks[end-1].times)
	}
	if c := &s.chunks[end-1]; c.strs != nil {
		clear(c.strs[n:])
	}
	s.setTail(end-1, n)
	return freed
}

// sortScratch is working memory for sortDedup, reused across series.
type sortScratch struct {
	order []ordered
	vals  []uint64
	seqs  []uint32
	strs  []string
}

// ordered is a sample's time and position in storage order; sorting by both
// is a stable sort by time.
type ordered struct {
	t int64
	i int
}

func (sc *sortScratch) bytes() int64 {
	return int64(cap(sc.order))*int64(unsafe.Sizeof(ordered{})) +
		int64(cap(sc.vals))*8 + int64(cap(sc.seqs))*4 + int64(cap(sc.strs))*int64(unsafe.Sizeof(""))
}

// sortDedup sorts s by time (stably: versions of a timestamp stay in
// sequence order), discards each version followed by a newer one of the
// same timestamp at or below oldest, and returns how many samples it removed
// and the bytes released.
func (s *memSeries) sortDedup(sc *sortScratch, oldest uint32) (removed int, freed int64) {
	n := s.len()
	order, vals, seqs, strs := sc.order[:0], sc.vals[:0], sc.seqs[:0], sc.strs[:0]
	isString := s.kind == point.KindString
	for k := range s.chunks {
		c := s.used(k)
		for _, t := range c.times {
			order = append(order, ordered{t: t, i: len(order)})
		}
		vals = append(vals, c.vals...)
		seqs = append(seqs, c.seqs...)
		if isString {
			strs = append(strs, c.strs...)
		}
	}
	slices.SortFunc(order, func(a, b ordered) int {
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})

	w, wi, kept := 0, 0, 0
	dups := false
	var top uint32
	for j, o := range order {
		if j+1 < len(order) && order[j+1].t == o.t {
			if seqs[order[j+1].i] <= oldest {
				// A newer version every reader sees follows.
				if isString {
					freed += int64(len(strs[o.i]))
				}
				continue
			}
			dups = true
		}
		c := &s.chunks[w]
		c.times[wi] = o.t
		c.vals[wi] = vals[o.i]
		c.seqs[wi] = seqs[o.i]
		top = max(top, seqs[o.i])
		if isString {
			c.strs[wi] = strs[o.i]
		}
		if wi++; wi == len(c.times) {
			w, wi = w+1, 0
		}
		kept++
	}
	removed = n - kept
	freed += s.truncate(w, wi)
	s.unsorted, s.dups, s.top = false, dups, top

	clear(strs) // the scratch must not keep strings alive
	sc.order, sc.vals, sc.seqs, sc.strs = order[:0], vals[:0], seqs[:0], strs[:0]
	return removed, freed
}
