package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stratadb/strata/internal/point"
)

// The canonical series key is the line-protocol form of a series,
//
//	measurement,k1=v1,k2=v2 field
//
// with tags sorted by key. A comma, a space or a backslash is escaped with a
// backslash in the measurement; a comma, an equals sign, a space or a
// backslash in tag keys, tag values and the field key. Every key parses back
// to exactly the parts it was built from, and results are sorted by the byte
// order of their keys.

// SeriesKey returns the canonical key of the series (measurement, tags,
// field). tags may be in any order; it is not modified.
func SeriesKey(measurement string, tags []Tag, field string) string {
	return string(AppendSeriesKey(nil, measurement, tags, field))
}

// AppendSeriesKey appends the canonical key of (measurement, tags, field) to
// dst and returns the extended slice. tags may be in any order; it is not
// modified.
func AppendSeriesKey(dst []byte, measurement string, tags []Tag, field string) []byte {
	if !slices.IsSortedFunc(tags, cmpTagKey) {
		tags = slices.Clone(tags)
		point.SortTags(tags)
	}
	return point.AppendSeriesKey(dst, measurement, tags, field)
}

// ParseSeriesKey splits a canonical series key into its parts, tags sorted
// by key. A string SeriesKey cannot have produced is an error wrapping
// ErrInvalid.
func ParseSeriesKey(key string) (measurement string, tags []Tag, field string, err error) {
	m, tags, f, err := point.ParseSeriesKey([]byte(key))
	if err != nil {
		return "", nil, "", fmt.Errorf("%w: series key %q: %v", ErrInvalid, key, err)
	}
	return m, tags, f, nil
}

// Key returns the canonical key of the series.
func (s *Series) Key() string { return SeriesKey(s.Measurement, s.Tags, s.Field) }

func cmpTagKey(a, b Tag) int { return strings.Compare(a.Key, b.Key) }
