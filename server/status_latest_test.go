package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/stratadb/strata/engine"
)

// TestStatusLatestModel checks the status endpoint's latest values against
// a model of what was written: several measurements, every kind (strings
// left out), tag keys the query API renames, samples in any order, a
// delete, overlapping selectors (each series once) and the limit (the
// first series by label set).
func TestStatusLatestModel(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			testStatusLatestModel(t, seed)
		})
	}
}

func testStatusLatestModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	ts := newTestServer(t, nil)
	type sample struct {
		t int64
		v engine.Value
	}
	type series struct {
		m, f   string
		tags   []engine.Tag
		kind   engine.Kind
		newest sample
		has    bool
	}
	model := map[string]*series{}
	kinds := []engine.Kind{engine.KindFloat, engine.KindInt, engine.KindUint, engine.KindBool, engine.KindString}
	valueOf := func(k engine.Kind) engine.Value {
		switch k {
		case engine.KindInt:
			return engine.Int(rng.Int64N(2000) - 1000)
		case engine.KindUint:
			return engine.Uint(rng.Uint64N(1 << 60))
		case engine.KindBool:
			return engine.Bool(rng.IntN(2) == 0)
		case engine.KindString:
			return engine.String("s" + strconv.Itoa(rng.IntN(9)))
		}
		return engine.Float(rng.NormFloat64() * 1e3)
	}
	fieldKinds := map[string]engine.Kind{}
	for round := range 6 {
		var pts []engine.Point
		for range 200 {
			m := "m" + strconv.Itoa(rng.IntN(3))
			f := "f" + strconv.Itoa(rng.IntN(3))
			fk := m + " " + f
			k, ok := fieldKinds[fk]
			if !ok {
				k = kinds[rng.IntN(len(kinds))]
				fieldKinds[fk] = k
			}
			tags := []engine.Tag{{Key: "host", Value: "h" + strconv.Itoa(rng.IntN(12))}}
			if rng.IntN(3) == 0 {
				tags = append(tags, engine.Tag{Key: "rack-id", Value: "r" + strconv.Itoa(rng.IntN(2))})
			}
			p := engine.Point{Measurement: m, Tags: tags, Time: int64(round*1000+rng.IntN(5000)) * 1e6,
				Fields: []engine.Field{{Key: f, Value: valueOf(k)}}}
			pts = append(pts, p)
		}
		if err := ts.db.Write(pts); err != nil {
			t.Fatal(err)
		}
		for _, p := range pts {
			key := engine.SeriesKey(p.Measurement, sortedTags(p.Tags), p.Fields[0].Key)
			s := model[key]
			if s == nil {
				s = &series{m: p.Measurement, f: p.Fields[0].Key, tags: sortedTags(p.Tags), kind: p.Fields[0].Value.Kind()}
				model[key] = s
			}
			// Last write wins at one time; the newest time is the latest.
			if !s.has || p.Time >= s.newest.t {
				s.newest, s.has = sample{p.Time, p.Fields[0].Value}, true
			}
		}
		if round == 2 {
			if err := ts.db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Delete one host's series everywhere in m0.
	if err := ts.db.Delete(context.Background(), engine.Selector{Measurement: "m0", Tags: []engine.Tag{{Key: "host", Value: "h3"}}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range model {
		if s.m == "m0" && slices.Contains(s.tags, engine.Tag{Key: "host", Value: "h3"}) {
			s.has = false
		}
	}

	selectors := []string{`{__name__=~"m0_.+|m1_f1"}`, `{__name__=~"m1_.+", rack_id="r1"}`, `{host=~"h1.*"}`}
	for _, limit := range []int{1000, 7} {
		var sets [][]*labels.Matcher
		for _, sel := range selectors {
			ms, err := promParser.ParseMetricSelector(sel)
			if err != nil {
				t.Fatal(err)
			}
			sets = append(sets, ms)
		}
		type row struct {
			ls  labels.Labels
			t   int64
			val string
		}
		var want []row
		b := labels.NewScratchBuilder(4)
		for _, s := range model {
			if !s.has || s.kind == engine.KindString {
				continue
			}
			ls := promLabels(&b, s.m, s.f, s.tags)
			matched := false
			for _, ms := range sets {
				matched = matched || matchAll(ms, ls)
			}
			if !matched {
				continue
			}
			v, _ := floatOf(s.newest.v)
			want = append(want, row{ls, floorDiv(s.newest.t, 1e6), string(appendFloat(nil, v))})
		}
		slices.SortFunc(want, func(a, b row) int { return labels.Compare(a.ls, b.ls) })
		truncated := len(want) > limit
		if truncated {
			want = want[:limit]
		}
		q := url.Values{"limit": {strconv.Itoa(limit)}, "match[]": selectors}
		code, _, body := ts.do("GET", StatusPath+"?"+q.Encode(), nil)
		if code != 200 {
			t.Fatalf("status %d: %s", code, body)
		}
		var resp struct {
			Data struct {
				Latest []struct {
					Metric map[string]string
					Value  [2]json.RawMessage
				}
				LatestTruncated bool
			}
		}
		if err := json.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatal(err)
		}
		got := resp.Data.Latest
		if resp.Data.LatestTruncated != truncated || len(got) != len(want) || len(want) == 0 {
			t.Fatalf("limit %d: %d latest (truncated %v), want %d (%v)", limit, len(got), resp.Data.LatestTruncated, len(want), truncated)
		}
		for i, w := range want {
			var sec float64
			var val string
			if err := json.Unmarshal(got[i].Value[0], &sec); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(got[i].Value[1], &val); err != nil {
				t.Fatal(err)
			}
			gotLs := labels.FromMap(got[i].Metric)
			if !labels.Equal(gotLs, w.ls) || fmt.Sprint(int64(sec*1000+0.5)) != fmt.Sprint(w.t) || val != w.val {
				t.Errorf("limit %d, row %d: %v %v %q, want %v %d %q", limit, i, gotLs, sec, val, w.ls, w.t, w.val)
			}
		}
	}
}

func sortedTags(tags []engine.Tag) []engine.Tag {
	out := slices.Clone(tags)
	slices.SortFunc(out, func(a, b engine.Tag) int { return strings.Compare(a.Key, b.Key) })
	return out
}
