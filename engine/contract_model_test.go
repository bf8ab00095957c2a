package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

// A seeded random workload of series, overwrites, deletes with matchers,
// retention and series limits, run against the engine's reference model
// (engine.RefModel, declared in refmodel_test.go and shared with the
// internal model tests), to which raw queries, Last and every metadata
// call are compared in every state (memtable, segments, compacted,
// reopened, read-only).

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

// cmLimits are the series limits a workload runs under (0 = none).
type cmLimits struct{ series, perMeasurement int }

// cmWorkload builds random steps and the reference model they lead to,
// with a clock at now and a retention (0 = none). A write that would
// create a series past a limit is refused whole.
func cmWorkload(seed uint64, now, retention int64, lim cmLimits) ([]cStep, *engine.RefModel) {
	r := rand.New(rand.NewPCG(seed, 7))
	m := engine.NewRefModel()
	m.Now, m.Retention = now, retention
	m.MaxSeries, m.MaxSeriesPerMeasurement = lim.series, lim.perMeasurement
	var steps []cStep
	var pool [][]engine.Tag
	for range 12 {
		pool = append(pool, cmTags(r))
	}
	for range 8 {
		if r.IntN(4) == 0 {
			sel := cmSelector(r, true)
			steps = append(steps, cDelete(sel))
			m.Delete(sel)
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
		switch err := m.Write(pts); {
		case errors.Is(err, engine.ErrSeriesLimit):
			steps = append(steps, cWriteRefused(pts...))
		case err != nil:
			panic(fmt.Sprintf("workload %d: %v", seed, err)) // kinds are fixed per series
		default:
			steps = append(steps, cWrite(pts...))
		}
	}
	return steps, m
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
		var now, retention int64
		opts := cOpts(0)
		if seed%2 == 1 {
			now, retention = 1000, 1020 // now - retention = -20
			opts = cOpts(now)
			opts.Retention = time.Duration(retention)
		}
		var lim cmLimits
		if seed >= 3 {
			lim = cmLimits{series: 40 + int(seed), perMeasurement: 12}
			opts.MaxSeries, opts.MaxSeriesPerMeasurement = lim.series, lim.perMeasurement
		}
		steps, model := cmWorkload(seed, now, retention, lim)
		if seed >= 5 {
			opts.Now = cOpts(1000).Now
			model.Now = 1000
			model.Rules = cmRules(rand.New(rand.NewPCG(seed, 5)))
			opts.RetentionRules = model.Rules
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
				if want := model.Measurements(); !slices.Equal(ms, want) {
					t.Errorf("Measurements = %q, want %q", ms, want)
				}
				for range 30 {
					sel := cmSelector(r, false)
					if sel.Measurement != "" {
						got := cFmt(cQuery(t, db, engine.Query{Selector: sel}))
						if want := cFmt(model.Query(engine.Query{Selector: sel})); got != want {
							t.Errorf("Query %+v:\ngot:\n%swant:\n%s", sel, got, want)
						}
					}
					got := cFmt(cLast(t, db, sel))
					if want := cFmt(model.Last(sel)); got != want {
						t.Errorf("Last %+v:\ngot:\n%swant:\n%s", sel, got, want)
					}
					info, err := db.SeriesInfo(ctx, sel)
					if err != nil {
						t.Fatal(err)
					}
					if got, want := cInfoFmt(info), cInfoFmt(model.SeriesInfo(sel)); got != want {
						t.Errorf("SeriesInfo %+v:\ngot:\n%swant:\n%s", sel, got, want)
					}
					keys, err := db.TagKeys(ctx, sel)
					if err != nil {
						t.Fatal(err)
					}
					if want := model.TagKeys(sel); !slices.Equal(keys, want) {
						t.Errorf("TagKeys %+v = %q, want %q", sel, keys, want)
					}
					for _, k := range []string{"a", "a b", "aZ", "nope"} {
						vals, err := db.TagValues(ctx, k, sel)
						if err != nil {
							t.Fatal(err)
						}
						if want := model.TagValues(k, sel); !slices.Equal(vals, want) {
							t.Errorf("TagValues %q %+v = %q, want %q", k, sel, vals, want)
						}
					}
				}
			})
		})
	}
}

// cInfoFmt renders SeriesInfo results one line per series.
func cInfoFmt(info []engine.SeriesInfo) string {
	var b strings.Builder
	for _, si := range info {
		fmt.Fprintf(&b, "%s %s\n", cKey(si.Measurement, si.Tags, si.Field), si.Kind)
	}
	return b.String()
}
