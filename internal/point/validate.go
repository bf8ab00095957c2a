package point

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/stratadb/strata/internal/base"
)

// Limits on what a Write may hold. Every value within them can be logged,
// flushed, compacted, reopened and read back; the engine checks them when
// a point is written, so that nothing it accepts is refused later.
const (
	// MaxStringLen is the longest string field value, in bytes (the
	// segment writer's own limit).
	MaxStringLen = 32 << 20
	// MaxKeyLen is the longest canonical series key (measurement, tags
	// and field key, escaped), in bytes, as InfluxDB's limit.
	MaxKeyLen = 65535
	// MaxTags is the most tags a point may have.
	MaxTags = 1024
	// MaxFields is the most fields a point may have. A point's cost grows
	// linearly with its tags and fields up to these limits.
	MaxFields = 1 << 16
	// MaxPointBytes bounds the encoded size of one point: its fields'
	// values and the keys of the series it creates.
	MaxPointBytes = 64 << 20
	// MaxWriteBytes bounds the encoded size of the points of one Write
	// call, which is logged as one WAL record.
	MaxWriteBytes = 128 << 20
)

// EntryBytes returns an upper bound of the encoded size of one field value
// in a WAL record, the quantity MaxPointBytes and MaxWriteBytes bound.
func EntryBytes(v Value) int {
	const fixed = 32 // series id, kind, time delta, number or string length
	return fixed + len(v.s)
}

// Validate checks p against the data model and returns an error wrapping
// base.ErrInvalid that names the bad part. It does not modify p.
func Validate(p *Point) error {
	if err := ValidateSeries(p); err != nil {
		return err
	}
	return ValidateFields(p)
}

// ValidateSeries checks the measurement and tags of p. A caller that finds
// p's measurement and tag set equal to one it validated before may skip it.
// It takes O(n) expected time in the number of tags (a sort more when the
// key may be longer than MaxKeyLen).
func ValidateSeries(p *Point) error {
	if p.Measurement == "" {
		return fmt.Errorf("%w: empty measurement", base.ErrInvalid)
	}
	if hasNewline(p.Measurement) {
		return fmt.Errorf("%w: newline in measurement %q", base.ErrInvalid, p.Measurement)
	}
	if len(p.Tags) > MaxTags {
		return fmt.Errorf("%w: %d tags, more than %d", base.ErrInvalid, len(p.Tags), MaxTags)
	}
	n := len(p.Measurement)
	for _, t := range p.Tags {
		switch {
		case t.Key == "":
			return fmt.Errorf("%w: empty tag key", base.ErrInvalid)
		case t.Value == "":
			return fmt.Errorf("%w: empty value for tag %q", base.ErrInvalid, t.Key)
		case hasNewline(t.Key):
			return fmt.Errorf("%w: newline in tag key %q", base.ErrInvalid, t.Key)
		case hasNewline(t.Value):
			return fmt.Errorf("%w: newline in value of tag %q", base.ErrInvalid, t.Key)
		}
		n += 2 + len(t.Key) + len(t.Value)
	}
	// Escaping at most doubles the bytes: check the cheap bound first.
	if n > MaxKeyLen/2 {
		if l := len(AppendSeriesKey(nil, p.Measurement, sortedCopy(p.Tags), "")); l > MaxKeyLen {
			return fmt.Errorf("%w: series key of %d bytes, more than %d", base.ErrInvalid, l, MaxKeyLen)
		}
	}
	if k, ok := duplicateTagKey(p.Tags); ok {
		return fmt.Errorf("%w: duplicate tag key %q", base.ErrInvalid, k)
	}
	return nil
}

func sortedCopy(tags []Tag) []Tag {
	if slices.IsSortedFunc(tags, cmpTag) {
		return tags
	}
	s := slices.Clone(tags)
	slices.SortFunc(s, cmpTag)
	return s
}

// duplicateTagKey returns a key that occurs twice in tags. Few tags are
// compared pairwise; sorted ones are scanned; others go through a hash set,
// so the check is O(n).
func duplicateTagKey(tags []Tag) (string, bool) {
	const pairwise = 16
	if len(tags) <= pairwise {
		for i, t := range tags {
			for _, u := range tags[:i] {
				if u.Key == t.Key {
					return t.Key, true
				}
			}
		}
		return "", false
	}
	sorted := true
	for i := 1; i < len(tags); i++ {
		switch c := strings.Compare(tags[i-1].Key, tags[i].Key); {
		case c == 0:
			return tags[i].Key, true
		case c > 0:
			sorted = false
		}
		if !sorted {
			break
		}
	}
	if sorted {
		return "", false
	}
	return firstDuplicate(len(tags), func(i int) string { return tags[i].Key })
}

// firstDuplicate returns the first of n keys (key(0), key(1), ...) equal
// to an earlier one, in O(n) expected time and space.
func firstDuplicate(n int, key func(i int) string) (string, bool) {
	seen := make(map[string]struct{}, n)
	for i := range n {
		k := key(i)
		if _, dup := seen[k]; dup {
			return k, true
		}
		seen[k] = struct{}{}
	}
	return "", false
}

// ValidateFieldCount checks that a point's n fields are at least one and
// at most MaxFields.
func ValidateFieldCount(n int) error {
	switch {
	case n == 0:
		return fmt.Errorf("%w: no fields", base.ErrInvalid)
	case n > MaxFields:
		return fmt.Errorf("%w: %d fields, more than %d", base.ErrInvalid, n, MaxFields)
	}
	return nil
}

// ValidateFields checks the fields of p.
func ValidateFields(p *Point) error {
	if err := ValidateFieldCount(len(p.Fields)); err != nil {
		return err
	}
	size := 0
	for i := range p.Fields {
		f := &p.Fields[i]
		if err := ValidateFieldKey(f.Key); err != nil {
			return err
		}
		if err := ValidateValue(f); err != nil {
			return err
		}
		size += EntryBytes(f.Value)
	}
	if size > MaxPointBytes {
		return fmt.Errorf("%w: point of %d bytes, more than %d", base.ErrInvalid, size, MaxPointBytes)
	}
	if k, ok := duplicateFieldKey(p.Fields); ok {
		return fmt.Errorf("%w: duplicate field key %q", base.ErrInvalid, k)
	}
	return nil
}

// duplicateFieldKey is duplicateTagKey for field keys.
func duplicateFieldKey(fields []Field) (string, bool) {
	const pairwise = 16
	if len(fields) <= pairwise {
		for i, f := range fields {
			for _, g := range fields[:i] {
				if g.Key == f.Key {
					return f.Key, true
				}
			}
		}
		return "", false
	}
	return firstDuplicate(len(fields), func(i int) string { return fields[i].Key })
}

// DuplicateTagKey returns a tag key that occurs twice in tags, in O(n)
// time.
func DuplicateTagKey(tags []Tag) (string, bool) { return duplicateTagKey(tags) }

// DuplicateFieldKey returns a field key that occurs twice in fields, in
// O(n) time.
func DuplicateFieldKey(fields []Field) (string, bool) { return duplicateFieldKey(fields) }

// ValidateFieldKey checks a field key.
func ValidateFieldKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty field key", base.ErrInvalid)
	}
	if hasNewline(key) {
		return fmt.Errorf("%w: newline in field key %q", base.ErrInvalid, key)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: field key of %d bytes, more than %d", base.ErrInvalid, len(key), MaxKeyLen)
	}
	return nil
}

// ValidateValue checks a field's value: one of the five kinds, a finite
// number when it is a float, and at most MaxStringLen bytes when it is a
// string.
func ValidateValue(f *Field) error {
	switch f.Value.kind {
	case KindFloat:
		if v := f.Value.Float(); math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: field %q is %v", base.ErrInvalid, f.Key, v)
		}
	case KindString:
		if len(f.Value.s) > MaxStringLen {
			return fmt.Errorf("%w: field %q holds a string of %d bytes, more than %d", base.ErrInvalid, f.Key, len(f.Value.s), MaxStringLen)
		}
	case KindInt, KindUint, KindBool:
	default:
		return fmt.Errorf("%w: field %q has no value", base.ErrInvalid, f.Key)
	}
	return nil
}

func hasNewline(s string) bool {
	return strings.IndexByte(s, '\n') >= 0 || strings.IndexByte(s, '\r') >= 0
}
