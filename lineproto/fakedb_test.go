package lineproto_test

import (
	"fmt"
	"slices"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
)

// memDB is a fake lineproto.DB that models the engine: Write is atomic,
// validates every point, fixes a series' kind on its first write and refuses
// a point of another kind (against stored data or an earlier point of the
// same call) with a *base.PointError naming the first bad point.
type memDB struct {
	points   []point.Point
	kinds    map[string]point.Kind // series key -> kind
	calls    int                   // Write calls
	examined int                   // points looked at by Write, up to the first bad one
	maxBatch int                   // longest slice passed to Write
	failOn   int                   // when > 0, the failOn-th call fails with failErr
	failErr  error
	onWrite  func(n int) // called after each accepted Write with its point count
	anyKind  bool        // accept any kind: no conflicts
	invalid  int         // points that failed point.Validate
}

func newMemDB() *memDB { return &memDB{kinds: make(map[string]point.Kind)} }

func seriesKey(p *point.Point, field string) string {
	tags := slices.Clone(p.Tags)
	point.SortTags(tags)
	return point.SeriesKey(p.Measurement, tags, field)
}

func (db *memDB) Write(points []point.Point) error {
	db.calls++
	db.maxBatch = max(db.maxBatch, len(points))
	if db.failOn > 0 && db.calls == db.failOn {
		return db.failErr
	}
	staged := make(map[string]point.Kind)
	for i := range points {
		db.examined++
		p := &points[i]
		if err := point.Validate(p); err != nil {
			db.invalid++
			return &base.PointError{Index: i, Err: err}
		}
		for _, f := range p.Fields {
			key := seriesKey(p, f.Key)
			k, ok := staged[key]
			if !ok {
				k, ok = db.kinds[key]
			}
			if ok && k != f.Value.Kind() && !db.anyKind {
				return &base.PointError{Index: i, Err: fmt.Errorf("%w: series %q is %v, got %v",
					base.ErrFieldTypeConflict, key, k, f.Value.Kind())}
			}
			staged[key] = f.Value.Kind()
		}
	}
	for k, v := range staged {
		db.kinds[k] = v
	}
	for _, p := range points {
		// The writer reuses its slices: keep copies.
		p.Tags = slices.Clone(p.Tags)
		p.Fields = slices.Clone(p.Fields)
		db.points = append(db.points, p)
	}
	if db.onWrite != nil {
		db.onWrite(len(points))
	}
	return nil
}

// discardDB accepts and drops every point.
type discardDB struct{ n int }

func (db *discardDB) Write(points []point.Point) error {
	db.n += len(points)
	return nil
}
