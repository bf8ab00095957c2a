package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/stratadb/strata/engine"
)

// selectorFlags are the flags that pick series and a time range, shared by
// query, series, last and tags.
type selectorFlags struct {
	db          *string
	measurement *string
	field       *string
	tags        tagFlags
	matchers    matchFlags
	start, end  *string
}

// addSelectorFlags registers the selector flags on fs. measurementHelp
// says whether the measurement is required.
func addSelectorFlags(fs *flag.FlagSet, measurementHelp string) *selectorFlags {
	s := &selectorFlags{
		db:          fs.String("db", "", "database directory (required)"),
		measurement: fs.String("measurement", "", measurementHelp),
		field:       fs.String("field", "", "field key; empty = every field"),
	}
	fs.Var(&s.tags, "tag", "key=value tag filter, repeatable (ANDed)")
	fs.Var(&s.matchers, "match", "tag matcher 'k=v', 'k!=v', 'k=~regexp' or 'k!~regexp' (PromQL semantics:\n"+
		"a missing tag is \"\", regexps match the whole value), repeatable (ANDed)")
	s.start = fs.String("start", "", "range start, inclusive: now, -1h, -7d (relative to now), 2024-05-01,\n"+
		"RFC 3339 or Unix ns (default: the beginning of time)")
	s.end = fs.String("end", "", "range end, exclusive, as --start (default: the end of time)")
	return s
}

// selector builds the engine selector; now is the time relative times
// count from.
func (s *selectorFlags) selector(now time.Time) (engine.Selector, error) {
	sel := engine.Selector{Measurement: *s.measurement, Field: *s.field, Tags: s.tags, Matchers: s.matchers}
	if *s.start == "" && *s.end == "" {
		return sel, nil // all time
	}
	var err error
	if sel.Start, err = parseTime(*s.start, math.MinInt64, now); err != nil {
		return sel, fmt.Errorf("--start: %w", err)
	}
	if sel.End, err = parseTime(*s.end, math.MaxInt64, now); err != nil {
		return sel, fmt.Errorf("--end: %w", err)
	}
	if sel.Start >= sel.End {
		return sel, fmt.Errorf("--start %s is not before --end %s", formatTime(sel.Start), formatTime(sel.End))
	}
	return sel, nil
}

// tagFlags collects repeated --tag k=v flags.
type tagFlags []engine.Tag

func (t *tagFlags) String() string { return fmt.Sprint(*t) }

func (t *tagFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || v == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	*t = append(*t, engine.Tag{Key: k, Value: v})
	return nil
}

// matchFlags collects repeated --match flags.
type matchFlags []engine.Matcher

func (m *matchFlags) String() string { return fmt.Sprint(*m) }

func (m *matchFlags) Set(s string) error {
	mt, err := parseMatcher(s)
	if err != nil {
		return err
	}
	*m = append(*m, mt)
	return nil
}

// parseMatcher reads k=v, k!=v, k=~re or k!~re. The value may be quoted
// with double quotes, as in PromQL ("..." with Go escapes).
func parseMatcher(s string) (engine.Matcher, error) {
	i := strings.IndexAny(s, "=!")
	if i <= 0 {
		return engine.Matcher{}, fmt.Errorf("want k=v, k!=v, k=~regexp or k!~regexp, got %q", s)
	}
	m := engine.Matcher{Key: strings.TrimSpace(s[:i])}
	rest := s[i:]
	switch {
	case strings.HasPrefix(rest, "=~"):
		m.Op, rest = engine.MatchRegexp, rest[2:]
	case strings.HasPrefix(rest, "!~"):
		m.Op, rest = engine.MatchNotRegexp, rest[2:]
	case strings.HasPrefix(rest, "!="):
		m.Op, rest = engine.MatchNotEqual, rest[2:]
	case strings.HasPrefix(rest, "="):
		m.Op, rest = engine.MatchEqual, rest[1:]
	default:
		return engine.Matcher{}, fmt.Errorf("want k=v, k!=v, k=~regexp or k!~regexp, got %q", s)
	}
	if len(rest) >= 2 && rest[0] == '"' && rest[len(rest)-1] == '"' {
		v, err := strconv.Unquote(rest)
		if err != nil {
			return engine.Matcher{}, fmt.Errorf("bad quoted value in %q: %v", s, err)
		}
		rest = v
	}
	m.Value = rest
	if m.Op == engine.MatchRegexp || m.Op == engine.MatchNotRegexp {
		// Anchored as the engine compiles it, so that a bad regexp is a
		// bad flag rather than a failure once the query runs.
		if _, err := regexp.Compile("^(?:" + m.Value + ")$"); err != nil {
			return engine.Matcher{}, fmt.Errorf("bad regexp %q in %q: %v", m.Value, s, err)
		}
	}
	return m, nil
}

// parseDuration reads a Prometheus-style duration: 90s, 5m, 1h30m, 1d, 1w,
// 1y (365d), or Go's forms (1.5h, 250ms); "0" is zero.
func parseDuration(s string) (time.Duration, error) {
	if s == "" || s == "0" {
		return 0, nil
	}
	if d, err := model.ParseDuration(s); err == nil {
		return time.Duration(d), nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	return 0, fmt.Errorf("bad duration %q: want e.g. 30s, 5m, 1h30m, 1d or 1w", s)
}

// durationFlag is a flag.Value for parseDuration.
type durationFlag time.Duration

func (d *durationFlag) String() string { return time.Duration(*d).String() }

func (d *durationFlag) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("negative duration %q", s)
	}
	*d = durationFlag(v)
	return nil
}

// parseTime reads a time: "" (def), now, a duration relative to now (-1h,
// +30m, -7d), a date (2024-05-01, UTC midnight), RFC 3339 (with or without
// fractional seconds), or integer Unix nanoseconds.
func parseTime(s string, def int64, now time.Time) (int64, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return def, nil
	case strings.EqualFold(s, "now"):
		return now.UnixNano(), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	if s[0] == '-' || s[0] == '+' {
		d, err := parseDuration(s[1:])
		if err == nil && strings.TrimSpace(s[1:]) == "" {
			err = errors.New("a sign without a duration")
		}
		if err != nil {
			return 0, fmt.Errorf("time %q: %w", s, err)
		}
		if s[0] == '-' {
			d = -d
		}
		return unixNanoClamped(now.Add(d)), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return unixNanoClamped(t), nil
		}
	}
	return 0, fmt.Errorf("time %q is not now, a relative duration (-1h, -7d), a date (2024-05-01), RFC 3339 or Unix ns", s)
}

// unixNanoClamped is t in Unix ns, a time before or after what int64 ns
// hold (1677 to 2262) the first or last of them: no sample lies beyond,
// so a range bound there selects the same samples. (UnixNano's result is
// undefined there: it wraps around.)
func unixNanoClamped(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func formatTime(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

// openExisting opens the database in dir read-only: it creates, changes
// and locks nothing, so it works beside a running writer, and a directory
// that holds no database is engine.ErrNotDatabase.
func openExisting(dir string) (*engine.DB, error) {
	if dir == "" {
		return nil, errors.New("--db is required")
	}
	return engine.Open(dir, &engine.Options{ReadOnly: true})
}
