package engine

// The engine's side of the series catalog: the catalog itself (ids, kinds,
// the SERIES format and its loader, the inverted index and the matchers)
// is internal/catalog, which owns its lock and maps; the engine holds one
// Catalog (DB.cat) and its open file (DB.catf, guarded by versionMu).

import (
	"fmt"

	"github.com/stratadb/strata/internal/catalog"
)

// catalogFileSize returns the size of the SERIES file (0 before it
// exists).
func (db *DB) catalogFileSize() int64 {
	db.versionMu.Lock()
	defer db.versionMu.Unlock()
	if db.catf == nil {
		return 0
	}
	return db.catf.Size()
}

// validateSelectorFilters checks the tag filters and the time range of a
// selector: shared by Query, Delete, the metadata calls and Last.
func validateSelectorFilters(s *Selector) error {
	if !s.AllTime() && s.Start >= s.End {
		return fmt.Errorf("%w: start %d is not before end %d", ErrInvalid, s.Start, s.End)
	}
	for i, t := range s.Tags {
		if t.Key == "" || t.Value == "" {
			return fmt.Errorf("%w: empty tag key or value in selector", ErrInvalid)
		}
		for _, u := range s.Tags[:i] {
			if u.Key == t.Key {
				return fmt.Errorf("%w: duplicate tag key %q in selector", ErrInvalid, t.Key)
			}
		}
	}
	for _, m := range s.Matchers {
		if _, err := catalog.CompileMatcher(m); err != nil {
			return err
		}
	}
	return nil
}
