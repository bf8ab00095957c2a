package point

import (
	"fmt"
	"math"
	"strings"

	"github.com/stratadb/strata/internal/base"
)

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
func ValidateSeries(p *Point) error {
	if p.Measurement == "" {
		return fmt.Errorf("%w: empty measurement", base.ErrInvalid)
	}
	if hasNewline(p.Measurement) {
		return fmt.Errorf("%w: newline in measurement %q", base.ErrInvalid, p.Measurement)
	}
	for i, t := range p.Tags {
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
		for _, u := range p.Tags[:i] {
			if u.Key == t.Key {
				return fmt.Errorf("%w: duplicate tag key %q", base.ErrInvalid, t.Key)
			}
		}
	}
	return nil
}

// ValidateFields checks the fields of p.
func ValidateFields(p *Point) error {
	if len(p.Fields) == 0 {
		return fmt.Errorf("%w: no fields", base.ErrInvalid)
	}
	for i := range p.Fields {
		f := &p.Fields[i]
		if err := ValidateFieldKey(f.Key); err != nil {
			return err
		}
		if err := ValidateValue(f); err != nil {
			return err
		}
		for _, g := range p.Fields[:i] {
			if g.Key == f.Key {
				return fmt.Errorf("%w: duplicate field key %q", base.ErrInvalid, f.Key)
			}
		}
	}
	return nil
}

// ValidateFieldKey checks a field key.
func ValidateFieldKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty field key", base.ErrInvalid)
	}
	if hasNewline(key) {
		return fmt.Errorf("%w: newline in field key %q", base.ErrInvalid, key)
	}
	return nil
}

// ValidateValue checks a field's value: one of the five kinds, and a
// finite number when it is a float.
func ValidateValue(f *Field) error {
	switch f.Value.kind {
	case KindFloat:
		if v := f.Value.Float(); math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: field %q is %v", base.ErrInvalid, f.Key, v)
		}
	case KindInt, KindUint, KindBool, KindString:
	default:
		return fmt.Errorf("%w: field %q has no value", base.ErrInvalid, f.Key)
	}
	return nil
}

func hasNewline(s string) bool {
	return strings.IndexByte(s, '\n') >= 0 || strings.IndexByte(s, '\r') >= 0
}
