package catalog

import "iter"

// The series are stored in fixed-size chunks rather than one slice: a
// slice of a million 48-byte series grown by append is copied again and
// again (Go grows large slices by a quarter, so the copies add up to about
// five times the final array), each copy with write barriers for its
// pointers. A chunk is allocated once, full size, and a series is never
// moved after it is added, so the pointers the catalog hands out stay the
// very objects it holds.
//
// A chunk of 1024 series is 48 KiB: a catalog of a few series wastes at
// most that, and a million series take 977 chunks, whose directory (8
// bytes a chunk) is itself too small for its growth to matter.
const (
	chunkShift = 10
	chunkLen   = 1 << chunkShift
	chunkMask  = chunkLen - 1
)

// seriesList holds the series by id. A copy of it is a snapshot: the
// writer only ever appends (to the chunks past n, and to the directory,
// whose entries below its length never change), so a copy taken under
// Catalog.mu reads its first n series without the lock.
type seriesList struct {
	chunks []*[chunkLen]Series
	n      int // series held
}

// at returns series id, which must be below n.
func (l *seriesList) at(id uint64) *Series {
	return &l.chunks[id>>chunkShift][id&chunkMask]
}

// push appends s with id n. The caller holds Catalog.mu for writing.
func (l *seriesList) push(s Series) {
	c := l.n >> chunkShift
	if c == len(l.chunks) {
		l.chunks = append(l.chunks, new([chunkLen]Series))
	}
	l.chunks[c][l.n&chunkMask] = s
	l.n++
}

// reserve sizes the directory for n more series, so that the chunks of a
// large catalog loaded at once are listed without regrowing it.
func (l *seriesList) reserve(n int) {
	want := (l.n + n + chunkMask) >> chunkShift
	if want > cap(l.chunks) {
		chunks := make([]*[chunkLen]Series, len(l.chunks), want)
		copy(chunks, l.chunks)
		l.chunks = chunks
	}
}

// from yields the series of the snapshot l with ids from from on, in
// order.
func (l seriesList) from(from int) iter.Seq2[uint64, *Series] {
	return func(yield func(uint64, *Series) bool) {
		for id := max(from, 0); id < l.n; {
			chunk := l.chunks[id>>chunkShift]
			end := min(l.n, (id|chunkMask)+1)
			for ; id < end; id++ {
				if !yield(uint64(id), &chunk[id&chunkMask]) {
					return
				}
			}
		}
	}
}

// Since yields the id and the series of every series with an id from
// from on, ascending, as the catalog held them when Since was called:
// series added while the caller iterates are not yielded. It does not
// hold the catalog's lock while the caller's loop body runs.
func (c *Catalog) Since(from int) iter.Seq2[uint64, *Series] {
	c.mu.RLock()
	l := c.series
	c.mu.RUnlock()
	return l.from(from)
}
