package engine

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Matchers follow PromQL's label matchers: a series that lacks a tag key
// has the value "" for it, and a regexp (RE2) must match the whole value.

// matcher is a compiled Matcher.
type matcher struct {
	key   string
	op    MatchOp
	value string
	re    *regexp.Regexp // for the regexp ops
	// prefix is a literal every value the regexp matches starts with, so
	// that a regexp only tests the sorted values that share it.
	prefix string
	// matchesEmpty: the matcher selects series that lack the key.
	matchesEmpty bool
}

// matches reports whether a tag value (or "" for a missing key) passes.
func (m *matcher) matches(v string) bool {
	switch m.op {
	case MatchEqual:
		return v == m.value
	case MatchNotEqual:
		return v != m.value
	case MatchRegexp:
		return strings.HasPrefix(v, m.prefix) && m.re.MatchString(v)
	default:
		return !strings.HasPrefix(v, m.prefix) || !m.re.MatchString(v)
	}
}

// regexpCache keeps compiled regexps, so that tombstones and repeated
// dashboard queries do not compile theirs again for every series.
var regexpCache struct {
	sync.Mutex
	m map[string]*regexp.Regexp
}

const regexpCacheSize = 512

// compileRegexp compiles pattern fully anchored, as PromQL does.
func compileRegexp(pattern string) (*regexp.Regexp, error) {
	regexpCache.Lock()
	re, ok := regexpCache.m[pattern]
	regexpCache.Unlock()
	if ok {
		return re, nil
	}
	re, err := regexp.Compile("^(?:" + pattern + ")$")
	if err != nil {
		return nil, fmt.Errorf("%w: bad regexp %q: %v", ErrInvalid, pattern, err)
	}
	regexpCache.Lock()
	if regexpCache.m == nil || len(regexpCache.m) >= regexpCacheSize {
		regexpCache.m = make(map[string]*regexp.Regexp)
	}
	regexpCache.m[pattern] = re
	regexpCache.Unlock()
	return re, nil
}

// compileMatcher validates and compiles one Matcher.
func compileMatcher(m Matcher) (matcher, error) {
	if m.Key == "" {
		return matcher{}, fmt.Errorf("%w: matcher with an empty tag key", ErrInvalid)
	}
	if !m.Op.Valid() {
		return matcher{}, fmt.Errorf("%w: matcher %q has unknown op %d", ErrInvalid, m.Key, int(m.Op))
	}
	c := matcher{key: m.Key, op: m.Op, value: m.Value}
	if m.Op == MatchRegexp || m.Op == MatchNotRegexp {
		re, err := compileRegexp(m.Value)
		if err != nil {
			return matcher{}, err
		}
		c.re = re
		pre, complete := re.LiteralPrefix()
		if complete {
			// The regexp is a literal: an equality.
			c.op, c.value = MatchEqual, pre
			if m.Op == MatchNotRegexp {
				c.op = MatchNotEqual
			}
		} else {
			c.prefix = pre
		}
	}
	c.matchesEmpty = c.matches("")
	return c, nil
}

// compileSelector turns a Selector's Tags and Matchers into compiled
// matchers (Tags are equality matchers).
func compileSelector(s *Selector) ([]matcher, error) {
	if len(s.Tags) == 0 && len(s.Matchers) == 0 {
		return nil, nil
	}
	ms := make([]matcher, 0, len(s.Tags)+len(s.Matchers))
	for _, t := range s.Tags {
		ms = append(ms, matcher{key: t.Key, op: MatchEqual, value: t.Value, matchesEmpty: t.Value == ""})
	}
	for _, m := range s.Matchers {
		c, err := compileMatcher(m)
		if err != nil {
			return nil, err
		}
		ms = append(ms, c)
	}
	return ms, nil
}

// compileStoredSelector compiles a selector that was validated before (a
// stored tombstone, a query past validation). It reports false, never
// panics, for a regexp that fails now: the caller then selects nothing
// rather than everything.
func compileStoredSelector(s *Selector) ([]matcher, bool) {
	ms, err := compileSelector(s)
	return ms, err == nil
}

// tagValue returns the value of key in sorted tags, or "".
func tagValue(tags []Tag, key string) string {
	i, ok := slices.BinarySearchFunc(tags, key, func(t Tag, k string) int { return strings.Compare(t.Key, k) })
	if !ok {
		return ""
	}
	return tags[i].Value
}

// matchTags reports whether sorted tags pass every matcher.
func matchTags(tags []Tag, ms []matcher) bool {
	for i := range ms {
		if !ms[i].matches(tagValue(tags, ms[i].key)) {
			return false
		}
	}
	return true
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
		if _, err := compileMatcher(m); err != nil {
			return err
		}
	}
	return nil
}
