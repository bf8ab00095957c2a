package main

import (
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
	open := strings.IndexByte(sel, '{')
	if open < 0 {
		rule.Measurement = strings.TrimSpace(sel)
		if rule.Measurement == "" {
			return bad("no measurement and no matchers: write '{}=DURATION' for every series")
		}
		if strings.ContainsAny(rule.Measurement, "}\n\r") {
			return bad("bad measurement %q", rule.Measurement)
		}
		return rule, nil
	}
	rule.Measurement = strings.TrimSpace(sel[:open])
	if strings.ContainsAny(rule.Measurement, "\n\r") {
		return bad("bad measurement %q", rule.Measurement)
	}
	body := sel[open+1:]
	if !strings.HasSuffix(strings.TrimSpace(body), "}") {
		return bad("no closing }")
	}
	body = strings.TrimSpace(body)
	body = body[:len(body)-1]
	ms, err := splitMatchers(body)
	if err != nil {
		return bad("%v", err)
	}
	for _, m := range ms {
		mt, err := parseMatcher(trimMatcher(m))
		if err != nil {
			return bad("%v", err)
		}
		if mt.Key == "" || strings.ContainsAny(mt.Key, " {}\"") {
			return bad("bad tag key %q", mt.Key)
		}
		rule.Matchers = append(rule.Matchers, mt)
	}
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
