package server

import (
	"context"
	"net/url"
	"testing"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/stratadb/strata/engine"
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
