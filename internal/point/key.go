package point

import (
	"errors"
	"slices"
	"strings"
)

// The canonical series key is the line-protocol form of a series:
//
//	measurement,k1=v1,k2=v2 field
//
// with tags sorted by key. Commas and spaces are escaped with a backslash in
// the measurement; commas, equals signs and spaces in tag keys, tag values and
// the field key. A backslash is escaped as "\\" everywhere so that every key
// parses back to exactly the parts it was built from. Keys are compared as
// bytes; results are sorted by that order.

// AppendSeriesKey appends the canonical key of (measurement, tags, field) to
// dst. tags must already be sorted by key (see SortTags).
func AppendSeriesKey(dst []byte, measurement string, tags []Tag, field string) []byte {
	dst = appendEscaped(dst, measurement, false)
	for _, t := range tags {
		dst = append(dst, ',')
		dst = appendEscaped(dst, t.Key, true)
		dst = append(dst, '=')
		dst = appendEscaped(dst, t.Value, true)
	}
	dst = append(dst, ' ')
	return appendEscaped(dst, field, true)
}

// SeriesKey returns the canonical key as a string.
func SeriesKey(measurement string, tags []Tag, field string) string {
	return string(AppendSeriesKey(nil, measurement, tags, field))
}

func needsEscape(c byte, eq bool) bool {
	return c == ',' || c == ' ' || c == '\\' || (eq && c == '=')
}

func appendEscaped(dst []byte, s string, eq bool) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if needsEscape(c, eq) {
			dst = append(dst, '\\')
		}
		dst = append(dst, c)
	}
	return dst
}

var errBadKey = errors.New("malformed series key")

// ParseSeriesKey splits a canonical key into its parts. It returns an error
// for bytes that AppendSeriesKey cannot have produced.
func ParseSeriesKey(key []byte) (measurement string, tags []Tag, field string, err error) {
	var sb strings.Builder
	i := 0
	// next reads an escaped token up to one of the stop bytes.
	next := func(stops string) (string, byte, bool) {
		sb.Reset()
		for i < len(key) {
			c := key[i]
			if c == '\\' {
				if i+1 >= len(key) {
					return "", 0, false
				}
				sb.WriteByte(key[i+1])
				i += 2
				continue
			}
			if strings.IndexByte(stops, c) >= 0 {
				i++
				return sb.String(), c, true
			}
			sb.WriteByte(c)
			i++
		}
		return sb.String(), 0, true
	}
	m, stop, ok := next(", ")
	if !ok || stop == 0 {
		return "", nil, "", errBadKey
	}
	measurement = m
	for stop == ',' {
		k, s, ok := next("=")
		if !ok || s != '=' {
			return "", nil, "", errBadKey
		}
		v, s2, ok := next(", ")
		if !ok || s2 == 0 {
			return "", nil, "", errBadKey
		}
		tags = append(tags, Tag{Key: k, Value: v})
		stop = s2
	}
	f, s, ok := next("")
	if !ok || s != 0 {
		return "", nil, "", errBadKey
	}
	return measurement, tags, f, nil
}

// SortTags sorts tags by key in place.
func SortTags(tags []Tag) {
	if slices.IsSortedFunc(tags, cmpTag) {
		return
	}
	slices.SortFunc(tags, cmpTag)
}

func cmpTag(a, b Tag) int { return strings.Compare(a.Key, b.Key) }
