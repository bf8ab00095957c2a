package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/stratadb/strata/internal/catalog"
)

// Metadata reads the catalog and the inverted index for the series a
// selector names, then keeps those with a visible sample in range. That
// check reads index metadata only: segment block time ranges and memtable
// bounds. A block is decoded only when neither of its end samples decides
// (both outside the range or deleted by a tombstone), which an all-time
// question without deletes never meets.

// Measurements returns the measurements that have at least one visible
// sample, sorted.
func (db *DB) Measurements(ctx context.Context) ([]string, error) {
	var out []string
	err := db.withVisibility(ctx, &Selector{}, func(v *visibility) error {
		for _, name := range v.db.cat.Measurements() {
			ids := v.db.cat.MeasurementIDs(name)
			// Usually the first series answers; look at a few, then at all.
			for lo, n := 0, 1; lo < len(ids); lo, n = lo+n, n*16 {
				if err := ctx.Err(); err != nil {
					return err
				}
				vis, err := v.filter(ids[lo:min(lo+n, len(ids))])
				if err != nil {
					return err
				}
				if len(vis) > 0 {
					out = append(out, name)
					break
				}
			}
		}
		return nil
	})
	return out, err
}

// TagKeys returns the tag keys of the series s selects that have a visible
// sample in its range, sorted.
func (db *DB) TagKeys(ctx context.Context, s Selector) ([]string, error) {
	var out []string
	err := db.withVisibility(ctx, &s, func(v *visibility) error {
		ids, err := v.selected(nil)
		if err != nil {
			return err
		}
		seen := make(map[*catalog.Set]bool)
		keys := make(map[string]bool)
		var tags []Tag
		for i, m := range v.db.cat.Metas(ids) {
			if i%(16*checkContextEvery) == 0 && v.ctx.Err() != nil {
				return v.ctx.Err()
			}
			set := m.Set
			if seen[set] {
				continue
			}
			seen[set] = true
			tags = set.AppendTags(tags[:0])
			for _, t := range tags {
				keys[t.Key] = true
			}
		}
		for k := range keys {
			out = append(out, k)
		}
		slices.Sort(out)
		return nil
	})
	return out, err
}

// TagValues returns the values of tag key among the series s selects that
// have a visible sample in its range, sorted; never "".
func (db *DB) TagValues(ctx context.Context, key string, s Selector) ([]string, error) {
	if key == "" {
		return nil, fmt.Errorf("%w: empty tag key", ErrInvalid)
	}
	var out []string
	err := db.withVisibility(ctx, &s, func(v *visibility) error {
		lists, err := v.db.cat.TagValues(ctx, s.Measurement, s.Field, key, v.ms, v.filter)
		if err != nil {
			return err
		}
		out = mergeSortedStrings(lists)
		return nil
	})
	return out, err
}

// mergeSortedStrings merges sorted lists into one sorted list without
// duplicates.
func mergeSortedStrings(lists [][]string) []string {
	switch len(lists) {
	case 0:
		return nil
	case 1:
		return lists[0]
	}
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// SeriesInfo describes the series s selects that have a visible sample in
// its range, sorted by canonical series key, without reading samples.
func (db *DB) SeriesInfo(ctx context.Context, s Selector) ([]SeriesInfo, error) {
	var out []SeriesInfo
	err := db.withVisibility(ctx, &s, func(v *visibility) error {
		ids, err := v.selected(nil)
		if err != nil {
			return err
		}
		v.db.cat.SortByKey(ids)
		out = make([]SeriesInfo, len(ids))
		for i, m := range v.db.cat.Metas(ids) {
			if i%(16*checkContextEvery) == 0 && v.ctx.Err() != nil {
				return v.ctx.Err()
			}
			out[i] = SeriesInfo{Measurement: m.Set.Measurement(), Tags: m.Set.Tags(), Field: m.Field, Kind: m.Kind}
		}
		return nil
	})
	return out, err
}

// validateMetaSelector checks a selector of the metadata calls and Last,
// where the measurement may be "" (every measurement).
func validateMetaSelector(s *Selector) error {
	if strings.ContainsAny(s.Measurement, "\n\r") {
		return fmt.Errorf("%w: newline in measurement %q", ErrInvalid, s.Measurement)
	}
	return validateSelectorFilters(s)
}
