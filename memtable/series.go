package memtable

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"unsafe"

	"github.com/stratadb/strata/internal/point"
)

// Chunk capacities, in samples: chunk k of a series holds chunkCaps[k], and
// every chunk past them maxChunk. The first holds one sample, which is all
// many series get in a memtable at high cardinality; past the third they
// grow by about 1.5x so that short series waste little (a series of
// 10 < n <= maxChunk samples leaves at most about a third of its capacity
// unused, of up to 10 at most half, of 1, 4 or 10 none); long ones waste
// at most one partly filled chunk of maxChunk samples. Together they hold
// 512 samples, so that the chunks of a long series end at multiples of
// maxChunk samples, as round sample counts do.
var chunkCaps = [...]uint16{1, 3, 6, 8, 12, 16, 24, 32, 48, 64, 80, 96, 122}

const maxChunk = 256

// chunkStart[k] is the number of samples the chunks before chunk k hold
// when full, for k <= len(chunkCaps).
var chunkStart = func() (s [len(chunkCaps) + 1]int) {
	for k, c := range chunkCaps {
		s[k+1] = s[k] + int(c)
	}
	return s
}()

func chunkCap(k int) int {
	if k < len(chunkCaps) {
		return int(chunkCaps[k])
	}
	return maxChunk
}

// fullLen returns the number of samples the first k chunks hold when full.
func fullLen(k int) int {
	if k <= len(chunkCaps) {
		return chunkStart[k]
	}
	return chunkStart[len(chunkCaps)] + (k-len(chunkCaps))*maxChunk
}

// Slabs: the columns of every chunk of a table are carved from slabs, one
// array per column, of minSlab samples for the first slab, doubling up to
// maxSlab. A chunk is named by a handle: the slab's number times maxSlab
// plus the chunk's offset in it.
const (
	minSlabBits = 7
	minSlab     = 1 << minSlabBits
	maxSlabBits = 16
	maxSlab     = 1 << maxSlabBits
	maxSlabs    = 1 << (32 - maxSlabBits)

	// sampleBytes is the slab memory of one sample: a time, a value
	// payload and a sequence offset.
	sampleBytes = 8 + 8 + 4
)

// slabLen returns the number of samples slab k holds.
func slabLen(k int) int {
	if k >= maxSlabBits-minSlabBits {
		return maxSlab
	}
	return minSlab << k
}

// slab holds the columns of the chunks carved from it; the three arrays
// have one length.
type slab struct {
	times []int64
	vals  []uint64
	seqs  []uint32
}

// arena holds the samples of a table's series: the slabs, the chunk lists
// of series with more chunks than memSeries holds inline, and the strings
// of string series, which their value column indexes. Nothing in it is
// freed before the table: chunks a series no longer uses stay its own, and
// are reused when it grows again; a removed string is cleared so that it
// can be collected, and its slot stays.
type arena struct {
	slabs []slab
	used  int // samples carved from the last slab
	lists [][]uint32
	strs  []string
}

// carve returns the handle of a chunk of n samples (n <= maxChunk) and the
// bytes newly allocated for it.
func (a *arena) carve(n int) (h uint32, grown int64) {
	if len(a.slabs) == 0 || a.used+n > len(a.slabs[len(a.slabs)-1].times) {
		grown = a.addSlab()
	}
	h = uint32(len(a.slabs)-1)<<maxSlabBits | uint32(a.used)
	a.used += n
	return h, grown
}

// addSlab starts a new slab, leaving what remains of the last one unused,
// and returns the bytes allocated.
func (a *arena) addSlab() int64 {
	if len(a.slabs) == maxSlabs {
		// 4 Gi samples, about 80 GiB: far beyond any memtable budget.
		panic("memtable: table holds too many samples")
	}
	n := slabLen(len(a.slabs))
	old := cap(a.slabs)
	a.slabs = append(a.slabs, slab{times: make([]int64, n), vals: make([]uint64, n), seqs: make([]uint32, n)})
	a.used = 0
	return int64(n)*sampleBytes + int64(cap(a.slabs)-old)*int64(unsafe.Sizeof(slab{}))
}

// chunk returns the first n samples of the chunk with handle h.
func (a *arena) chunk(h uint32, n int) chunk {
	sl := &a.slabs[h>>maxSlabBits]
	off := int(h & (maxSlab - 1))
	return chunk{times: sl.times[off : off+n : off+n], vals: sl.vals[off : off+n : off+n], seqs: sl.seqs[off : off+n : off+n]}
}

// addString stores str and returns its index and the bytes allocated.
func (a *arena) addString(str string) (uint64, int64) {
	old := cap(a.strs)
	a.strs = append(a.strs, str)
	return uint64(len(a.strs) - 1), int64(cap(a.strs)-old)*int64(unsafe.Sizeof("")) + int64(len(str))
}

// dropString clears string i and returns the bytes it held.
func (a *arena) dropString(i uint64) int64 {
	n := len(a.strs[i])
	a.strs[i] = ""
	return int64(n)
}

// bytes returns the memory a holds: the slabs, the chunk lists and the
// string headers and bytes. Tests check it against the running total.
func (a *arena) bytes() int64 {
	n := int64(cap(a.slabs))*int64(unsafe.Sizeof(slab{})) + int64(cap(a.lists))*int64(unsafe.Sizeof([]uint32{})) +
		int64(cap(a.strs))*int64(unsafe.Sizeof(""))
	for _, sl := range a.slabs {
		n += int64(len(sl.times)) * sampleBytes
	}
	for _, l := range a.lists {
		n += int64(cap(l)) * 4
	}
	for _, s := range a.strs {
		n += int64(len(s))
	}
	return n
}

// chunk is a run of consecutive samples of one series, in columns of equal
// length: times, values and sequence numbers (offsets from the table's
// base). For a string series a value is the index of the string in the
// arena. Depending on context a chunk is either the whole capacity or the
// used part of it.
type chunk struct {
	times []int64
	vals  []uint64
	seqs  []uint32
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

// inlineChunks is the number of chunk handles a memSeries holds itself:
// enough for 10 samples.
const inlineChunks = 3

// memSeries holds the samples of series id, in nch chunks of the arena.
// The zero memSeries is empty. It holds no pointer, so the garbage
// collector does not scan the table's series.
//
// The handles of its chunks are hs[:nch] while list is 0, and
// arena.lists[list-1][:nch] once the series has needed more than
// inlineChunks chunks; hs[0] then repeats the handle of the last chunk, so
// that an append does not read the list. Handles past nch (in hs[:nh] or
// the list) name chunks the series used before a removal; they are reused,
// chunk k for chunk k, as it grows again.
//
// Invariants: every chunk but the last is full; the last one holds tailN
// samples, never 0, so the series is empty exactly when nch is 0. Storage
// order is sequence order until a sort. minT and maxT are the smallest and
// largest times held. When unsorted is false the times are increasing
// across the chunks, strictly unless dups is set (versions of one timestamp
// kept for older readers, in sequence order), so maxT is the time appended
// last and an append above it keeps the series sorted. top is the largest
// sequence offset held (or an upper bound of it after a removal).
type memSeries struct {
	id         uint64
	minT, maxT int64
	top        uint32
	nch        uint32
	hs         [inlineChunks]uint32
	list       uint32
	tailN      uint16
	nh         uint8 // handles in hs, nch included, while list is 0
	kind       point.Kind
	unsorted   bool
	dups       bool
}

// empty reports whether s holds no sample.
func (s *memSeries) empty() bool { return s.nch == 0 }

// len returns the number of samples s holds.
func (s *memSeries) len() int {
	if s.nch == 0 {
		return 0
	}
	return fullLen(int(s.nch)-1) + int(s.tailN)
}

// bounds returns the smallest and largest times of s, which must not be
// empty.
func (s *memSeries) bounds() (mint, maxt int64) { return s.minT, s.maxT }

// handle returns the handle of chunk k.
func (s *memSeries) handle(a *arena, k int) uint32 {
	if s.list != 0 {
		return a.lists[s.list-1][k]
	}
	return s.hs[k]
}

// tailHandle returns the handle of the last chunk; s must not be empty.
func (s *memSeries) tailHandle() uint32 {
	if s.list != 0 {
		return s.hs[0]
	}
	return s.hs[s.nch-1]
}

// used returns the used part of chunk k.
func (s *memSeries) used(a *arena, k int) chunk {
	n := chunkCap(k)
	if k == int(s.nch)-1 {
		n = int(s.tailN)
	}
	return a.chunk(s.handle(a, k), n)
}

// full returns the whole capacity of chunk k.
func (s *memSeries) full(a *arena, k int) chunk {
	return a.chunk(s.handle(a, k), chunkCap(k))
}

// append adds one sample, applied with sequence offset rel (not below any
// held), at the end of s and returns the bytes newly allocated for it.
func (s *memSeries) append(a *arena, t int64, v point.Value, rel uint32) (grown int64) {
	switch {
	case s.nch == 0:
		s.kind = v.Kind()
		s.unsorted, s.dups = false, false
		s.minT, s.maxT = t, t
	case t > s.maxT:
		s.maxT = t
	default:
		// At or below the last time of a sorted series.
		s.unsorted = true
		s.minT = min(s.minT, t)
	}
	var h uint32
	if s.nch == 0 || int(s.tailN) == chunkCap(int(s.nch)-1) {
		h, grown = s.addChunk(a)
	} else {
		h = s.tailHandle()
	}
	sl := &a.slabs[h>>maxSlabBits]
	i := int(h&(maxSlab-1)) + int(s.tailN)
	sl.times[i] = t
	if s.kind == point.KindString {
		idx, n := a.addString(v.Str())
		sl.vals[i] = idx
		grown += n
	} else {
		sl.vals[i] = v.Bits()
	}
	sl.seqs[i] = rel
	s.tailN++
	s.top = rel
	return grown
}

// addChunk starts a new, empty last chunk and returns its handle and the
// bytes allocated for it.
func (s *memSeries) addChunk(a *arena) (h uint32, grown int64) {
	k := int(s.nch)
	switch {
	case s.list != 0:
		l := &a.lists[s.list-1]
		if k < len(*l) {
			h = (*l)[k] // used before a removal
			break
		}
		h, grown = a.carve(chunkCap(k))
		old := cap(*l)
		*l = append(*l, h)
		grown += int64(cap(*l)-old) * 4
	case k < int(s.nh):
		h = s.hs[k]
	case k < inlineChunks:
		h, grown = a.carve(chunkCap(k))
		s.hs[k] = h
		s.nh++
	default:
		h, grown = a.carve(chunkCap(k))
		l := make([]uint32, k, 2*k)
		copy(l, s.hs[:])
		l = append(l, h)
		old := cap(a.lists)
		a.lists = append(a.lists, l)
		s.list = uint32(len(a.lists))
		grown += int64(cap(l))*4 + int64(cap(a.lists)-old)*int64(unsafe.Sizeof([]uint32{}))
	}
	if s.list != 0 {
		s.hs[0] = h
	}
	s.nch++
	s.tailN = 0
	return h, grown
}

// firstChunk returns the index of the first chunk whose last time is >= mint.
// s must be sorted.
func (s *memSeries) firstChunk(a *arena, mint int64) int {
	return sort.Search(int(s.nch), func(k int) bool {
		times := s.used(a, k).times
		return times[len(times)-1] >= mint
	})
}

// simple reports whether a read through rv may copy the samples of s in
// [mint, maxt] as they are: one version per time, all visible, no mask.
func (s *memSeries) simple(rv *relView) bool {
	return !s.dups && s.top <= rv.asOf && len(rv.masks) == 0
}

// value returns sample x of c, of s's kind.
func (s *memSeries) value(a *arena, c *chunk, x int) point.Value {
	if s.kind == point.KindString {
		return point.String(a.strs[c.vals[x]])
	}
	return point.FromBits(s.kind, c.vals[x])
}

// appendSamples appends the samples with mint <= Time <= maxt that rv sees
// to dst. s must be sorted.
func (s *memSeries) appendSamples(a *arena, dst []point.Sample, mint, maxt int64, rv *relView) []point.Sample {
	if maxt < s.minT || mint > s.maxT {
		return dst
	}
	if !s.simple(rv) {
		s.visit(a, mint, maxt, rv, func(c *chunk, x int) {
			dst = append(dst, point.Sample{Time: c.times[x], Value: s.value(a, c, x)})
		})
		return dst
	}
	kind := s.kind
	for k := s.firstChunk(a, mint); k < int(s.nch); k++ {
		c := s.used(a, k)
		if c.times[0] > maxt {
			break
		}
		i, j := c.span(mint, maxt)
		if kind == point.KindString {
			for x := i; x < j; x++ {
				dst = append(dst, point.Sample{Time: c.times[x], Value: point.String(a.strs[c.vals[x]])})
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
func (s *memSeries) visit(a *arena, mint, maxt int64, rv *relView, emit func(c *chunk, x int)) {
	var cand chunk // the chunk holding the candidate
	candX, has := 0, false
	flush := func() {
		if has && !rv.hidden(cand.times[candX], cand.seqs[candX]) {
			emit(&cand, candX)
		}
		has = false
	}
	for k := s.firstChunk(a, mint); k < int(s.nch); k++ {
		c := s.used(a, k)
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
func (s *memSeries) appendColumns(a *arena, times []int64, vals []uint64, strs []string, mint, maxt int64, rv *relView) ([]int64, []uint64, []string) {
	if maxt < s.minT || mint > s.maxT {
		return times, vals, strs
	}
	isString := s.kind == point.KindString
	if !s.simple(rv) {
		s.visit(a, mint, maxt, rv, func(c *chunk, x int) {
			times = append(times, c.times[x])
			if isString {
				strs = append(strs, a.strs[c.vals[x]])
			} else {
				vals = append(vals, c.vals[x])
			}
		})
		return times, vals, strs
	}
	for k := s.firstChunk(a, mint); k < int(s.nch); k++ {
		c := s.used(a, k)
		if c.times[0] > maxt {
			break
		}
		i, j := c.span(mint, maxt)
		times = append(times, c.times[i:j]...)
		if isString {
			for _, x := range c.vals[i:j] {
				strs = append(strs, a.strs[x])
			}
		} else {
			vals = append(vals, c.vals[i:j]...)
		}
	}
	return times, vals, strs
}

// writer writes samples over the chunks of a series from its start, for a
// removal or a sort that rewrites the series in place.
type writer struct {
	s    *memSeries
	a    *arena
	k, i int   // chunk and index written next
	c    chunk // the whole of chunk k
	n    int   // samples written
	mint int64 // bounds of the samples written
	maxt int64
}

func (s *memSeries) writer(a *arena) writer {
	return writer{s: s, a: a, c: s.full(a, 0), mint: math.MaxInt64, maxt: math.MinInt64}
}

// put writes one sample. The write position never passes the position of
// the samples still to be read.
func (w *writer) put(t int64, v uint64, seq uint32) {
	if w.i == len(w.c.times) {
		w.k, w.i = w.k+1, 0
		w.c = w.s.full(w.a, w.k)
	}
	w.c.times[w.i], w.c.vals[w.i], w.c.seqs[w.i] = t, v, seq
	w.i++
	w.n++
	w.mint, w.maxt = min(w.mint, t), max(w.maxt, t)
}

// finish cuts the series after the samples written and sets its bounds.
// The chunks past the new end stay the series' own, for reuse.
func (w *writer) finish() {
	s := w.s
	if w.n == 0 {
		s.nch, s.tailN = 0, 0
		s.unsorted, s.dups, s.top = false, false, 0
		return
	}
	s.nch, s.tailN = uint32(w.k+1), uint16(w.i)
	s.minT, s.maxT = w.mint, w.maxt
	if s.list != 0 {
		s.hs[0] = s.handle(w.a, w.k)
	}
}

// removeIf removes the samples for which drop(time, sequence offset) is
// true, keeping the order of the rest, and returns how many it removed and
// the string bytes released.
func (s *memSeries) removeIf(a *arena, drop func(int64, uint32) bool) (removed int, freed int64) {
	n := s.len()
	w := s.writer(a)
	isString := s.kind == point.KindString
	for r := range int(s.nch) {
		rc := s.used(a, r)
		for ri, t := range rc.times {
			if drop(t, rc.seqs[ri]) {
				if isString {
					freed += a.dropString(rc.vals[ri])
				}
				continue
			}
			w.put(t, rc.vals[ri], rc.seqs[ri])
		}
	}
	if w.n == n {
		return 0, 0
	}
	w.finish()
	return n - w.n, freed
}

// sortScratch is working memory for sortDedup, reused across series.
type sortScratch struct {
	order []ordered
	vals  []uint64
	seqs  []uint32
}

// ordered is a sample's time and position in storage order; sorting by both
// is a stable sort by time.
type ordered struct {
	t int64
	i int
}

func (sc *sortScratch) bytes() int64 {
	return int64(cap(sc.order))*int64(unsafe.Sizeof(ordered{})) + int64(cap(sc.vals))*8 + int64(cap(sc.seqs))*4
}

// sortDedup sorts s by time (stably: versions of a timestamp stay in
// sequence order), discards each version followed by a newer one of the
// same timestamp at or below oldest, and returns how many samples it removed
// and the string bytes released.
func (s *memSeries) sortDedup(a *arena, sc *sortScratch, oldest uint32) (removed int, freed int64) {
	n := s.len()
	order, vals, seqs := sc.order[:0], sc.vals[:0], sc.seqs[:0]
	for k := range int(s.nch) {
		c := s.used(a, k)
		for _, t := range c.times {
			order = append(order, ordered{t: t, i: len(order)})
		}
		vals = append(vals, c.vals...)
		seqs = append(seqs, c.seqs...)
	}
	slices.SortFunc(order, func(a, b ordered) int {
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})

	isString := s.kind == point.KindString
	w := s.writer(a)
	dups := false
	var top uint32
	for j, o := range order {
		if j+1 < len(order) && order[j+1].t == o.t {
			if seqs[order[j+1].i] <= oldest {
				// A newer version every reader sees follows.
				if isString {
					freed += a.dropString(vals[o.i])
				}
				continue
			}
			dups = true
		}
		w.put(o.t, vals[o.i], seqs[o.i])
		top = max(top, seqs[o.i])
	}
	w.finish()
	s.unsorted, s.dups, s.top = false, dups, top

	sc.order, sc.vals, sc.seqs = order[:0], vals[:0], seqs[:0]
	return n - w.n, freed
}
