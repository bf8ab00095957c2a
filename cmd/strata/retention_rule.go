package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/stratadb/strata/engine"
)

// retentionRuleFlags collects repeated --retention-rule flags, in order
// (the first rule that matches a series wins).
type retentionRuleFlags []engine.RetentionRule

func (r *retentionRuleFlags) String() string { return fmt.Sprint(len(*r), " rules") }

func (r *retentionRuleFlags) Set(s string) error {
	rule, err := parseRetentionRule(s)
	if err != nil {
		return err
	}
	*r = append(*r, rule)
	return nil
}

// parseRetentionRule reads MEASUREMENT{matchers}=DURATION: the measurement
// may be empty (every measurement) and the braces left out (every series
// of the measurement); matchers are PromQL-style k="v", k!="v", k=~"re",
// k!~"re", comma-separated, values double-quoted (Go escapes) or bare;
// the duration as --retention takes it (30d, 1w, 1y, 0 = forever).
func parseRetentionRule(s string) (engine.RetentionRule, error) {
	bad := func(format string, a ...any) (engine.RetentionRule, error) {
		return engine.RetentionRule{}, fmt.Errorf("retention rule %q: "+format+
			" (want MEASUREMENT{k=\"v\",...}=DURATION, e.g. 'cpu{host=\"a\"}=7d')", append([]any{s}, a...)...)
	}
	eq := strings.LastIndexByte(s, '=')
	if eq < 0 || eq == len(s)-1 {
		return bad("no =DURATION")
	}
	sel, durText := s[:eq], strings.TrimSpace(s[eq+1:])
	if durText == "" || strings.ContainsAny(durText, "}\"") {
		return bad("no =DURATION after the matchers")
	}
	keep, err := parseDuration(durText)
	if err != nil {
		return bad("%v", err)
	}
	if keep < 0 {
		return bad("negative duration")
	}
	rule := engine.RetentionRule{Keep: keep}
	m, ms, err := parseRuleSelector(sel, "}\n\r", "'{}=DURATION'")
	if err != nil {
		return bad("%v", err)
	}
	rule.Measurement, rule.Matchers = m, ms
	// The engine's checks (regexps, ops), so that the flag fails at once.
	if err := validateRules([]engine.RetentionRule{rule}); err != nil {
		return bad("%v", err)
	}
	return rule, nil
}

// splitMatchers splits the inside of {...} at the commas outside
// double-quoted values; a trailing comma is allowed, as in PromQL.
func splitMatchers(body string) ([]string, error) {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case quoted && c == '\\':
			i++ // the escaped byte
		case c == '"':
			quoted = !quoted
		case !quoted && c == ',':
			out = append(out, body[start:i])
			start = i + 1
		case !quoted && (c == '{' || c == '}'):
			return nil, fmt.Errorf("unexpected %q in matchers", c)
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quoted value")
	}
	out = append(out, body[start:])
	// Trim, and drop one empty trailing item ("a=b," or "{}").
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	if n := len(out); out[n-1] == "" {
		out = out[:n-1]
	}
	for _, m := range out {
		if m == "" {
			return nil, fmt.Errorf("empty matcher")
		}
	}
	return out, nil
}

// validateRules checks rules as the engine will, without a database.
func validateRules(rules []engine.RetentionRule) error {
	o := engine.Options{RetentionRules: rules}
	o.EnsureDefaults()
	return o.Validate()
}

// trimMatcher removes the spaces around a matcher's operator, as PromQL
// allows them ("host = \"a\""); a value with edge spaces must be quoted.
func trimMatcher(m string) string {
	i := strings.IndexAny(m, "=!")
	if i < 0 {
		return m
	}
	n := 1
	if i+1 < len(m) && (m[i+1] == '~' || m[i] == '!' && m[i+1] == '=') {
		n = 2
	}
	return strings.TrimSpace(m[:i]) + m[i:i+n] + strings.TrimSpace(m[i+n:])
}

// parseRuleSelector reads the MEASUREMENT{matchers} part of a rule flag:
// the measurement may be empty (every measurement) and the braces left out
// (every series of the measurement), but not both; forbidden lists the
// characters a measurement given without braces may not hold (with braces,
// those of forbidden but '}'). everyHint is how to write a rule for every
// series, for the error.
func parseRuleSelector(sel, forbidden, everyHint string) (string, []engine.Matcher, error) {
	open := strings.IndexByte(sel, '{')
	if open < 0 {
		m := strings.TrimSpace(sel)
		if m == "" {
			return "", nil, fmt.Errorf("no measurement and no matchers: write %s for every series", everyHint)
		}
		if strings.ContainsAny(m, forbidden) {
			return "", nil, fmt.Errorf("bad measurement %q", m)
		}
		return m, nil, nil
	}
	m := strings.TrimSpace(sel[:open])
	if strings.ContainsAny(m, strings.ReplaceAll(forbidden, "}", "")) {
		return "", nil, fmt.Errorf("bad measurement %q", m)
	}
	body := strings.TrimSpace(sel[open+1:])
	if !strings.HasSuffix(body, "}") {
		return "", nil, errors.New("no closing }")
	}
	parts, err := splitMatchers(body[:len(body)-1])
	if err != nil {
		return "", nil, err
	}
	var ms []engine.Matcher
	for _, part := range parts {
		mt, err := parseMatcher(trimMatcher(part))
		if err != nil {
			return "", nil, err
		}
		if mt.Key == "" || strings.ContainsAny(mt.Key, " {}\"") {
			return "", nil, fmt.Errorf("bad tag key %q", mt.Key)
		}
		ms = append(ms, mt)
	}
	return m, ms, nil
}
