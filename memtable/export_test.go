package memtable

import "github.com/stratadb/strata/internal/point"

// Helpers the tests use, kept out of the package's API.

// Columns is Samples in columnar form, for encoders. It appends the times
// of series id's samples in [mint, maxt] to times, and their values to vals
// (the payload of point.Value.Bits) for a non-string series or to strs for a
// string series; the other one of vals and strs is returned unchanged.
func (t *Table) Columns(id uint64, mint, maxt int64, times []int64, vals []uint64, strs []string) ([]int64, []uint64, []string) {
	if mint > maxt {
		return times, vals, strs
	}
	s, excl := t.readSeries(id, Latest.Oldest)
	if s != nil {
		var rv relView
		t.relView(&Latest, &rv)
		times, vals, strs = s.appendColumns(&t.arena, times, vals, strs, mint, maxt, &rv)
	}
	t.unlock(excl)
	return times, vals, strs
}

// Apply appends a batch of entries as the next write, with the sequence
// number after the last one applied. See ApplySeq. It panics when the table
// is full (see Fits).
func (t *Table) Apply(entries []point.Entry) {
	if err := t.ApplySeq(entries, t.lastSeq.Load()+1); err != nil {
		panic(err)
	}
}

// LastSeq returns the sequence number of the last write applied, 0 when
// none was.
func (t *Table) LastSeq() uint64 { return t.lastSeq.Load() }
