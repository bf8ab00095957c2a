package bench

import (
	"context"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/stratadb/strata/engine"
)

// memStore is the in-memory line: what inserting costs with no storage
// engine at all. Each series is two growing slices (times and values) found through a
// map by canonical series key; nothing is encoded, compressed, logged or
// written to disk. Close keeps the data in the process, as a RAM disk
// would, so that the queries after reopening find it (the bench runs them in
// the same process). It is the cost of the plain in-memory approach, drawn
// as a line beside the engines, not a bound under them: it builds every
// point's canonical series key as a string for its map lookup (keyBuilder,
// as the SQLite and key-value adapters do), and with many series it
// allocates a map entry, a key and two slices per series, so an engine
// that hashes the tag set and lays a batch out at once (strata) can insert
// faster. A query binary-searches each selected series.
//
// It is not durable and has no configuration: it runs in default/fast only
// and is drawn as a dashed line, not as a competitor.
type memStore struct {
	mu     sync.RWMutex
	series map[string]*memSeries
	kb     keyBuilder
}

type memSeries struct {
	info  seriesInfo
	times []int64
	vals  []float64
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
	s := &memStore{series: map[string]*memSeries{}}
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
		for f := range p.Fields {
			v, err := floatValue(p, f)
			if err != nil {
				return err
			}
			key := s.kb.key(p, f)
			ms, ok := s.series[string(key)]
			if !ok {
				k := string(key)
				ms = &memSeries{info: seriesInfo{key: k, measurement: p.Measurement,
					tags: slices.Clone(p.Tags), field: p.Fields[f].Key}}
				s.series[k] = ms
			}
			// The batches of the bench are in time order per series; an
			// older time is inserted in place.
			if n := len(ms.times); n == 0 || ms.times[n-1] < p.Time {
				ms.times = append(ms.times, p.Time)
				ms.vals = append(ms.vals, v)
				continue
			}
			j, found := slices.BinarySearch(ms.times, p.Time)
			if found {
				ms.vals[j] = v
				continue
			}
			ms.times = slices.Insert(ms.times, j, p.Time)
			ms.vals = slices.Insert(ms.vals, j, v)
		}
	}
	return nil
}

func (s *memStore) query(ctx context.Context, q engine.Query, rs *resultSet) error {
	if q.Agg != engine.AggNone && q.Agg != engine.AggMean {
		return errUnsupported
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var sel []*memSeries
	if q.Field != "" && len(q.Tags) > 0 {
		// A single series: the map lookup.
		if ms, ok := s.series[engine.SeriesKey(q.Measurement, q.Tags, q.Field)]; ok && ms.info.matches(&q.Selector) {
			sel = append(sel, ms)
		}
	} else {
		for _, ms := range s.series {
			if ms.info.matches(&q.Selector) {
				sel = append(sel, ms)
			}
		}
		slices.SortFunc(sel, func(a, b *memSeries) int { return strings.Compare(a.info.key, b.info.key) })
	}
	for n, ms := range sel {
		if n%128 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		lo := sort.Search(len(ms.times), func(i int) bool { return ms.times[i] >= q.Start })
		hi := sort.Search(len(ms.times), func(i int) bool { return ms.times[i] >= q.End })
		if lo >= hi {
			continue
		}
		id := rs.series(ms.info.key)
		var m meanAcc
		for i := lo; i < hi; i++ {
			t, v := ms.times[i], ms.vals[i]
			if q.Agg == engine.AggNone {
				rs.add(id, t, v)
				continue
			}
			if b := bucket(t, q.Every, q.Start); b != m.bucket || m.n == 0 {
				m.flush(rs, id)
				m.bucket = b
			}
			m.sum += v
			m.n++
		}
		m.flush(rs, id)
	}
	return nil
}

// close keeps the data for the next open of the same directory.
func (s *memStore) close() error { return nil }
