package server

import (
	"context"
	"net/url"
	"strconv"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/promname"
)

// TestCollidingTagKeysOneLabel checks that tag keys of one series that
// become the same label name give one label, the values joined by ';' in key
// order, in Select, the matchers and the metadata API: a label set with a
// name twice is invalid, and Prometheus' remote read client refuses it.
func TestCollidingTagKeysOneLabel(t *testing.T) {
	ts := newTestServer(t, nil)
	const ns = int64(1_700_000_000_000_000_000)
	err := ts.db.Write([]engine.Point{
		{Measurement: "m", Tags: []engine.Tag{{Key: "a.b", Value: "x"}, {Key: "a_b", Value: "y"}, {Key: "a-b", Value: "w"}, {Key: "c", Value: "1"}},
			Fields: []engine.Field{{Key: "v", Value: engine.Float(1)}}, Time: ns},
		{Measurement: "m", Tags: []engine.Tag{{Key: "a_b", Value: "z"}},
			Fields: []engine.Field{{Key: "v", Value: engine.Float(2)}}, Time: ns},
	})
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewStorage(ts.db).Querier(0, ns/1e6+1)
	if err != nil {
		t.Fatal(err)
	}
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "m_v"))
	var got []string
	for ss.Next() {
		ls := ss.At().Labels()
		if n, dup := ls.HasDuplicateLabelNames(); dup {
			t.Errorf("%v: label %q twice", ls, n)
		}
		got = append(got, ls.String())
	}
	if err := ss.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{`{__name__="m_v", a_b="w;x;y", c="1"}`, `{__name__="m_v", a_b="z"}`}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Select: %v, want %v", got, want)
	}

	for _, c := range []struct{ path, want string }{
		{"/api/v1/series?match[]=" + url.QueryEscape(`m_v{a_b="w;x;y"}`), `[{"__name__":"m_v","a_b":"w;x;y","c":"1"}]`},
		{"/api/v1/series?match[]=" + url.QueryEscape(`m_v{a_b="y"}`), `[]`},
		{"/api/v1/label/a_b/values", `["w;x;y","z"]`},
		{"/api/v1/query?time=1700000000&query=" + url.QueryEscape(`sum by (a_b) (m_v)`),
			`{"resultType":"vector","result":[{"metric":{"a_b":"w;x;y"},"value":[1700000000,"1"]},{"metric":{"a_b":"z"},"value":[1700000000,"2"]}]}`},
	} {
		code, _, body := ts.do("GET", c.path, nil)
		if want := `{"status":"success","data":` + c.want + "}\n"; code != 200 || body != want {
			t.Errorf("%s: %d %s, want %s", c.path, code, body, want)
		}
	}
}

// TestLabelNamesAsForwarded checks that the query API names tag keys with
// the rule the forwarder sends (internal/promname, which both call): a
// series forwarded over remote write has the labels the query API shows.
// forward's TestPromNamesAsQueryAPI checks the other side.
func TestLabelNamesAsForwarded(t *testing.T) {
	keys := []string{"temp", "tempé", "é", "é1", "日本", "a\xffb", "\xff\xfe", "\xc3", "1a", "9", "a1", "_1",
		"__x", "a:b", "a.b-c d", "a\x00b", "\U0001F600x"}
	pinned := map[string]string{"tempé": "temp_", "日本": "__", "a\xffb": "a_b", "1a": "_a", "": "_", "a:b": "a_b"}
	for k, want := range pinned {
		if got := LabelName(k); got != want {
			t.Errorf("LabelName(%q) = %q, want %q", k, got, want)
		}
	}
	ts := newTestServer(t, nil)
	const ns = int64(1_700_000_000_000_000_000)
	var ps []engine.Point
	for i, k := range keys {
		if got, want := LabelName(k), promname.Label(k); got != want {
			t.Errorf("LabelName(%q) = %q, promname.Label %q", k, got, want)
		}
		// Distinct values: keys that name one label ("é", "\xc3") must not
		// make two strata series one Prometheus series here.
		ps = append(ps, engine.Point{Measurement: "m", Tags: []engine.Tag{{Key: k, Value: strconv.Itoa(i)}},
			Fields: []engine.Field{{Key: "value", Value: engine.Float(float64(i))}}, Time: ns})
	}
	if err := ts.db.Write(ps); err != nil {
		t.Fatal(err)
	}
	q, err := NewStorage(ts.db).Querier(0, ns/1e6+1)
	if err != nil {
		t.Fatal(err)
	}
	ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "m"))
	n := 0
	for ; ss.Next(); n++ {
		s := ss.At()
		it := s.Iterator(nil)
		if it.Next() == chunkenc.ValNone {
			t.Fatalf("%v: no sample", s.Labels())
		}
		_, v := it.At()
		k := keys[int(v)]
		want := labels.FromStrings(labels.MetricName, promname.Metric("m", "value"), promname.Label(k), strconv.Itoa(int(v)))
		if !labels.Equal(s.Labels(), want) {
			t.Errorf("tag key %q: %v, want %v", k, s.Labels(), want)
		}
	}
	if err := ss.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(keys) {
		t.Errorf("%d series, want %d", n, len(keys))
	}
}
