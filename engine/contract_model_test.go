package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

// A seeded random model of series, overwrites, deletes with matchers and
// retention, against which raw queries, Last and every metadata call are
// compared in every state (memtable, segments, compacted, reopened,
// read-only).

type cmSeries struct {
	m     string
	tags  []engine.Tag // sorted
	field string
	kind  engine.Kind
	s     map[int64]engine.Value
}

type cModel struct {
	series map[string]*cmSeries
	cutoff int64 // samples before it are expired, in series no rule matches
	rules  []engine.RetentionRule
	now    int64
}

// cutoffOf returns the oldest visible time of s: its first matching
// rule's (none for Keep 0), or the retention cutoff.
func (m *cModel) cutoffOf(s *cmSeries) int64 {
	for _, r := range m.rules {
		if (r.Measurement == "" || r.Measurement == s.m) && m.matches(s, engine.Selector{Matchers: r.Matchers}) {
			if r.Keep == 0 {
				return -1 << 63
			}
			return m.now - int64(r.Keep)
		}
	}
	return m.cutoff
}

// cmRules returns 1 to 3 random retention rules whose cutoffs (at now
// 1000) fall inside the data, or keep everything.
func cmRules(r *rand.Rand) []engine.RetentionRule {
	var rules []engine.RetentionRule
	for range 1 + r.IntN(3) {
		rule := engine.RetentionRule{Matchers: cmMatchers(r)}
		if r.IntN(3) > 0 {
			rule.Measurement = cmMeas[r.IntN(len(cmMeas))]
		}
		if r.IntN(5) > 0 {
			rule.Keep = time.Duration(1000 - 60 + r.IntN(120)) // cutoff in [-60, 60)
		}
		rules = append(rules, rule)
	}
	return rules
}

var (
	cmTagKeys   = []string{"a", "b", "c", "a b", "aZ"}
	cmTagValues = []string{"x", "y", "xy", "dev-1", "dev-10", "xdev-1", "b=", "bZ", "p q"}
	cmFields    = map[string]engine.Kind{"f": engine.KindFloat, "g": engine.KindInt, "u": engine.KindUint, "t": engine.KindBool, "s": engine.KindString}
	cmFieldKeys = []string{"f", "g", "u", "t", "s"}
	cmSelFields = []string{"f", "g", "u", "t", "s", "x"}
	cmMeas      = []string{"m", "m b", "mZ", "n", "m,x"}
	cmRegexps   = []string{".*", ".+", "x.*", "dev-1.*", "x|y", "", "xy?", "d.*", "dev-1", "b.", "[a-z]", "p q|bZ", "(?i)XY", "x?", "|x", "(?s).*", "[^x].*", "dev-1|x.*", `\Qdev-1\E0?`, "x*y*", "(?i)DEV-1.*", "xd?ev-1", "(x)(y)", "^x$", "b\\="}
)

func cmValue(r *rand.Rand, k engine.Kind) engine.Value {
	switch k {
	case engine.KindFloat:
		// Quarters, short decimals (inexact in binary) and now and then a
		// huge value that cancels: sums whose float64 result depends on
		// the order of addition unless they are exact.
		switch r.IntN(8) {
		case 0:
			return engine.Float(float64(r.IntN(200)-100) * 0x1p50)
		case 1, 2, 3:
			return engine.Float(float64(r.IntN(20000)-10000) / 100)
		}
		return engine.Float(float64(r.IntN(200)-100) / 4)
	case engine.KindInt:
		return engine.Int(int64(r.IntN(200) - 100))
	case engine.KindUint:
		return engine.Uint(uint64(r.IntN(200)))
	case engine.KindBool:
		return engine.Bool(r.IntN(2) == 0)
	default:
		return engine.String(fmt.Sprintf("v%d", r.IntN(50)))
	}
}

func cmTags(r *rand.Rand) []engine.Tag {
	var tags []engine.Tag
	for _, k := range cmTagKeys {
		if r.IntN(3) > 0 {
			tags = append(tags, engine.Tag{Key: k, Value: cmTagValues[r.IntN(len(cmTagValues))]})
		}
	}
	return tags
}

func cmMatchers(r *rand.Rand) []engine.Matcher {
	var ms []engine.Matcher
	for range r.IntN(3) {
		m := engine.Matcher{Key: cmTagKeys[r.IntN(len(cmTagKeys))], Op: engine.MatchOp(r.IntN(4))}
		if m.Op == engine.MatchRegexp || m.Op == engine.MatchNotRegexp {
			m.Value = cmRegexps[r.IntN(len(cmRegexps))]
		} else if r.IntN(4) == 0 {
			m.Value = ""
		} else {
			m.Value = cmTagValues[r.IntN(len(cmTagValues))]
		}
		ms = append(ms, m)
	}
	return ms
}

func cmSelector(r *rand.Rand, needMeas bool) engine.Selector {
	var s engine.Selector
	if needMeas || r.IntN(3) > 0 {
		s.Measurement = cmMeas[r.IntN(len(cmMeas))]
	}
	if r.IntN(3) == 0 {
		s.Field = cmSelFields[r.IntN(len(cmSelFields))]
	}
	if r.IntN(4) == 0 {
		k := cmTagKeys[r.IntN(len(cmTagKeys))]
		s.Tags = []engine.Tag{{Key: k, Value: cmTagValues[r.IntN(len(cmTagValues))]}}
	}
	s.Matchers = cmMatchers(r)
	if r.IntN(2) == 0 {
		s.Start = int64(r.IntN(120) - 60)
		s.End = s.Start + 1 + int64(r.IntN(60))
	}
	return s
}

func cmTagValue(tags []engine.Tag, k string) string {
	for _, t := range tags {
		if t.Key == k {
			return t.Value
		}
	}
	return ""
}

func (m *cModel) matches(s *cmSeries, sel engine.Selector) bool {
	if sel.Measurement != "" && s.m != sel.Measurement {
		return false
	}
	if sel.Field != "" && s.field != sel.Field {
		return false
	}
	for _, t := range sel.Tags {
		if cmTagValue(s.tags, t.Key) != t.Value || !slices.ContainsFunc(s.tags, func(x engine.Tag) bool { return x.Key == t.Key }) {
			return false
		}
	}
	for _, mt := range sel.Matchers {
		v := cmTagValue(s.tags, mt.Key)
		var ok bool
		switch mt.Op {
		case engine.MatchEqual:
			ok = v == mt.Value
		case engine.MatchNotEqual:
			ok = v != mt.Value
		case engine.MatchRegexp:
			ok = regexp.MustCompile("^(?:" + mt.Value + ")$").MatchString(v)
		case engine.MatchNotRegexp:
			ok = !regexp.MustCompile("^(?:" + mt.Value + ")$").MatchString(v)
		}
		if !ok {
			return false
		}
	}
	return true
}

func cmCovers(sel engine.Selector, t int64) bool {
	if sel.Start == 0 && sel.End == 0 {
		return true
	}
	return t >= sel.Start && t < sel.End
}

// visible returns the series' samples visible in sel's range, sorted.
func (m *cModel) visible(s *cmSeries, sel engine.Selector) []engine.Sample {
	var out []engine.Sample
	cut := m.cutoffOf(s)
	for t, v := range s.s {
		if t >= cut && cmCovers(sel, t) {
			out = append(out, engine.Sample{Time: t, Value: v})
		}
	}
	slices.SortFunc(out, func(a, b engine.Sample) int { return cmpInt(a.Time, b.Time) })
	return out
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (m *cModel) sortedKeys() []string {
	keys := make([]string, 0, len(m.series))
	for k := range m.series {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (m *cModel) query(sel engine.Selector, last bool) []engine.Series {
	var out []engine.Series
	for _, k := range m.sortedKeys() {
		s := m.series[k]
		if !m.matches(s, sel) {
			continue
		}
		v := m.visible(s, sel)
		if len(v) == 0 {
			continue
		}
		if last {
			v = v[len(v)-1:]
		}
		out = append(out, engine.Series{Measurement: s.m, Tags: s.tags, Field: s.field, Samples: v})
	}
	return out
}

func (m *cModel) seriesInfo(sel engine.Selector) string {
	var b strings.Builder
	for _, s := range m.query(sel, true) {
		fmt.Fprintf(&b, "%s %s\n", cKey(s.Measurement, s.Tags, s.Field), m.series[cKey(s.Measurement, s.Tags, s.Field)].kind)
	}
	return b.String()
}

func (m *cModel) tagKeys(sel engine.Selector) []string {
	set := map[string]bool{}
	for _, s := range m.query(sel, true) {
		for _, t := range s.Tags {
			set[t.Key] = true
		}
	}
	return cmSet(set)
}

func (m *cModel) tagValues(key string, sel engine.Selector) []string {
	set := map[string]bool{}
	for _, s := range m.query(sel, true) {
		if v := cmTagValue(s.Tags, key); v != "" {
			set[v] = true
		}
	}
	return cmSet(set)
}

func (m *cModel) measurements() []string {
	set := map[string]bool{}
	for _, s := range m.query(engine.Selector{}, true) {
		set[s.Measurement] = true
	}
	return cmSet(set)
}

func cmSet(set map[string]bool) []string {
	out := []string{}
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// cmLimits are the series limits a workload runs under (0 = none).
type cmLimits struct{ series, perMeasurement int }

// cmWorkload builds random steps and the model they lead to. A write that
// would create a series past a limit is refused whole.
func cmWorkload(seed uint64, cutoff int64, lim cmLimits) ([]cStep, *cModel) {
	r := rand.New(rand.NewPCG(seed, 7))
	m := &cModel{series: map[string]*cmSeries{}, cutoff: cutoff}
	var steps []cStep
	var pool [][]engine.Tag
	for range 12 {
		pool = append(pool, cmTags(r))
	}
	for range 8 {
		if r.IntN(4) == 0 {
			sel := cmSelector(r, true)
			steps = append(steps, cDelete(sel))
			for _, s := range m.series {
				if m.matches(s, sel) {
					for t := range s.s {
						if cmCovers(sel, t) {
							delete(s.s, t)
						}
					}
				}
			}
			continue
		}
		var pts []engine.Point
		for range 1 + r.IntN(25) {
			p := engine.Point{
				Measurement: cmMeas[r.IntN(len(cmMeas))],
				Tags:        pool[r.IntN(len(pool))],
				Time:        int64(r.IntN(100) - 50),
			}
			p.Tags = pool[r.IntN(len(pool))]
			for _, f := range cmFieldKeys {
				if r.IntN(3) == 0 {
					p.Fields = append(p.Fields, engine.Field{Key: f, Value: cmValue(r, cmFields[f])})
				}
			}
			if r.IntN(2) == 0 {
				// Field x's kind depends on the series: numeric kinds mix
				// across the series of one field.
				h := 0
				for _, c := range []byte(cKey(p.Measurement, p.Tags, "x")) {
					h += int(c)
				}
				k := []engine.Kind{engine.KindFloat, engine.KindInt, engine.KindUint}[h%3]
				p.Fields = append(p.Fields, engine.Field{Key: "x", Value: cmValue(r, k)})
			}
			if len(p.Fields) == 0 {
				p.Fields = []engine.Field{{Key: "f", Value: cmValue(r, engine.KindFloat)}}
			}
			pts = append(pts, p)
		}
		if m.overLimit(pts, lim) {
			steps = append(steps, cWriteRefused(pts...))
			continue
		}
		for _, p := range pts {
			tags := slices.Clone(p.Tags)
			slices.SortFunc(tags, func(a, b engine.Tag) int { return strings.Compare(a.Key, b.Key) })
			for _, f := range p.Fields {
				k := cKey(p.Measurement, tags, f.Key)
				s := m.series[k]
				if s == nil {
					s = &cmSeries{m: p.Measurement, tags: tags, field: f.Key, kind: f.Value.Kind(), s: map[int64]engine.Value{}}
					m.series[k] = s
				}
				s.s[p.Time] = f.Value
			}
		}
		steps = append(steps, cWrite(pts...))
	}
	return steps, m
}

// overLimit reports whether pts would create a series past lim. Series
// are never forgotten, even when their samples are deleted.
func (m *cModel) overLimit(pts []engine.Point, lim cmLimits) bool {
	total := len(m.series)
	perMeas := map[string]int{}
	for _, s := range m.series {
		perMeas[s.m]++
	}
	seen := map[string]bool{}
	for _, p := range pts {
		for _, f := range p.Fields {
			k := cKey(p.Measurement, p.Tags, f.Key)
			if m.series[k] != nil || seen[k] {
				continue
			}
			seen[k] = true
			total++
			perMeas[p.Measurement]++
			if lim.series > 0 && total > lim.series || lim.perMeasurement > 0 && perMeas[p.Measurement] > lim.perMeasurement {
				return true
			}
		}
	}
	return false
}

// cWriteRefused is a write that must fail whole for a series limit.
func cWriteRefused(pts ...engine.Point) cStep {
	return func(t *testing.T, db *engine.DB) {
		t.Helper()
		if err := db.Write(pts); !errors.Is(err, engine.ErrSeriesLimit) {
			t.Fatalf("write past a series limit: err = %v, want ErrSeriesLimit", err)
		}
	}
}

func TestContractModelSelectors(t *testing.T) {
	for seed := range uint64(9) {
		// Odd seeds run with a retention whose cutoff lies inside the data;
		// seeds from 3 on under series limits that refuse some writes;
		// seeds from 5 on with random retention rules.
		cutoff := int64(-1 << 62)
		opts := cOpts(0)
		if seed%2 == 1 {
			cutoff = -20
			opts = cOpts(1000)
			opts.Retention = 1020 // now - retention = -20
		}
		var lim cmLimits
		if seed >= 3 {
			lim = cmLimits{series: 40 + int(seed), perMeasurement: 12}
			opts.MaxSeries, opts.MaxSeriesPerMeasurement = lim.series, lim.perMeasurement
		}
		steps, model := cmWorkload(seed, cutoff, lim)
		if seed >= 5 {
			opts.Now = cOpts(1000).Now
			model.now = 1000
			model.rules = cmRules(rand.New(rand.NewPCG(seed, 5)))
			opts.RetentionRules = model.rules
		}
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			inStates(t, opts, steps, func(t *testing.T, db *engine.DB) {
				ctx := context.Background()
				r := rand.New(rand.NewPCG(seed, 99))
				ms, err := db.Measurements(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if want := model.measurements(); !slices.Equal(ms, want) {
					t.Errorf("Measurements = %q, want %q", ms, want)
				}
				for range 30 {
					sel := cmSelector(r, false)
					if sel.Measurement != "" {
						got := cFmt(cQuery(t, db, engine.Query{Selector: sel}))
						if want := cFmt(model.query(sel, false)); got != want {
							t.Errorf("Query %+v:\ngot:\n%swant:\n%s", sel, got, want)
						}
					}
					got := cFmt(cLast(t, db, sel))
					if want := cFmt(model.query(sel, true)); got != want {
						t.Errorf("Last %+v:\ngot:\n%swant:\n%s", sel, got, want)
					}
					info, err := db.SeriesInfo(ctx, sel)
					if err != nil {
						t.Fatal(err)
					}
					var b strings.Builder
					for _, si := range info {
						fmt.Fprintf(&b, "%s %s\n", cKey(si.Measurement, si.Tags, si.Field), si.Kind)
					}
					if want := model.seriesInfo(sel); b.String() != want {
						t.Errorf("SeriesInfo %+v:\ngot:\n%swant:\n%s", sel, b.String(), want)
					}
					keys, err := db.TagKeys(ctx, sel)
					if err != nil {
						t.Fatal(err)
					}
					if want := model.tagKeys(sel); !slices.Equal(keys, want) {
						t.Errorf("TagKeys %+v = %q, want %q", sel, keys, want)
					}
					for _, k := range []string{"a", "a b", "aZ", "nope"} {
						vals, err := db.TagValues(ctx, k, sel)
						if err != nil {
							t.Fatal(err)
						}
						if want := model.tagValues(k, sel); !slices.Equal(vals, want) {
							t.Errorf("TagValues %q %+v = %q, want %q", k, sel, vals, want)
						}
					}
				}
			})
		})
	}
}
