package main

import (
	"fmt"
	"strings"

	"github.com/stratadb/strata/engine"
)

// rollupRuleFlags collects repeated --rollup flags. Every rule that
// matches a series applies to it, as a cascade.
type rollupRuleFlags []engine.RollupRule

func (r *rollupRuleFlags) String() string { return fmt.Sprint(len(*r), " rules") }

func (r *rollupRuleFlags) Set(s string) error {
	rule, err := parseRollupRule(s)
	if err != nil {
		return err
	}
	// The cascade with the rules given so far, as the engine checks it.
	o := engine.Options{Rollups: append(append([]engine.RollupRule(nil), *r...), rule)}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return fmt.Errorf("rollup %q: %w", s, err)
	}
	*r = append(*r, rule)
	return nil
}

// parseRollupRule reads MEASUREMENT{matchers}:EVERY@AFTER: the selector
// as --retention-rule takes it (the measurement may be empty, the braces
// left out), then the bucket width and the age after which samples are
// rolled up, as durations (1m, 1h, 7d, 1w).
func parseRollupRule(s string) (engine.RollupRule, error) {
	bad := func(format string, a ...any) (engine.RollupRule, error) {
		return engine.RollupRule{}, fmt.Errorf("rollup %q: "+format+
			" (want MEASUREMENT{k=\"v\",...}:EVERY@AFTER, e.g. 'cpu{host=\"a\"}:1m@7d')", append([]any{s}, a...)...)
	}
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return bad("no @AFTER")
	}
	head, afterText := s[:at], strings.TrimSpace(s[at+1:])
	colon := strings.LastIndexByte(head, ':')
	if colon < 0 || colon < strings.LastIndexByte(head, '}') {
		return bad("no :EVERY")
	}
	sel, everyText := head[:colon], strings.TrimSpace(head[colon+1:])
	every, err := parseDuration(everyText)
	if err != nil || every <= 0 {
		return bad("EVERY %q: want a positive duration", everyText)
	}
	after, err := parseDuration(afterText)
	if err != nil || after <= 0 {
		return bad("AFTER %q: want a positive duration", afterText)
	}
	rule := engine.RollupRule{Every: every, After: after}
	open := strings.IndexByte(sel, '{')
	if open < 0 {
		rule.Measurement = strings.TrimSpace(sel)
		if rule.Measurement == "" {
			return bad("no measurement and no matchers: write '{}:EVERY@AFTER' for every series")
		}
		if strings.ContainsAny(rule.Measurement, "}\"\n\r") {
			return bad("bad measurement %q", rule.Measurement)
		}
	} else {
		rule.Measurement = strings.TrimSpace(sel[:open])
		if strings.ContainsAny(rule.Measurement, "\"\n\r") {
			return bad("bad measurement %q", rule.Measurement)
		}
		body := strings.TrimSpace(sel[open+1:])
		if !strings.HasSuffix(body, "}") {
			return bad("no closing }")
		}
		ms, err := splitMatchers(body[:len(body)-1])
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
	}
	o := engine.Options{Rollups: []engine.RollupRule{rule}}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return bad("%v", err)
	}
	return rule, nil
}
