package engine

// What retention rules (rules.go) and rollup rules (rollup.go) share: a
// selector (a measurement and matchers) that picks series, and a value
// per series kept by catalog id, filled as the catalog grows.

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/stratadb/strata/internal/catalog"
)

// ruleSelector is a rule's compiled measurement and matchers.
type ruleSelector struct {
	measurement string // "" = every measurement
	ms          []catalog.Matcher
}

// compileRuleSelector validates and compiles the selector of rule i of a
// list of what rules (for errors: "retention rule 3: ...").
func compileRuleSelector(what string, i int, measurement string, matchers []Matcher) (ruleSelector, error) {
	if strings.ContainsAny(measurement, "\n\r") {
		return ruleSelector{}, fmt.Errorf("%w: %s %d: newline in measurement %q", ErrInvalid, what, i, measurement)
	}
	ms, err := catalog.CompileSelector(&Selector{Matchers: matchers})
	if err != nil {
		return ruleSelector{}, fmt.Errorf("%s %d: %w", what, i, err)
	}
	return ruleSelector{measurement: measurement, ms: ms}, nil
}

// selects reports whether the rule's selector picks series s.
func (r *ruleSelector) selects(s *catalog.Series) bool {
	if r.measurement != "" && !s.Set.MeasurementIs(r.measurement) {
		return false
	}
	var buf [8]Tag
	return catalog.MatchTags(s.Set.AppendTags(buf[:0]), r.ms)
}

// perSeries holds a value for each series of the catalog by id, computed
// by of when first asked for. Readers see only the first len of what they
// loaded, so appending in place under mu is safe.
type perSeries[T any] struct {
	mu   sync.Mutex // serialises filling
	vals atomic.Pointer[[]T]
}

// all returns the values of every series c holds now.
func (p *perSeries[T]) all(c *catalog.Catalog, of func(*catalog.Series) T) []T {
	if v := p.vals.Load(); v != nil && len(*v) >= c.Len() {
		return *v
	}
	return p.fill(c, of)
}

// at returns the value of series id, the zero value for an id c does
// not hold.
func (p *perSeries[T]) at(c *catalog.Catalog, id uint64, of func(*catalog.Series) T) T {
	if v := p.vals.Load(); v != nil && id < uint64(len(*v)) {
		return (*v)[id]
	}
	if vs := p.fill(c, of); id < uint64(len(vs)) {
		return vs[id]
	}
	var zero T
	return zero
}

// fill computes the values of the series added to c since the last fill.
func (p *perSeries[T]) fill(c *catalog.Catalog, of func(*catalog.Series) T) []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	var vs []T
	if v := p.vals.Load(); v != nil {
		vs = *v
	}
	for _, s := range c.Since(len(vs)) {
		vs = append(vs, of(s))
	}
	p.vals.Store(&vs)
	return vs
}

// storeRules installs a compiled rule list (Options.*Rules at run time):
// refused when compiling failed or the database is closed, and compaction
// is scheduled to apply it.
func storeRules[T any](db *DB, p *atomic.Pointer[T], rs *T, err error) error {
	if err != nil {
		return err
	}
	if err := db.checkOpen(); err != nil {
		return err
	}
	p.Store(rs)
	db.maybeScheduleCompaction()
	return nil
}
