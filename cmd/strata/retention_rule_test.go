package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

func TestParseRetentionRule(t *testing.T) {
	day := 24 * time.Hour
	good := []struct {
		in   string
		want engine.RetentionRule
	}{
		{`cpu=7d`, engine.RetentionRule{Measurement: "cpu", Keep: 7 * day}},
		{`cpu{}=1w`, engine.RetentionRule{Measurement: "cpu", Keep: 7 * day}},
		{`{host="a"}=7d`, engine.RetentionRule{Matchers: []engine.Matcher{{Key: "host", Op: engine.MatchEqual, Value: "a"}}, Keep: 7 * day}},
		{`{}=1y`, engine.RetentionRule{Keep: 365 * day}},
		{`audit=0`, engine.RetentionRule{Measurement: "audit"}},
		{`cpu{host="a",dc!="eu"}=36h`, engine.RetentionRule{Measurement: "cpu", Keep: 36 * time.Hour, Matchers: []engine.Matcher{
			{Key: "host", Op: engine.MatchEqual, Value: "a"}, {Key: "dc", Op: engine.MatchNotEqual, Value: "eu"}}}},
		{`cpu{ host =~ "edge-.*" , rack!~"r[12]", }=90m`, engine.RetentionRule{Measurement: "cpu", Keep: 90 * time.Minute, Matchers: []engine.Matcher{
			{Key: "host", Op: engine.MatchRegexp, Value: "edge-.*"}, {Key: "rack", Op: engine.MatchNotRegexp, Value: "r[12]"}}}},
		{`m{v="a,b=c\"}"}=1d`, engine.RetentionRule{Measurement: "m", Keep: day, Matchers: []engine.Matcher{
			{Key: "v", Op: engine.MatchEqual, Value: `a,b=c"}`}}}},
		{`disk.io{dev=sda}=2d`, engine.RetentionRule{Measurement: "disk.io", Keep: 2 * day, Matchers: []engine.Matcher{
			{Key: "dev", Op: engine.MatchEqual, Value: "sda"}}}},
	}
	for _, c := range good {
		got, err := parseRetentionRule(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.in, got, c.want)
		}
	}
	for _, in := range []string{
		``, `cpu`, `cpu=`, `=7d`, `cpu=-1h`, `cpu=7x`, `cpu{host="a"}`, `cpu{host="a"=7d`, `cpu{host="a}=7d`,
		`cpu{host=~"("}=7d`, `cpu{="a"}=7d`, `cpu{host}=7d`, `cpu{host="a",,dc="b"}=7d`, `cpu{a="x=1"}`,
		`cpu{host="a"}x=7d`, `cpu{{a="b"}}=1d`,
	} {
		if r, err := parseRetentionRule(in); err == nil {
			t.Errorf("%q parsed as %+v, want an error", in, r)
		}
	}
}

// TestServeRetentionRuleFlag: the flag is repeatable, keeps its order, and
// a bad one stops serve with exit status 2 before it opens anything.
func TestServeRetentionRuleFlag(t *testing.T) {
	var rules retentionRuleFlags
	for _, s := range []string{`cpu{host="a"}=1d`, `cpu=7d`} {
		if err := rules.Set(s); err != nil {
			t.Fatal(err)
		}
	}
	if len(rules) != 2 || len(rules[0].Matchers) != 1 || rules[1].Keep != 7*24*time.Hour {
		t.Fatalf("rules %+v", rules)
	}
	var errOut strings.Builder
	dir := t.TempDir() + "/db"
	if got := serveMain(t.Context(), []string{"--db", dir, "--retention-rule", `cpu{host=~"("}=1d`}, &errOut); got != 2 ||
		!strings.Contains(errOut.String(), "retention rule") {
		t.Fatalf("bad rule: exit %d, stderr:\n%s", got, errOut.String())
	}
}

func FuzzParseRetentionRule(f *testing.F) {
	for _, s := range []string{`cpu=7d`, `{host="a"}=7d`, `cpu{host=~"edge-.*",dc!="eu",}=1w`, `m{v="a,b=c\"}"}=1d`, `{}=0`, `cpu{`, `=`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseRetentionRule(s)
		if err != nil {
			return
		}
		if r.Keep < 0 {
			t.Fatalf("%q: negative keep %v", s, r.Keep)
		}
		if err := validateRules([]engine.RetentionRule{r}); err != nil {
			t.Fatalf("%q parsed into a rule the engine refuses: %v", s, err)
		}
	})
}
