package bench

import (
	"cmp"
	"context"
	"os"
	"slices"
	"sync"

	"github.com/stratadb/strata/engine"
)

// memStore is the in-memory floor: what inserting costs with no storage
// engine at all. Each series is two growing slices (times and values); a
// point finds its series through the seriesIndex, one map lookup by tag set
// that builds no key and allocates nothing, and its fields by position.
// Nothing is validated beyond the value's kind, encoded, compressed,
// logged or written to disk. Close keeps the data in the process, as a RAM
// disk would, so that the queries after reopening find it (the bench runs
// them in the same process). Per point it does what any engine must (find
// the series, append the sample) and nothing more, so no engine inserts
// faster: the distance to it is what the engine costs. A query
// binary-searches each selected series.
//
// It is not durable, a failed batch keeps the points before the bad one,
// and it has no configuration: it runs in default/fast only and is drawn
// as a line, not as a competitor.
type memStore struct {
	mu   sync.RWMutex // guards data against the queries; idx locks itself
	idx  seriesIndex
	data []memSeries // data[id-1]
}

// memSeries is a series' samples in time order, time and value side by
// side: one growing slice per series.
type memSeries []memSample

type memSample struct {
	t int64
	v float64
}

// memDisk holds the floor's data by directory between a close and the next
// open in the same process.
var memDisk struct {
	sync.Mutex
	stores map[string]*memStore
}

func openMemLimit(dir string, _ Config, _ Durability) (store, error) {
	memDisk.Lock()
	defer memDisk.Unlock()
	if memDisk.stores == nil {
		memDisk.stores = map[string]*memStore{}
	}
	// A directory that does not exist yet is a fresh database, whatever a
	// removed directory of the same name held. It is made so that the disk
	// figure (zero) is measured like everyone else's.
	if _, err := os.Stat(dir); err == nil {
		if s, ok := memDisk.stores[dir]; ok {
			return s, nil
		}
	}
	if err := mkdir(dir); err != nil {
		return nil, err
	}
	s := &memStore{}
	memDisk.stores[dir] = s
	return s, nil
}

// forgetMem drops the floor's data kept for dir.
func forgetMem(dir string) {
	memDisk.Lock()
	delete(memDisk.stores, dir)
	memDisk.Unlock()
}

func (s *memStore) write(points []engine.Point) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range points {
		p := &points[i]
		set := s.idx.set(p)
		for f := range p.Fields {
			v, err := floatValue(p, f)
			if err != nil {
				return err
			}
			id, added := s.idx.field(set, p, f)
			if added {
				s.data = append(s.data, memSeries{})
			}
			ms := &s.data[id-1]
			// The batches of the bench are in time order per series; an
			// older time is inserted in place.
			if n := len(*ms); n == 0 || (*ms)[n-1].t < p.Time {
				*ms = append(*ms, memSample{p.Time, v})
				continue
			}
			j, found := ms.search(p.Time)
			if found {
				(*ms)[j].v = v
				continue
			}
			*ms = slices.Insert(*ms, j, memSample{p.Time, v})
		}
	}
	return nil
}

func (s *memStore) query(ctx context.Context, q engine.Query, rs *resultSet) error {
	ans, err := newAnswer(&q, rs)
	if err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	sel := s.idx.selectSeries(&q.Selector, nil)
	for n, info := range sel {
		if n%128 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		ms := s.data[info.id-1]
		lo, _ := ms.search(q.Start)
		hi, _ := ms.search(q.End)
		if lo >= hi {
			continue
		}
		ans.series(info.key)
		for _, smp := range ms[lo:hi] {
			ans.add(smp.t, smp.v)
		}
	}
	ans.flush()
	return nil
}

// trimBefore drops every series' samples before t: the mixed workload
// trims the floor behind its readers so that its memory stays bounded in
// a long run (see trimmer). A series' slice keeps its array until the next
// append outgrows it, so the floor holds at most about twice what it
// keeps.
func (s *memStore) trimBefore(t int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, ms := range s.data {
		if j, _ := ms.search(t); j > 0 {
			s.data[i] = ms[j:]
		}
	}
}

// search returns the index of the first sample at or after t and whether
// it is at t.
func (ms memSeries) search(t int64) (int, bool) {
	return slices.BinarySearchFunc(ms, t, func(s memSample, t int64) int { return cmp.Compare(s.t, t) })
}

// close keeps the data for the next open of the same directory.
func (s *memStore) close() error { return nil }
