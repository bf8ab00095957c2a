package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

func TestParseRollupRule(t *testing.T) {
	day := 24 * time.Hour
	good := []struct {
		in   string
		want engine.RollupRule
	}{
		{`cpu:1m@7d`, engine.RollupRule{Measurement: "cpu", Every: time.Minute, After: 7 * day}},
		{`cpu{}:1h@90d`, engine.RollupRule{Measurement: "cpu", Every: time.Hour, After: 90 * day}},
		{`{site="north"}:5m@30d`, engine.RollupRule{Matchers: []engine.Matcher{{Key: "site", Op: engine.MatchEqual, Value: "north"}}, Every: 5 * time.Minute, After: 30 * day}},
		{`cpu{host=~"edge-.*", dc!="eu"} : 10s @ 1w`, engine.RollupRule{Measurement: "cpu", Every: 10 * time.Second, After: 7 * day, Matchers: []engine.Matcher{
			{Key: "host", Op: engine.MatchRegexp, Value: "edge-.*"}, {Key: "dc", Op: engine.MatchNotEqual, Value: "eu"}}}},
		{`m{v="a:b@c"}:1m@1d`, engine.RollupRule{Measurement: "m", Every: time.Minute, After: day, Matchers: []engine.Matcher{
			{Key: "v", Op: engine.MatchEqual, Value: "a:b@c"}}}},
	}
	for _, c := range good {
		got, err := parseRollupRule(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.in, got, c.want)
		}
	}
	for _, in := range []string{
		``, `cpu`, `cpu:1m`, `cpu@7d`, `:1m@7d`, `cpu:0@7d`, `cpu:1m@0`, `cpu:-1m@7d`, `cpu:1x@7d`, `cpu{host="a"@7d`,
		`cpu{host=~"("}:1m@7d`, `cpu{="a"}:1m@7d`, `cpu{host="a"}@7d:1m`, `cpu{a="x"}:1m@`,
	} {
		if r, err := parseRollupRule(in); err == nil {
			t.Errorf("%q parsed as %+v, want an error", in, r)
		}
	}
}

// TestServeRollupFlag: the flag is repeatable and checks the cascade; a
// bad one stops serve with exit status 2 before it opens anything.
func TestServeRollupFlag(t *testing.T) {
	var rules rollupRuleFlags
	for _, s := range []string{`cpu:1m@7d`, `cpu:1h@90d`} {
		if err := rules.Set(s); err != nil {
			t.Fatal(err)
		}
	}
	if len(rules) != 2 || rules[1].Every != time.Hour {
		t.Fatalf("rules %+v", rules)
	}
	if err := rules.Set(`cpu:90s@100d`); err == nil || !strings.Contains(err.Error(), "multiple") {
		t.Fatalf("a broken cascade: %v", err)
	}
	for _, arg := range []string{`cpu:1m@7d`, `cpu{host=~"("}:1m@7d`} {
		var errOut strings.Builder
		dir := t.TempDir() + "/db"
		args := []string{"--db", dir, "--rollup", `cpu:1h@1d`, "--rollup", arg}
		if got := serveMain(t.Context(), args, &errOut); got != 2 || !strings.Contains(errOut.String(), "rollup") {
			t.Fatalf("%s: exit %d, stderr:\n%s", arg, got, errOut.String())
		}
	}
}

func FuzzParseRollupRule(f *testing.F) {
	for _, s := range []string{`cpu:1m@7d`, `{host="a"}:1h@90d`, `cpu{host=~"edge-.*",dc!="eu",}:10s@1w`, `m{v="a:b@c"}:1m@1d`, `cpu{`, `:@`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseRollupRule(s)
		if err != nil {
			return
		}
		o := engine.Options{Rollups: []engine.RollupRule{r}}
		o.EnsureDefaults()
		if err := o.Validate(); err != nil || r.Every <= 0 || r.After <= 0 {
			t.Fatalf("%q parsed into a rule the engine refuses: %v", s, err)
		}
	})
}
