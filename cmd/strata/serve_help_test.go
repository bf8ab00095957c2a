package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/units"

	"github.com/stratadb/strata/engine"
)

// lifecycleFlags are serve's flags for keeping data over years on a fixed
// disk: retention, per-series retention, downsampling, the disk budget and
// the series limits.
var lifecycleFlags = []string{"retention", "retention-rule", "rollup", "max-disk", "max-series", "max-series-per-measurement"}

// TestServeHelpLifecycleFlags checks that serve --help documents every
// lifecycle flag with an example of its own ("e.g. --flag VALUE" in its
// help, or a line of the examples), and that every example the help gives
// of them is accepted: each value parses, and the rules of one line
// together are a valid configuration (cascades included).
func TestServeHelpLifecycleFlags(t *testing.T) {
	var out bytes.Buffer
	if code := serveMain(context.Background(), []string{"--help"}, &out); code != 0 {
		t.Fatalf("serve --help: exit %d", code)
	}
	help := out.String()
	// The flag package's listing: "  -name type" then indented help lines.
	sections := map[string]string{}
	var cur string
	for _, line := range strings.Split(help, "\n") {
		if strings.HasPrefix(line, "  -") {
			cur = strings.Fields(line)[0][1:]
			continue
		}
		if cur != "" && strings.HasPrefix(line, "    \t") {
			sections[cur] += line + "\n"
		} else {
			cur = ""
		}
	}
	exampleArg := regexp.MustCompile(`--(retention-rule|retention|rollup|max-disk|max-series-per-measurement|max-series)[ =]('[^']*'|[^ '\n]+)`)
	seen := map[string]int{}
	for _, line := range strings.Split(help, "\n") {
		var rules []engine.RetentionRule
		var rollups []engine.RollupRule
		for _, m := range exampleArg.FindAllStringSubmatch(line, -1) {
			name, val := m[1], strings.Trim(m[2], "'")
			seen[name]++
			var err error
			switch name {
			case "retention":
				_, err = time.ParseDuration(val)
			case "retention-rule":
				var r engine.RetentionRule
				if r, err = parseRetentionRule(val); err == nil {
					rules = append(rules, r)
				}
			case "rollup":
				var r engine.RollupRule
				if r, err = parseRollupRule(val); err == nil {
					rollups = append(rollups, r)
				}
			case "max-disk":
				var b units.Base2Bytes
				if b, err = units.ParseBase2Bytes(val); err == nil && b <= 0 {
					t.Errorf("--max-disk example %q is not positive", val)
				}
			default:
				_, err = strconv.Atoi(val)
			}
			if err != nil {
				t.Errorf("the help's example --%s %s does not parse: %v", name, m[2], err)
			}
		}
		if len(rules)+len(rollups) == 0 {
			continue
		}
		o := engine.DefaultOptions()
		o.RetentionRules, o.Rollups = rules, rollups
		if err := o.Validate(); err != nil {
			t.Errorf("the rules of the help's line %q are refused together: %v", strings.TrimSpace(line), err)
		}
	}
	for _, name := range lifecycleFlags {
		sec, ok := sections[name]
		if !ok {
			t.Errorf("serve --help does not list --%s:\n%s", name, help)
			continue
		}
		if !strings.Contains(sec, "e.g. --"+name+" ") && !strings.Contains(help, "\n  strata serve --db ./data --"+name+" ") {
			t.Errorf("serve --help gives no example of --%s:\n%s", name, sec)
		}
		if seen[name] == 0 {
			t.Errorf("serve --help has no example value of --%s", name)
		}
	}
	// A cascade as the rollup help shows it, in one rule list.
	if !strings.Contains(sections["rollup"], "cascade") {
		t.Errorf("--rollup's help does not say that rules cascade:\n%s", sections["rollup"])
	}
}
