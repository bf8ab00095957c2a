package memtable

// Span describes a run of a series' samples in time order: the time of its
// last sample and how many samples it holds (versions of one timestamp
// counted).
type Span struct {
	MaxTime int64
	Count   int
}

// Spans appends to dst the spans of series id's samples in [mint, maxt],
// one per chunk (at most a few hundred samples each), in time order, so
// that a reader can cut a long read into windows of a bounded number of
// samples, as it cuts segment reads at block ends. Like Read, it sorts an
// unsorted series first, keeping the versions a reader as of oldest may
// need.
func (t *Table) Spans(id uint64, mint, maxt int64, oldest uint64, dst []Span) []Span {
	if mint > maxt {
		return dst
	}
	s, excl := t.readSeries(id, oldest)
	defer t.unlock(excl)
	if s == nil || maxt < s.minT || mint > s.maxT {
		return dst
	}
	for k := s.firstChunk(&t.arena, mint); k < int(s.nch); k++ {
		c := s.used(&t.arena, k)
		if c.times[0] > maxt {
			break
		}
		if i, j := c.span(mint, maxt); j > i {
			dst = append(dst, Span{MaxTime: c.times[j-1], Count: j - i})
		}
	}
	return dst
}

// SeriesLen returns the number of samples series id holds, versions of one
// timestamp counted, whatever their time.
func (t *Table) SeriesLen(id uint64) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if s := t.lookup(id); s != nil {
		return s.len()
	}
	return 0
}
