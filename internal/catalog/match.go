package catalog

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
)

// Matchers follow PromQL's label matchers: a series that lacks a tag key
// has the value "" for it, and a regexp (RE2) must match the whole value.

// Matcher is a compiled point.Matcher.
type Matcher struct {
	key   string
	op    point.MatchOp
	value string
	re    *regexp.Regexp // for the regexp ops
	// prefix is a literal every value the regexp matches starts with, so
	// that a regexp only tests the sorted values that share it.
	prefix string
	// matchesEmpty: the matcher selects series that lack the key.
	matchesEmpty bool
}

// matches reports whether a tag value (or "" for a missing key) passes.
func (m *Matcher) matches(v string) bool {
	switch m.op {
	case point.MatchEqual:
		return v == m.value
	case point.MatchNotEqual:
		return v != m.value
	case point.MatchRegexp:
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
		return nil, fmt.Errorf("%w: bad regexp %q: %v", base.ErrInvalid, pattern, err)
	}
	regexpCache.Lock()
	if regexpCache.m == nil || len(regexpCache.m) >= regexpCacheSize {
		regexpCache.m = make(map[string]*regexp.Regexp)
	}
	regexpCache.m[pattern] = re
	regexpCache.Unlock()
	return re, nil
}

// CompileMatcher validates and compiles one point.Matcher.
func CompileMatcher(m point.Matcher) (Matcher, error) {
	if m.Key == "" {
		return Matcher{}, fmt.Errorf("%w: matcher with an empty tag key", base.ErrInvalid)
	}
	if !m.Op.Valid() {
		return Matcher{}, fmt.Errorf("%w: matcher %q has unknown op %d", base.ErrInvalid, m.Key, int(m.Op))
	}
	c := Matcher{key: m.Key, op: m.Op, value: m.Value}
	if m.Op == point.MatchRegexp || m.Op == point.MatchNotRegexp {
		re, err := compileRegexp(m.Value)
		if err != nil {
			return Matcher{}, err
		}
		c.re = re
		pre, complete := re.LiteralPrefix()
		if complete {
			// The regexp is a literal: an equality.
			c.op, c.value = point.MatchEqual, pre
			if m.Op == point.MatchNotRegexp {
				c.op = point.MatchNotEqual
			}
		} else {
			c.prefix = pre
		}
	}
	c.matchesEmpty = c.matches("")
	return c, nil
}

// CompileSelector turns a point.Selector's Tags and Matchers into compiled
// matchers (Tags are equality matchers).
func CompileSelector(s *point.Selector) ([]Matcher, error) {
	if len(s.Tags) == 0 && len(s.Matchers) == 0 {
		return nil, nil
	}
	ms := make([]Matcher, 0, len(s.Tags)+len(s.Matchers))
	for _, t := range s.Tags {
		ms = append(ms, Matcher{key: t.Key, op: point.MatchEqual, value: t.Value, matchesEmpty: t.Value == ""})
	}
	for _, m := range s.Matchers {
		c, err := CompileMatcher(m)
		if err != nil {
			return nil, err
		}
		ms = append(ms, c)
	}
	return ms, nil
}

// CompileStoredSelector compiles a selector that was validated before (a
// stored tombstone, a query past validation). It reports false, never
// panics, for a regexp that fails now: the caller then selects nothing
// rather than everything.
func CompileStoredSelector(s *point.Selector) ([]Matcher, bool) {
	ms, err := CompileSelector(s)
	return ms, err == nil
}

// TagValue returns the value of key in sorted tags, or "".
func TagValue(tags []point.Tag, key string) string {
	i, ok := slices.BinarySearchFunc(tags, key, func(t point.Tag, k string) int { return strings.Compare(t.Key, k) })
	if !ok {
		return ""
	}
	return tags[i].Value
}

// MatchTags reports whether sorted tags pass every matcher.
func MatchTags(tags []point.Tag, ms []Matcher) bool {
	for i := range ms {
		if !ms[i].matches(TagValue(tags, ms[i].key)) {
			return false
		}
	}
	return true
}
