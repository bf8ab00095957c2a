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
	m, ms, err := parseRuleSelector(sel, "}\"\n\r", "'{}:EVERY@AFTER'")
	if err != nil {
		return bad("%v", err)
	}
	rule.Measurement, rule.Matchers = m, ms
	o := engine.Options{Rollups: []engine.RollupRule{rule}}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return bad("%v", err)
	}
	return rule, nil
}
